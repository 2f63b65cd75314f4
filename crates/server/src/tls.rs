//! TLS for both listeners (HTTP and Flight SQL): a PEM certificate chain and private
//! key, reloaded in place (SIGHUP) without dropping a connection.
//!
//! Every handshake asks [`Tls`] for the current certificate, so a reload changes what
//! new connections get while established ones keep the session they negotiated. A
//! reload that fails (a missing file, a key that does not match the certificate) keeps
//! the previous certificate: a typo while rotating must not take the server off the air.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

/// Where the certificate chain and its key are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// PEM certificate chain, the server's certificate first.
    pub cert: PathBuf,
    /// PEM private key (PKCS#8, PKCS#1 or SEC1) of the first certificate.
    pub key: PathBuf,
}

/// Why a certificate could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A file could not be read or holds no PEM section of the kind needed.
    #[error("{path}: {reason}")]
    File { path: PathBuf, reason: String },
    /// The key does not fit the certificate, or the crypto provider refuses it.
    #[error("{cert} with {key}: {source}")]
    Invalid {
        cert: PathBuf,
        key: PathBuf,
        source: rustls::Error,
    },
}

/// The current certificate of the server's listeners.
#[derive(Debug)]
pub struct Tls {
    files: TlsFiles,
    provider: Arc<CryptoProvider>,
    current: RwLock<Arc<CertifiedKey>>,
}

impl Tls {
    /// Load the files; an error names the file and what is wrong with it.
    pub fn load(files: TlsFiles) -> Result<Arc<Self>, TlsError> {
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let current = RwLock::new(Arc::new(certified_key(&files, &provider)?));
        Ok(Arc::new(Self {
            files,
            provider,
            current,
        }))
    }

    /// Read the files again and serve the new certificate to new connections; on an
    /// error the previous one stays.
    pub fn reload(&self) -> Result<(), TlsError> {
        let key = Arc::new(certified_key(&self.files, &self.provider)?);
        *self.current.write().unwrap_or_else(|p| p.into_inner()) = key;
        Ok(())
    }

    /// An acceptor offering `alpn` (e.g. `http/1.1`, or `h2` for gRPC).
    pub fn acceptor(self: &Arc<Self>, alpn: &[&[u8]]) -> tokio_rustls::TlsAcceptor {
        let mut config = rustls::ServerConfig::builder_with_provider(Arc::clone(&self.provider))
            .with_safe_default_protocol_versions()
            // The provider is the library's own default: it supports its default versions.
            .expect("aws-lc-rs supports TLS 1.2 and 1.3")
            .with_no_client_auth()
            .with_cert_resolver(Arc::new(Resolver(Arc::clone(self))));
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        tokio_rustls::TlsAcceptor::from(Arc::new(config))
    }
}

/// The TLS handshake of an accepted connection, bounded by `timeout` (a client that
/// stalls mid-handshake must not hold a task forever); `None` when it fails or times out
/// (logged at debug: a port scan is not an event).
pub async fn handshake(
    acceptor: &tokio_rustls::TlsAcceptor,
    stream: tokio::net::TcpStream,
    timeout: std::time::Duration,
) -> Option<tokio_rustls::server::TlsStream<tokio::net::TcpStream>> {
    match tokio::time::timeout(timeout, acceptor.accept(stream)).await {
        Ok(Ok(stream)) => Some(stream),
        Ok(Err(e)) => {
            tracing::debug!(error = %e, "TLS handshake failed");
            None
        }
        Err(_) => {
            tracing::debug!("TLS handshake timed out");
            None
        }
    }
}

#[derive(Debug)]
struct Resolver(Arc<Tls>);

impl ResolvesServerCert for Resolver {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(Arc::clone(
            &self.0.current.read().unwrap_or_else(|p| p.into_inner()),
        ))
    }
}

fn certified_key(files: &TlsFiles, provider: &CryptoProvider) -> Result<CertifiedKey, TlsError> {
    let chain = read_chain(&files.cert)?;
    let key = read_key(&files.key)?;
    CertifiedKey::from_der(chain, key, provider).map_err(|source| TlsError::Invalid {
        cert: files.cert.clone(),
        key: files.key.clone(),
        source,
    })
}

fn file_error(path: &Path, reason: impl ToString) -> TlsError {
    TlsError::File {
        path: path.to_path_buf(),
        reason: reason.to_string(),
    }
}

fn read_chain(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let chain = CertificateDer::pem_file_iter(path)
        .map_err(|e| file_error(path, e))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| file_error(path, e))?;
    if chain.is_empty() {
        return Err(file_error(path, "no PEM CERTIFICATE section"));
    }
    Ok(chain)
}

fn read_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    PrivateKeyDer::from_pem_file(path).map_err(|e| match e {
        rustls::pki_types::pem::Error::NoItemsFound => {
            file_error(path, "no PEM PRIVATE KEY section")
        }
        e => file_error(path, e),
    })
}
