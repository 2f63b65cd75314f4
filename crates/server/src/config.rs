//! Server configuration: where the data lives, who may connect, and resource limits.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use crate::catalog::validate_name;
use crate::error::ConfigError;

/// Default of [`ServerConfig::query_footer_cache_bytes`] (DataFusion's own default).
pub const DEFAULT_QUERY_FOOTER_CACHE_BYTES: usize = 50 * deltalite::MIB;

/// Default of [`ServerConfig::query_table_cache_files`]: about 100 MB of kept file lists
/// at most (a file's entry in a loaded snapshot takes about 1 KB with its statistics).
pub const DEFAULT_QUERY_TABLE_CACHE_FILES: usize = 100_000;

/// Default of [`ServerConfig::max_body_bytes`]: 10 GiB.
pub const DEFAULT_MAX_BODY_BYTES: u64 = 10 * 1024 * deltalite::MIB as u64;

/// Default of [`ServerConfig::query_timeout`].
pub const DEFAULT_QUERY_TIMEOUT: Duration = Duration::from_secs(300);

/// Default of [`ServerConfig::query_memory_bytes`]: 1 GiB.
pub const DEFAULT_QUERY_MEMORY_BYTES: usize = 1024 * deltalite::MIB;

/// Default of [`ServerConfig::body_idle_timeout`].
pub const DEFAULT_BODY_IDLE_TIMEOUT: Duration = Duration::from_secs(60);

/// Default of [`ServerConfig::key_cache_bytes`]: the engine's own
/// (`DELTALITE_PROBE_CACHE_BYTES`, 128 MiB).
pub fn default_key_cache_bytes() -> usize {
    deltalite::options::EnvDefaults::get().probe_cache_bytes
}

/// Default of [`ServerConfig::malloc_trim_interval`].
pub const DEFAULT_MALLOC_TRIM_INTERVAL: Duration = Duration::from_secs(10);

/// Default of the CLI's `--flight-listen` (Altertable's Flight SQL port).
pub const DEFAULT_FLIGHT_LISTEN: &str = "127.0.0.1:15002";

/// Default of [`ServerConfig::flight_session_idle_timeout`].
pub const DEFAULT_FLIGHT_SESSION_IDLE_TIMEOUT: Duration = Duration::from_secs(30 * 60);

/// Default of [`ServerConfig::flight_max_sessions`].
pub const DEFAULT_FLIGHT_MAX_SESSIONS: usize = 1000;

/// Default of [`ServerConfig::shutdown_timeout`].
pub const DEFAULT_SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(30);

/// Default of [`MaintenanceConfig::interval`].
pub const DEFAULT_MAINTENANCE_INTERVAL: Duration = Duration::from_secs(60);

/// Default of [`MaintenanceConfig::min_small_files`].
pub const DEFAULT_MAINTENANCE_MIN_SMALL_FILES: usize = 16;

/// Default of [`MaintenanceConfig::vacuum_interval`].
pub const DEFAULT_MAINTENANCE_VACUUM_INTERVAL: Duration = Duration::from_secs(6 * 3600);

/// Default of [`MaintenanceConfig::memory_bytes`].
pub const DEFAULT_MAINTENANCE_MEMORY_BYTES: usize = 64 * deltalite::MIB;

/// The background maintainer's settings (`maintainer.rs`).
#[derive(Debug, Clone)]
pub struct MaintenanceConfig {
    /// Whether it runs at all.
    pub enabled: bool,
    /// Time between the starts of two passes over every table.
    pub interval: Duration,
    /// A partition with at least this many files below the target size is compacted.
    pub min_small_files: usize,
    /// Shortest time between two vacuums of one table.
    pub vacuum_interval: Duration,
    /// Tables maintained at once.
    pub max_tables: usize,
    /// Bytes a compaction's open output row groups may hold.
    pub memory_bytes: usize,
}

impl Default for MaintenanceConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            interval: DEFAULT_MAINTENANCE_INTERVAL,
            min_small_files: DEFAULT_MAINTENANCE_MIN_SMALL_FILES,
            vacuum_interval: DEFAULT_MAINTENANCE_VACUUM_INTERVAL,
            max_tables: 1,
            memory_bytes: DEFAULT_MAINTENANCE_MEMORY_BYTES,
        }
    }
}

/// How a user's password is known to the server.
#[derive(Clone, PartialEq, Eq)]
pub enum Password {
    /// The password itself (the quick start's `--users alice:secret`).
    Plain(String),
    /// An argon2 PHC string (`$argon2id$v=19$…`, from `deltalite hash-password`),
    /// checked once per process and password, then remembered as a digest.
    Argon2(String),
}

impl std::fmt::Debug for Password {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never a password in a log line or a panic message.
        f.write_str(match self {
            Password::Plain(_) => "Plain(..)",
            Password::Argon2(_) => "Argon2(..)",
        })
    }
}

/// One configured user and the catalogs it may see.
#[derive(Debug, Clone)]
pub struct UserConfig {
    /// Login name.
    pub name: String,
    /// Password or its hash.
    pub password: Password,
    /// Catalogs this user may read and write.
    pub catalogs: Vec<String>,
}

/// A user as configured, before grants are applied: `catalogs` `None` takes its entry
/// in the grants, else every catalog.
#[derive(Debug, Clone)]
pub struct UserSpec {
    /// Login name.
    pub name: String,
    /// Password or its hash.
    pub password: Password,
    /// The user's own catalog list (a config file's `catalogs = [...]`).
    pub catalogs: Option<Vec<String>>,
}

/// Whether `phc` is an argon2 hash this server can verify against.
pub fn check_argon2_hash(phc: &str) -> Result<(), String> {
    let parsed = argon2::password_hash::phc::PasswordHash::new(phc).map_err(|e| e.to_string())?;
    if !parsed.algorithm.as_str().starts_with("argon2") {
        return Err(format!(
            "{} is not an argon2 hash (make one with `deltalite hash-password`)",
            parsed.algorithm
        ));
    }
    Ok(())
}

/// Parse `user:password,...` (the `--users` form): plain passwords, no catalogs of
/// their own.
pub fn parse_user_list(users: &str) -> Result<Vec<UserSpec>, ConfigError> {
    split_list(users)
        .into_iter()
        .map(|entry| {
            let (name, password) = entry.split_once(':').ok_or_else(|| {
                ConfigError(format!("user entry {entry:?} must look like user:password"))
            })?;
            if name.is_empty() || password.is_empty() {
                return Err(ConfigError(format!(
                    "user entry for {name:?} needs a name and a password"
                )));
            }
            Ok(UserSpec {
                name: name.to_string(),
                password: Password::Plain(password.to_string()),
                catalogs: None,
            })
        })
        .collect()
}

/// Everything `deltalite serve` needs.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Data root: a local directory or an object-store URI (`s3://`, `az://`, `gs://`).
    pub data_root: String,
    /// Object-store options (`AWS_REGION`, `AWS_ENDPOINT_URL`, ...), passed to delta-rs.
    pub storage_options: HashMap<String, String>,
    /// Address to bind.
    pub listen: SocketAddr,
    /// Users and their grants.
    pub users: Vec<UserConfig>,
    /// Catalogs that exist (created at startup when missing).
    pub catalogs: Vec<String>,
    /// Largest accepted request body in bytes (`413` above).
    pub max_body_bytes: u64,
    /// Wall-clock limit of one `/query` request.
    pub query_timeout: Duration,
    /// Memory all running queries may hold together in their sorts, joins and
    /// aggregations (DataFusion's memory pool); a query that needs more spills to disk
    /// where the operator can, else fails with "Resources exhausted".
    pub query_memory_bytes: usize,
    /// Bytes of decoded Parquet footers the query runtime caches across queries (an LRU
    /// shared by all queries; DataFusion's default is 50 MiB). Part of the server's
    /// steady memory: with many small files it fills within minutes.
    pub query_footer_cache_bytes: usize,
    /// Active files the tables kept open between queries may hold together
    /// (`crate::snapshots`); 0 opens every table afresh for every query.
    pub query_table_cache_files: usize,
    /// Longest wait for the next piece of a request body (an idle timeout, not a limit on
    /// the whole upload): a client that stops sending, or drips a few bytes at a time
    /// slower than this, gets a 400 and the connection is closed.
    pub body_idle_timeout: Duration,
    /// Directory for upload spool files; the system temp dir when `None`.
    pub spool_dir: Option<PathBuf>,
    /// Most entries the query log (`GET /query/{id}`) keeps; older finished ones are
    /// dropped first.
    pub query_log_entries: usize,
    /// Most bytes (statements, errors and the other logged text, approximately) the query
    /// log keeps; older finished entries are dropped first.
    pub query_log_bytes: usize,
    /// How often the server hands the free memory malloc holds back to the OS
    /// (`malloc_trim`); `None` never.
    pub malloc_trim_interval: Option<Duration>,
    /// Address of the Arrow Flight SQL endpoint; `None` serves HTTP only. (Off here by
    /// default, so embedders and tests opt in; the CLI's default is
    /// [`DEFAULT_FLIGHT_LISTEN`].)
    pub flight_listen: Option<SocketAddr>,
    /// A Flight SQL session unused this long is closed (its token then answers
    /// `Session expired`, its prepared statements and unfetched results are dropped).
    pub flight_session_idle_timeout: Duration,
    /// Most Flight SQL sessions held at once; a handshake beyond it closes the least
    /// recently used session.
    pub flight_max_sessions: usize,
    /// The background maintainer (compaction, vacuum).
    pub maintenance: MaintenanceConfig,
    /// Tables this server creates get `delta.enableDeletionVectors=true`: upserts,
    /// `DELETE`, `UPDATE` and `MERGE` then mark the few changed rows of a file deleted in
    /// a deletion vector instead of rewriting it (readers need Delta reader version 3).
    pub deletion_vectors: bool,
    /// Bound, in bytes, of the engine's key cache (each data file's keys, shared by every
    /// upsert of the process, `deltalite::runtime::probe_cache`); `0` turns it off.
    pub key_cache_bytes: usize,
    /// Whether upserts fill the key cache in the background with the keys of the files
    /// they probed (so the next upsert into a hot table decides them unread).
    pub key_cache_fill: bool,
    /// TLS certificate and key of both listeners; `None` serves plain HTTP and gRPC.
    pub tls: Option<crate::tls::TlsFiles>,
    /// After the shutdown signal, how long in-flight requests may take to finish before
    /// the server stops anyway (their connections are dropped).
    pub shutdown_timeout: Duration,
}

impl ServerConfig {
    /// Build a configuration from the CLI's textual forms.
    ///
    /// `users`: `user:password,...`. `grants`: `user=cat1+cat2,...`; a user without a
    /// grant entry sees every configured catalog.
    pub fn from_parts(
        data_root: String,
        listen: SocketAddr,
        users: &str,
        grants: Option<&str>,
        catalogs: &str,
    ) -> Result<Self, ConfigError> {
        Self::from_users(data_root, listen, parse_user_list(users)?, grants, catalogs)
    }

    /// Build a configuration from parsed users (the config file's `[[user]]` tables and
    /// `--users`). A user's own catalog list wins over its `grants` entry.
    pub fn from_users(
        data_root: String,
        listen: SocketAddr,
        users: Vec<UserSpec>,
        grants: Option<&str>,
        catalogs: &str,
    ) -> Result<Self, ConfigError> {
        let catalogs = split_list(catalogs);
        if catalogs.is_empty() {
            return Err(ConfigError(
                "at least one catalog must be configured".into(),
            ));
        }
        for catalog in &catalogs {
            validate_name("catalog", catalog).map_err(|e| ConfigError(e.to_string()))?;
        }
        let known = |user: &str, cat: &String| {
            if catalogs.contains(cat) {
                Ok(())
            } else {
                Err(ConfigError(format!(
                    "grant for {user:?} names unknown catalog {cat:?}"
                )))
            }
        };
        let mut grant_map: BTreeMap<String, Vec<String>> = BTreeMap::new();
        if let Some(grants) = grants {
            for entry in split_list(grants) {
                let (user, cats) = entry.split_once('=').ok_or_else(|| {
                    ConfigError(format!("grant {entry:?} must look like user=cat1+cat2"))
                })?;
                let cats: Vec<String> = cats
                    .split('+')
                    .map(str::trim)
                    .filter(|c| !c.is_empty())
                    .map(String::from)
                    .collect();
                for cat in &cats {
                    known(user, cat)?;
                }
                grant_map.insert(user.trim().to_string(), cats);
            }
        }
        let mut parsed: Vec<UserConfig> = Vec::new();
        for user in users {
            if user.name.is_empty() || user.name.contains(':') {
                return Err(ConfigError(format!(
                    "user name {:?} must be non-empty and hold no ':'",
                    user.name
                )));
            }
            if parsed.iter().any(|u| u.name == user.name) {
                return Err(ConfigError(format!(
                    "user {:?} is configured twice",
                    user.name
                )));
            }
            if let Password::Argon2(phc) = &user.password {
                check_argon2_hash(phc).map_err(|e| {
                    ConfigError(format!("password hash of user {:?}: {e}", user.name))
                })?;
            }
            let granted = match user.catalogs {
                Some(own) => {
                    for cat in &own {
                        known(&user.name, cat)?;
                    }
                    own
                }
                None => grant_map
                    .get(&user.name)
                    .cloned()
                    .unwrap_or_else(|| catalogs.clone()),
            };
            parsed.push(UserConfig {
                name: user.name,
                password: user.password,
                catalogs: granted,
            });
        }
        if parsed.is_empty() {
            return Err(ConfigError(
                "no users configured: every endpoint needs auth, pass --users user:password or [[user]] tables in --config".into(),
            ));
        }
        Ok(Self {
            data_root,
            storage_options: HashMap::new(),
            listen,
            users: parsed,
            catalogs,
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            query_timeout: DEFAULT_QUERY_TIMEOUT,
            query_memory_bytes: DEFAULT_QUERY_MEMORY_BYTES,
            query_footer_cache_bytes: DEFAULT_QUERY_FOOTER_CACHE_BYTES,
            query_table_cache_files: DEFAULT_QUERY_TABLE_CACHE_FILES,
            body_idle_timeout: DEFAULT_BODY_IDLE_TIMEOUT,
            spool_dir: None,
            query_log_entries: crate::registry::DEFAULT_QUERY_LOG_ENTRIES,
            query_log_bytes: crate::registry::DEFAULT_QUERY_LOG_BYTES,
            malloc_trim_interval: Some(DEFAULT_MALLOC_TRIM_INTERVAL),
            flight_listen: None,
            flight_session_idle_timeout: DEFAULT_FLIGHT_SESSION_IDLE_TIMEOUT,
            flight_max_sessions: DEFAULT_FLIGHT_MAX_SESSIONS,
            maintenance: MaintenanceConfig::default(),
            deletion_vectors: false,
            key_cache_bytes: default_key_cache_bytes(),
            key_cache_fill: true,
            tls: None,
            shutdown_timeout: DEFAULT_SHUTDOWN_TIMEOUT,
        })
    }
}

/// Split a comma list, trimming entries and dropping empties.
pub fn split_list(s: &str) -> Vec<String> {
    s.split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(String::from)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr() -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], 0))
    }

    #[test]
    fn users_and_grants() {
        let c = ServerConfig::from_parts(
            "x".into(),
            addr(),
            "alice:s:ecret, bob:pw",
            Some("bob=b+a"),
            "a,b",
        )
        .expect("config");
        assert_eq!(c.users[0].name, "alice");
        assert_eq!(c.users[0].password, Password::Plain("s:ecret".into()));
        assert_eq!(c.users[0].catalogs, vec!["a", "b"]);
        assert_eq!(c.users[1].catalogs, vec!["b", "a"]);
    }

    #[test]
    fn bad_configs_are_refused() {
        assert!(ServerConfig::from_parts("x".into(), addr(), "", None, "a").is_err());
        assert!(ServerConfig::from_parts("x".into(), addr(), "nopw", None, "a").is_err());
        assert!(ServerConfig::from_parts("x".into(), addr(), "u:p", Some("u=zz"), "a").is_err());
        assert!(ServerConfig::from_parts("x".into(), addr(), "u:p", None, "../x").is_err());
        assert!(ServerConfig::from_parts("x".into(), addr(), "u:p", None, " , ").is_err());
    }
}
