//! `deltalite`: command line of the deltalite lakehouse.
//!
//! `deltalite serve` runs the lakehouse HTTP API (Altertable-compatible) over Delta tables,
//! and its Arrow Flight SQL endpoint; the data commands (`data.rs`: `upsert`, `append`,
//! `overwrite`, `create`, `query`) write files into a table and query tables; the table
//! commands (`tables.rs`: `info`, `history`, `compact`, `vacuum`, `restore`,
//! `checkpoint`) look after one table directly.

mod data;
mod tables;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use deltalite_server::ServerConfig;

/// deltalite: bounded-memory upserts into Delta Lake tables, a lakehouse server, and the
/// commands that look after a table (exit status: 0 ok, 1 failure, 2 usage).
#[derive(Debug, Parser)]
#[command(name = "deltalite", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the lakehouse HTTP API (POST /upload, /upsert, /append, /query, ...) and its
    /// Arrow Flight SQL endpoint over Delta tables stored as <data>/<catalog>/<schema>/<table>/.
    ///
    /// Every flag has an environment twin (shown in brackets). Example:
    ///
    ///   deltalite serve --data ./lakehouse --users alice:secret --catalogs lakehouse
    Serve(Box<ServeArgs>),
    #[command(flatten)]
    Data(data::DataCommand),
    #[command(flatten)]
    Table(tables::TableCommand),
}

#[derive(Debug, Args)]
struct ServeArgs {
    /// Data root: a local directory (created if missing) or an object-store URI such as
    /// s3://bucket/prefix (configure access with --storage-option).
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
    #[arg(long, env = "DELTALITE_USERS", hide_env_values = true)]
    users: String,

    /// Catalog grants, as user=cat1+cat2 entries separated by commas. A user without an entry
    /// may use every catalog.
    #[arg(long, env = "DELTALITE_GRANTS")]
    grants: Option<String>,

    /// Catalogs that exist (created under the data root at startup), separated by commas.
    #[arg(long, env = "DELTALITE_CATALOGS", default_value = "lakehouse")]
    catalogs: String,

    /// Largest accepted request body in bytes; larger bodies get 413.
    #[arg(long, env = "DELTALITE_MAX_BODY_BYTES", default_value_t = deltalite_server::config::DEFAULT_MAX_BODY_BYTES)]
    max_body_bytes: u64,

    /// Wall-clock limit of one /query request, in seconds.
    #[arg(long, env = "DELTALITE_QUERY_TIMEOUT_SECS", default_value_t = deltalite_server::config::DEFAULT_QUERY_TIMEOUT.as_secs())]
    query_timeout_secs: u64,

    /// Memory, in MiB, that all running queries may hold together in sorts, joins and
    /// aggregations; beyond it they spill to disk or fail with "Resources exhausted".
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
}

fn main() -> anyhow::Result<()> {
    // Before the runtime's threads exist (see `deltalite::alloc`).
    deltalite::alloc::tune_malloc(deltalite::alloc::Workload::Service);
    let cli = Cli::parse();
    match cli.command {
        Command::Serve(args) => serve(*args),
        Command::Data(command) => one_shot(data::run(command)),
        Command::Table(command) => one_shot(tables::run(command)),
    }
}

/// Run a data or table command: warnings only in the log, and a failure as one line of
/// causes (no backtrace: this is for a person to read) with exit status 1.
fn one_shot(work: impl std::future::Future<Output = anyhow::Result<()>>) -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new(
            std::env::var("DELTALITE_LOG").unwrap_or_else(|_| "warn".to_string()),
        ))
        .with_writer(std::io::stderr)
        .init();
    let done = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(work);
    if let Err(e) = done {
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
    Ok(())
}

/// The `--storage-option` flags of the data and table commands.
#[derive(Debug, Args)]
pub(crate) struct StoreArgs {
    /// Object-store option KEY=VALUE (AWS_REGION=…, AWS_ENDPOINT_URL=…); repeatable.
    #[arg(
        long = "storage-option",
        env = "DELTALITE_STORAGE_OPTIONS",
        value_delimiter = ',',
        hide_env_values = true
    )]
    storage_options: Vec<String>,
}

impl StoreArgs {
    /// The options as the object store takes them.
    pub(crate) fn options(&self) -> anyhow::Result<HashMap<String, String>> {
        storage_options(&self.storage_options)
    }
}

/// `--storage-option KEY=VALUE` flags as the object store takes them (`serve` and the
/// table commands).
fn storage_options(flags: &[String]) -> anyhow::Result<HashMap<String, String>> {
    flags
        .iter()
        .map(|opt| {
            let (k, v) = opt.split_once('=').ok_or_else(|| {
                anyhow::anyhow!("storage option {opt:?} must look like KEY=VALUE")
            })?;
            Ok((k.trim().to_string(), v.trim().to_string()))
        })
        .collect()
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

fn serve(args: ServeArgs) -> anyhow::Result<()> {
    init_server_log(args.log.as_deref(), &args.log_format);
    let mut config = ServerConfig::from_parts(
        args.data,
        args.listen,
        &args.users,
        args.grants.as_deref(),
        &args.catalogs,
    )?;
    config.storage_options = storage_options(&args.storage_options)?;
    config.max_body_bytes = args.max_body_bytes;
    config.query_timeout = Duration::from_secs(args.query_timeout_secs.max(1));
    config.query_memory_bytes = args.query_memory_mb.max(1).saturating_mul(deltalite::MIB);
    config.body_idle_timeout = Duration::from_secs(args.body_idle_timeout_secs.max(1));
    config.spool_dir = args.spool_dir;
    config.query_log_entries = args.query_log_entries.max(1);
    config.query_log_bytes = args.query_log_mb.saturating_mul(deltalite::MIB);
    config.query_footer_cache_bytes = args.query_footer_cache_mb.saturating_mul(deltalite::MIB);
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
        _ => None,
    };
    config.shutdown_timeout = Duration::from_secs(args.shutdown_timeout_secs);
    config.flight_max_sessions = args.flight_max_sessions.max(1);
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
