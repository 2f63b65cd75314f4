//! Basic and Bearer(base64) authentication, compared in constant time.

use std::sync::Arc;

use axum::http::HeaderMap;
use base64::Engine;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::config::UserConfig;
use crate::error::ApiError;

/// An authenticated caller.
#[derive(Debug, Clone)]
pub struct User {
    /// Login name.
    pub name: String,
    /// Granted catalogs, in configuration order.
    pub catalogs: Arc<Vec<String>>,
}

impl User {
    /// Whether the user may touch `catalog`.
    pub fn can_see(&self, catalog: &str) -> bool {
        self.catalogs.iter().any(|c| c == catalog)
    }
}

/// The configured users, stored as digests of `user:password` so that every comparison
/// has the same length and runs in constant time.
#[derive(Debug)]
pub struct Authenticator {
    users: Vec<([u8; 32], User)>,
}

fn digest(token: &[u8]) -> [u8; 32] {
    Sha256::digest(token).into()
}

impl Authenticator {
    /// Build from configuration.
    pub fn new(users: &[UserConfig]) -> Self {
        Self {
            users: users
                .iter()
                .map(|u| {
                    (
                        digest(format!("{}:{}", u.name, u.password).as_bytes()),
                        User {
                            name: u.name.clone(),
                            catalogs: Arc::new(u.catalogs.clone()),
                        },
                    )
                })
                .collect(),
        }
    }

    /// Check the `Authorization` header (`Basic <b64>` or `Bearer <same b64>`).
    pub fn authenticate(&self, headers: &HeaderMap) -> Result<User, ApiError> {
        let value = headers
            .get(axum::http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .ok_or(ApiError::Unauthorized)?;
        let (scheme, token) = value.trim().split_once(' ').ok_or(ApiError::Unauthorized)?;
        if !scheme.eq_ignore_ascii_case("basic") && !scheme.eq_ignore_ascii_case("bearer") {
            return Err(ApiError::Unauthorized);
        }
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(token.trim())
            .map_err(|_| ApiError::Unauthorized)?;
        self.check(&decoded)
    }

    /// Check the credentials of a `Basic` authorization value (the part after the scheme),
    /// base64 with or without padding: gRPC clients differ (ADBC's Go driver sends it
    /// unpadded, pyarrow padded).
    pub fn authenticate_basic(&self, credentials: &str) -> Result<User, ApiError> {
        let engine = base64::engine::GeneralPurpose::new(
            &base64::alphabet::STANDARD,
            base64::engine::GeneralPurposeConfig::new()
                .with_decode_padding_mode(base64::engine::DecodePaddingMode::Indifferent),
        );
        let decoded = engine
            .decode(credentials.trim())
            .map_err(|_| ApiError::Unauthorized)?;
        self.check(&decoded)
    }

    /// The user whose `user:password` is `decoded`.
    fn check(&self, decoded: &[u8]) -> Result<User, ApiError> {
        let presented = digest(decoded);
        // Compare against every user without early exit, so timing reveals nothing about
        // which user (if any) matched.
        let mut found: Option<&User> = None;
        for (expected, user) in &self.users {
            if bool::from(expected.ct_eq(&presented)) {
                found = Some(user);
            }
        }
        found.cloned().ok_or(ApiError::Unauthorized)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(value: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(
            axum::http::header::AUTHORIZATION,
            axum::http::HeaderValue::from_str(value).expect("header"),
        );
        h
    }

    #[test]
    fn basic_and_bearer() {
        let auth = Authenticator::new(&[UserConfig {
            name: "alice".into(),
            password: "secret".into(),
            catalogs: vec!["lakehouse".into()],
        }]);
        let token = base64::engine::general_purpose::STANDARD.encode("alice:secret");
        let user = auth
            .authenticate(&headers(&format!("Basic {token}")))
            .expect("basic");
        assert_eq!(user.name, "alice");
        assert!(user.can_see("lakehouse") && !user.can_see("other"));
        assert!(
            auth.authenticate(&headers(&format!("Bearer {token}")))
                .is_ok()
        );
        let wrong = base64::engine::general_purpose::STANDARD.encode("alice:secreT");
        assert!(
            auth.authenticate(&headers(&format!("Basic {wrong}")))
                .is_err()
        );
        assert!(auth.authenticate(&headers("Digest abc")).is_err());
        // Flight's Basic: padded and unpadded base64 of the same credentials (7 bytes,
        // so the padded form ends in "==").
        let ann = Authenticator::new(&[UserConfig {
            name: "ann".into(),
            password: "pas".into(),
            catalogs: vec!["lakehouse".into()],
        }]);
        assert_eq!(
            ann.authenticate_basic("YW5uOnBhcw==").expect("padded").name,
            "ann"
        );
        assert_eq!(
            ann.authenticate_basic("YW5uOnBhcw").expect("unpadded").name,
            "ann"
        );
        assert!(ann.authenticate_basic("YW5uOnBhcx").is_err());
        assert!(ann.authenticate_basic("%%%").is_err());
        assert!(auth.authenticate(&HeaderMap::new()).is_err());
    }
}
