//! `deltalite`: command line of the deltalite lakehouse.
//!
//! `deltalite serve` runs the lakehouse HTTP API (Altertable-compatible) over Delta tables,
//! and its Arrow Flight SQL endpoint; the data commands (`data.rs`: `upsert`, `append`,
//! `overwrite`, `create`, `query`) write files into a table and query tables; the table
//! commands (`tables.rs`: `info`, `history`, `compact`, `vacuum`, `restore`,
//! `checkpoint`) look after one table directly.

mod data;
mod serve;
mod tables;

use std::collections::HashMap;

use clap::{Args, Parser, Subcommand};

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
    Serve(Box<serve::ServeArgs>),
    /// Print an argon2id hash of the password read from stdin (one line), for a
    /// `[[user]]` table's `password_hash` in the config file.
    ///
    ///   deltalite hash-password < password.txt
    HashPassword,
    #[command(flatten)]
    Data(data::DataCommand),
    #[command(flatten)]
    Table(tables::TableCommand),
}

fn main() -> anyhow::Result<()> {
    // Before the runtime's threads exist (see `deltalite::alloc`).
    deltalite::alloc::tune_malloc(deltalite::alloc::Workload::Service);
    let matches = <Cli as clap::CommandFactory>::command().get_matches();
    let cli =
        <Cli as clap::FromArgMatches>::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    match cli.command {
        Command::Serve(args) => serve::run(
            *args,
            matches
                .subcommand_matches("serve")
                .expect("the serve subcommand's matches"),
        ),
        Command::HashPassword => hash_password(),
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

/// `deltalite hash-password`: one line of stdin in, its argon2id PHC string out.
fn hash_password() -> anyhow::Result<()> {
    let mut line = String::new();
    std::io::stdin().read_line(&mut line)?;
    let password = line.trim_end_matches(['\r', '\n']);
    if password.is_empty() {
        anyhow::bail!("no password on stdin (send it as one line: deltalite hash-password < file)");
    }
    let hash = deltalite_server::auth::hash_password(password)
        .map_err(|e| anyhow::anyhow!("hashing failed: {e}"))?;
    println!("{hash}");
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
