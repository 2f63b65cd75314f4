//! `deltalite serve`: its flags, their environment twins and the config file, layered
//! flags > env > file > defaults, into a [`ServerConfig`].

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::parser::ValueSource;
use clap::{ArgMatches, Args};
use deltalite_server::ServerConfig;
use deltalite_server::config::{Password, UserSpec, parse_user_list};
use figment::Figment;
use figment::providers::{Format, Serialized, Toml};
use serde::{Deserialize, Serialize};

#[derive(Debug, Args, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ServeArgs {
    /// A TOML file with any of these settings under their long names with underscores
    /// (`query_memory_mb = 2048`), users with argon2 password hashes (`[[user]]` tables:
    /// `name`, `password_hash` or `password_file`, `catalogs`) and storage options (a
    /// `[storage]` table). Flags win over their environment twins, which win over the
    /// file, which wins over the defaults. See the server README's "Deploy" section.
    #[arg(long, env = "DELTALITE_CONFIG")]
    #[serde(skip)]
    config: Option<PathBuf>,

    /// Data root: a local directory (created if missing) or an object-store URI such as
    /// s3://bucket/prefix, az://container/prefix or gs://bucket/prefix (configure access
    /// with --storage-option or the config file's [storage] table).
    #[arg(long, env = "DELTALITE_DATA", default_value = "./lakehouse")]
    data: String,

    /// Address to listen on; port 0 picks a free port (the bound address is printed as
    /// `listening on http://ADDR`).
    #[arg(long, env = "DELTALITE_LISTEN", default_value = "127.0.0.1:15000")]
    listen: SocketAddr,

    /// Address of the Arrow Flight SQL endpoint (gRPC); empty turns it off. Port 0 picks a
    /// free port (printed as `flight listening on grpc://ADDR`, the line after the HTTP one).
    #[arg(long, env = "DELTALITE_FLIGHT_LISTEN", default_value = deltalite_server::config::DEFAULT_FLIGHT_LISTEN)]
    flight_listen: String,

    /// A Flight SQL session unused this many seconds is closed: its token then answers
    /// "Session expired" (clients reconnect), its prepared statements and scratch
    /// catalogs are dropped.
    #[arg(long, env = "DELTALITE_FLIGHT_SESSION_IDLE_SECS", default_value_t = deltalite_server::config::DEFAULT_FLIGHT_SESSION_IDLE_TIMEOUT.as_secs())]
    flight_session_idle_secs: u64,

    /// Most Flight SQL sessions open at once; a new one closes the least recently used.
    #[arg(long, env = "DELTALITE_FLIGHT_MAX_SESSIONS", default_value_t = deltalite_server::config::DEFAULT_FLIGHT_MAX_SESSIONS)]
    flight_max_sessions: usize,

    /// Users allowed to connect, as user:password pairs separated by commas. Clients send
    /// `Authorization: Basic base64(user:password)` (or `Bearer` with the same token).
    /// For anything but a quick start, prefer --users-file or hashed passwords in --config
    /// (a flag's value is visible to every local user in `ps`).
    #[arg(long, env = "DELTALITE_USERS", hide_env_values = true)]
    users: Option<String>,

    /// A file holding the --users list (user:password entries separated by commas or
    /// newlines), e.g. a mounted secret.
    #[arg(long, env = "DELTALITE_USERS_FILE")]
    users_file: Option<PathBuf>,

    /// Catalog grants, as user=cat1+cat2 entries separated by commas. A user without an entry
    /// may use every catalog.
    #[arg(long, env = "DELTALITE_GRANTS")]
    grants: Option<String>,

    /// Catalogs that exist (created under the data root at startup), separated by commas.
    #[arg(long, env = "DELTALITE_CATALOGS", default_value = "lakehouse")]
    #[serde(deserialize_with = "comma_list")]
    catalogs: String,

    /// Largest accepted request body in bytes; larger bodies get 413.
    #[arg(long, env = "DELTALITE_MAX_BODY_BYTES", default_value_t = deltalite_server::config::DEFAULT_MAX_BODY_BYTES)]
    max_body_bytes: u64,

    /// Wall-clock limit of one /query request, in seconds.
    #[arg(long, env = "DELTALITE_QUERY_TIMEOUT_SECS", default_value_t = deltalite_server::config::DEFAULT_QUERY_TIMEOUT.as_secs())]
    query_timeout_secs: u64,

    /// Memory, in MiB, that all running queries may hold together in sorts, joins,
    /// aggregations and the source a key MERGE hands to the upsert engine; beyond it they
    /// spill to disk or fail with "Resources exhausted" (a write whose hash join does not
    /// fit runs once more with sort-merge joins, which spill; a MERGE source that does not
    /// fit takes the general MERGE path, whose joins spill).
    #[arg(long, env = "DELTALITE_QUERY_MEMORY_MB", default_value_t = deltalite_server::config::DEFAULT_QUERY_MEMORY_BYTES / deltalite::MIB)]
    query_memory_mb: usize,

    /// Longest pause, in seconds, between two pieces of a request body before the request
    /// is answered with 400 (an idle timeout; long uploads that keep sending are fine).
    #[arg(long, env = "DELTALITE_BODY_IDLE_TIMEOUT_SECS", default_value_t = deltalite_server::config::DEFAULT_BODY_IDLE_TIMEOUT.as_secs())]
    body_idle_timeout_secs: u64,

    /// Directory for upload spool files (default: `<data>/.spool` for a local data root, so
    /// uploaded Parquet moves into its table without a copy; else the system temp dir).
    #[arg(long, env = "DELTALITE_SPOOL_DIR")]
    spool_dir: Option<PathBuf>,

    /// Object-store option KEY=VALUE (e.g. AWS_REGION=us-east-1, AWS_ENDPOINT_URL=...,
    /// AWS_ALLOW_HTTP=true); repeat the flag, or separate with commas in the env twin.
    #[arg(
        long = "storage-option",
        env = "DELTALITE_STORAGE_OPTIONS",
        value_delimiter = ',',
        hide_env_values = true
    )]
    storage_options: Vec<String>,

    /// Most queries the query log (GET /query/{id}) remembers; beyond it the oldest
    /// finished ones are forgotten (their ids answer 404). Bounds the server's memory.
    #[arg(long, env = "DELTALITE_QUERY_LOG_ENTRIES", default_value_t = deltalite_server::registry::DEFAULT_QUERY_LOG_ENTRIES)]
    query_log_entries: usize,

    /// Most memory, in MiB, the query log may hold (statements are logged up to 64 KiB
    /// each); beyond it the oldest finished queries are forgotten.
    #[arg(long, env = "DELTALITE_QUERY_LOG_MB", default_value_t = deltalite_server::registry::DEFAULT_QUERY_LOG_BYTES / deltalite::MIB)]
    query_log_mb: usize,

    /// Every this many seconds, hand the memory malloc holds free back to the OS
    /// (glibc's malloc_trim); 0 never. Without it the RSS stays near the highest memory
    /// use seen so far, even when that memory is free.
    #[arg(long, env = "DELTALITE_MALLOC_TRIM_SECS", default_value_t = deltalite_server::config::DEFAULT_MALLOC_TRIM_INTERVAL.as_secs())]
    malloc_trim_secs: u64,

    /// Memory, in MiB, for decoded Parquet footers that queries share (an LRU cache);
    /// 0 turns the cache off.
    #[arg(long, env = "DELTALITE_QUERY_FOOTER_CACHE_MB", default_value_t = deltalite_server::config::DEFAULT_QUERY_FOOTER_CACHE_BYTES / deltalite::MIB)]
    query_footer_cache_mb: usize,

    /// Tables stay open between queries, so that a query reads only the commits made
    /// since the one before it; this many active files (about 1 KB each) at most, held
    /// by the kept tables together; 0 opens every table afresh for every query.
    #[arg(long, env = "DELTALITE_QUERY_TABLE_CACHE_FILES", default_value_t = deltalite_server::config::DEFAULT_QUERY_TABLE_CACHE_FILES)]
    query_table_cache_files: usize,

    /// Background maintenance of every table: compaction of partitions with many small
    /// files and vacuum of files no version within the retention reads. `off` leaves
    /// tables as written (run OPTIMIZE / VACUUM yourself); a table opts out with
    /// `ALTER TABLE t SET TBLPROPERTIES ('deltalite.maintenance' = 'off')`.
    #[arg(long, env = "DELTALITE_MAINTENANCE", default_value = "on", value_parser = ["on", "off"])]
    maintenance: String,

    /// Seconds between two maintenance passes over every table.
    #[arg(long, env = "DELTALITE_MAINTENANCE_INTERVAL_SECS", default_value_t = deltalite_server::config::DEFAULT_MAINTENANCE_INTERVAL.as_secs())]
    maintenance_interval_secs: u64,

    /// A partition is compacted once it holds this many files below the table's target
    /// file size.
    #[arg(long, env = "DELTALITE_MAINTENANCE_MIN_SMALL_FILES", default_value_t = deltalite_server::config::DEFAULT_MAINTENANCE_MIN_SMALL_FILES)]
    maintenance_min_small_files: usize,

    /// Shortest time, in seconds, between two vacuums of one table (each lists the
    /// table's folder). Files are deleted only once older than the table's
    /// delta.deletedFileRetentionDuration (7 days unless set).
    #[arg(long, env = "DELTALITE_MAINTENANCE_VACUUM_INTERVAL_SECS", default_value_t = deltalite_server::config::DEFAULT_MAINTENANCE_VACUUM_INTERVAL.as_secs())]
    maintenance_vacuum_interval_secs: u64,

    /// Tables maintained at the same time.
    #[arg(long, env = "DELTALITE_MAINTENANCE_TABLES", default_value_t = 1)]
    maintenance_tables: usize,

    /// Memory, in MiB, a compaction's output buffers may hold.
    #[arg(long, env = "DELTALITE_MAINTENANCE_MEMORY_MB", default_value_t = deltalite_server::config::DEFAULT_MAINTENANCE_MEMORY_BYTES / deltalite::MIB)]
    maintenance_memory_mb: usize,

    /// Tables the server creates write deletion vectors (delta.enableDeletionVectors =
    /// true): an upsert, DELETE, UPDATE or MERGE that changes few rows of a file marks them
    /// deleted instead of rewriting the file. Readers need Delta reader version 3 (Spark
    /// 3.4+, delta-rs/deltalake 1.x, DuckDB, polars). One table at a time:
    /// `ALTER TABLE t SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')`.
    #[arg(long, env = "DELTALITE_DELETION_VECTORS", default_value = "off", value_parser = ["on", "off"])]
    deletion_vectors: String,

    /// Memory, in MiB, for the upsert engine's key cache: each data file's keys (with
    /// their row positions for a key of one integer column), shared by every upsert, so
    /// that a repeated upsert into a hot table decides files without reading their key
    /// columns (4-12 bytes a key: 128 MiB holds 11M-33M keys). 0 turns it off.
    #[arg(long, env = "DELTALITE_KEY_CACHE_MB", default_value_t = deltalite_server::config::default_key_cache_bytes() / deltalite::MIB)]
    key_cache_mb: usize,

    /// After each upsert, read in the background the keys of the files it probed but
    /// did not read in full, into the key cache (never evicting: a table larger than the
    /// cache is read once, not on every upsert).
    #[arg(long, env = "DELTALITE_KEY_CACHE_FILL", default_value = "on", value_parser = ["on", "off"])]
    key_cache_fill: String,

    /// PEM certificate chain for TLS on both listeners (HTTP becomes HTTPS, Flight SQL
    /// gRPC over TLS); needs --tls-key. SIGHUP reloads both files: new connections get
    /// the new certificate, established ones keep theirs; a failed reload keeps the old.
    #[arg(long, env = "DELTALITE_TLS_CERT", requires = "tls_key")]
    tls_cert: Option<PathBuf>,

    /// PEM private key of the --tls-cert certificate.
    #[arg(long, env = "DELTALITE_TLS_KEY", requires = "tls_cert")]
    tls_key: Option<PathBuf>,

    /// After SIGTERM/SIGINT, seconds in-flight requests may take to finish before the
    /// server stops anyway.
    #[arg(long, alias = "shutdown-timeout", env = "DELTALITE_SHUTDOWN_TIMEOUT_SECS", default_value_t = deltalite_server::config::DEFAULT_SHUTDOWN_TIMEOUT.as_secs())]
    shutdown_timeout_secs: u64,

    /// Log filter (tracing's EnvFilter syntax), e.g. info or deltalite_server=debug;
    /// without it, RUST_LOG, else info.
    #[arg(long, env = "DELTALITE_LOG")]
    log: Option<String>,

    /// Log lines as text or as one JSON object each (for collectors); every line of a
    /// request carries its request_id (the client's X-Request-Id, else a new one).
    #[arg(long, env = "DELTALITE_LOG_FORMAT", default_value = "text", value_parser = ["text", "json"])]
    log_format: String,

    /// `[[user]]` tables of the config file.
    #[arg(skip)]
    #[serde(default, skip_serializing)]
    user: Vec<FileUser>,

    /// The `[storage]` table of the config file (values may hold commas and JSON);
    /// --storage-option flags win over it key by key.
    #[arg(skip)]
    #[serde(default, skip_serializing)]
    storage: BTreeMap<String, String>,
}

/// A `[[user]]` table of the config file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileUser {
    name: String,
    /// An argon2 PHC string from `deltalite hash-password`.
    password_hash: Option<String>,
    /// A file holding the password itself (a mounted secret).
    password_file: Option<PathBuf>,
    /// The user's catalogs; every catalog when absent.
    catalogs: Option<Vec<String>>,
}

/// A comma-separated string or a list (`catalogs = ["a", "b"]` in the file).
fn comma_list<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum List {
        Text(String),
        Items(Vec<String>),
    }
    Ok(match List::deserialize(d)? {
        List::Text(s) => s,
        List::Items(v) => v.join(","),
    })
}

impl ServeArgs {
    /// The settings with the config file (if any) under the flags and environment:
    /// flags > env > file > defaults. `matches` are the `serve` subcommand's, which say
    /// where each value came from.
    fn layered(self, matches: &ArgMatches) -> anyhow::Result<Self> {
        let Some(path) = self.config.clone() else {
            return Ok(self);
        };
        if !path.is_file() {
            anyhow::bail!("config file {}: not found", path.display());
        }
        let all = serde_json::to_value(&self)?;
        let mut explicit = serde_json::Map::new();
        for id in matches.ids() {
            let given = matches!(
                matches.value_source(id.as_str()),
                Some(ValueSource::CommandLine | ValueSource::EnvVariable)
            );
            if given && let Some(value) = all.get(id.as_str()) {
                explicit.insert(id.to_string(), value.clone());
            }
        }
        let mut layered: Self = Figment::new()
            .merge(Serialized::defaults(&self))
            .merge(Toml::file_exact(&path))
            .merge(Serialized::defaults(explicit))
            .extract()
            .map_err(|e| anyhow::anyhow!("config file {}: {e}", path.display()))?;
        layered.config = Some(path);
        Ok(layered)
    }

    /// Every configured user: --users, --users-file and the file's `[[user]]` tables.
    fn users(&self) -> anyhow::Result<Vec<UserSpec>> {
        let mut users = Vec::new();
        if let Some(list) = &self.users {
            users.extend(parse_user_list(list)?);
        }
        if let Some(path) = &self.users_file {
            let text = read_secret(path, "--users-file")?;
            users.extend(parse_user_list(&text.replace('\n', ","))?);
        }
        for u in &self.user {
            let password = match (&u.password_hash, &u.password_file) {
                (Some(phc), None) => Password::Argon2(phc.clone()),
                (None, Some(path)) => Password::Plain(
                    read_secret(path, &format!("password_file of user {:?}", u.name))?
                        .trim_end_matches(['\r', '\n'])
                        .to_string(),
                ),
                _ => anyhow::bail!(
                    "user {:?} in the config file needs exactly one of password_hash and password_file",
                    u.name
                ),
            };
            users.push(UserSpec {
                name: u.name.clone(),
                password,
                catalogs: u.catalogs.clone(),
            });
        }
        Ok(users)
    }

    /// The storage options: the file's `[storage]` table, then the flags.
    fn storage_options(&self) -> anyhow::Result<HashMap<String, String>> {
        let mut options: HashMap<String, String> = self.storage.clone().into_iter().collect();
        options.extend(crate::storage_options(&self.storage_options)?);
        Ok(options)
    }
}

fn read_secret(path: &Path, what: &str) -> anyhow::Result<String> {
    std::fs::read_to_string(path).map_err(|e| anyhow::anyhow!("{what} {}: {e}", path.display()))
}

/// The server's log: `--log`, else `RUST_LOG`, else `info`; text or JSON lines on stderr.
fn init_server_log(filter: Option<&str>, format: &str) {
    let filter = filter
        .map(String::from)
        .or_else(|| std::env::var("RUST_LOG").ok())
        .unwrap_or_else(|| "info".to_string());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
        .with_writer(std::io::stderr);
    if format == "json" {
        // The request's span (its request_id) sits in every line's `span`/`spans` fields.
        builder
            .json()
            .with_current_span(true)
            .with_span_list(true)
            .init();
    } else {
        // Colour codes only on a terminal; log files and collectors get plain text.
        builder
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .init();
    }
}

/// `deltalite serve`: settings from flags, environment and config file, then the server
/// until SIGTERM/SIGINT.
pub(crate) fn run(args: ServeArgs, matches: &ArgMatches) -> anyhow::Result<()> {
    let args = args.layered(matches)?;
    init_server_log(args.log.as_deref(), &args.log_format);
    let mut config = ServerConfig::from_users(
        args.data.clone(),
        args.listen,
        args.users()?,
        args.grants.as_deref(),
        &args.catalogs,
    )?;
    config.storage_options = args.storage_options()?;
    config.max_body_bytes = args.max_body_bytes;
    config.query_timeout = Duration::from_secs(args.query_timeout_secs.max(1));
    config.query_memory_bytes = args.query_memory_mb.max(1).saturating_mul(deltalite::MIB);
    config.body_idle_timeout = Duration::from_secs(args.body_idle_timeout_secs.max(1));
    config.spool_dir = args.spool_dir.clone();
    config.query_log_entries = args.query_log_entries.max(1);
    config.query_log_bytes = args.query_log_mb.saturating_mul(deltalite::MIB);
    config.query_footer_cache_bytes = args.query_footer_cache_mb.saturating_mul(deltalite::MIB);
    config.query_table_cache_files = args.query_table_cache_files;
    config.malloc_trim_interval =
        (args.malloc_trim_secs > 0).then(|| Duration::from_secs(args.malloc_trim_secs));
    let flight = args.flight_listen.trim();
    config.flight_listen = if flight.is_empty() {
        None
    } else {
        Some(flight.parse::<SocketAddr>().map_err(|e| {
            anyhow::anyhow!(
                "--flight-listen {flight:?} is not an address like 127.0.0.1:15002: {e}"
            )
        })?)
    };
    config.flight_session_idle_timeout = Duration::from_secs(args.flight_session_idle_secs.max(1));
    config.tls = match (args.tls_cert, args.tls_key) {
        (Some(cert), Some(key)) => Some(deltalite_server::tls::TlsFiles { cert, key }),
        (None, None) => None,
        _ => anyhow::bail!("tls_cert and tls_key go together: set both or neither"),
    };
    config.shutdown_timeout = Duration::from_secs(args.shutdown_timeout_secs);
    config.flight_max_sessions = args.flight_max_sessions.max(1);
    config.deletion_vectors = args.deletion_vectors == "on";
    config.key_cache_bytes = args.key_cache_mb.saturating_mul(deltalite::MIB);
    config.key_cache_fill = args.key_cache_fill == "on";
    config.maintenance = deltalite_server::config::MaintenanceConfig {
        enabled: args.maintenance == "on",
        interval: Duration::from_secs(args.maintenance_interval_secs.max(1)),
        min_small_files: args.maintenance_min_small_files.max(2),
        vacuum_interval: Duration::from_secs(args.maintenance_vacuum_interval_secs),
        max_tables: args.maintenance_tables.max(1),
        memory_bytes: args
            .maintenance_memory_mb
            .max(1)
            .saturating_mul(deltalite::MIB),
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        // DataFusion plans and evaluates expressions recursively; SQL nesting is capped
        // (`sql::MAX_EXPR_DEPTH`), and the larger stack (virtual memory, touched only as
        // deep as used) keeps that cap far from an overflow, in debug builds too.
        .thread_stack_size(16 * deltalite::MIB)
        .build()?;
    runtime.block_on(deltalite_server::serve(
        config,
        deltalite_server::shutdown_signal(),
    ))?;
    Ok(())
}
