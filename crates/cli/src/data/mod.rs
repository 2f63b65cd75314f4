//! The data commands: `upsert`, `append`, `overwrite` and `create` write files into one
//! table in one commit; `query` runs SQL over tables. Inputs are decoded by the server's
//! own readers (`deltalite_server::ingest`), so a file means the same here as in a
//! `POST /upload`. On a terminal a progress bar (bytes, rows, files, ETA) runs on stderr;
//! the summary goes to stdout, as one JSON document with `--json`.

//!
//! - `input`: the files named on the command line and their batches, with the progress bar;
//! - `write`: the four writes through the engine;
//! - `query`: SQL through DataFusion and the output formats.

mod input;
mod query;
mod write;

use std::collections::HashMap;
use std::path::PathBuf;

use clap::{Args, Subcommand, ValueEnum};
use deltalite::{OnDuplicate, UpsertOptions};
use serde_json::Value;

/// The table a write goes to, and the files it reads.
#[derive(Debug, Args)]
pub struct WriteArgs {
    #[command(flatten)]
    pub(super) target: crate::tables::TableArgs,

    /// Input files: Parquet, CSV with a header row, a JSON array of objects, or NDJSON.
    /// A quoted glob (`'data/*.parquet'`) is expanded; `-` reads standard input. Every file
    /// must have the first file's columns.
    #[arg(required = true, value_name = "FILE")]
    pub(super) files: Vec<String>,

    /// Format of every input (default: from the file's extension, else its first bytes).
    #[arg(long, value_enum)]
    pub(super) format: Option<InputFormat>,

    /// Partition columns of a table this command creates (comma-separated). For an
    /// existing table they must be its partition columns; `overwrite` re-lays the table
    /// out by them instead.
    #[arg(long = "partition", value_delimiter = ',', value_name = "COLUMN")]
    pub(super) partition: Vec<String>,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub(super) enum InputFormat {
    Parquet,
    Csv,
    Json,
}

#[derive(Debug, Subcommand)]
pub enum DataCommand {
    /// Insert-or-replace the files' rows by key, in one commit; creates the table when
    /// there is none. Memory holds the files' rows (at most DELTALITE_MAX_SOURCE_BYTES,
    /// 2 GiB), never the table.
    ///
    ///   deltalite upsert ./events new.parquet --key id --cursor updated_at
    Upsert {
        #[command(flatten)]
        write: WriteArgs,
        /// Key columns (comma-separated): a row replaces the table's row with its key.
        #[arg(
            long = "key",
            value_delimiter = ',',
            required = true,
            value_name = "COLUMN"
        )]
        keys: Vec<String>,
        /// Cursor columns (comma-separated): a row replaces a stored one only when its
        /// cursor is not older.
        #[arg(long = "cursor", value_delimiter = ',', value_name = "COLUMN")]
        cursor: Vec<String>,
        /// A row whose value in this column is true (for other types: not NULL) deletes
        /// its key instead.
        #[arg(long, value_name = "COLUMN")]
        delete_column: Option<String>,
        /// What two input rows with one key do: `error` refuses the input, `last` keeps
        /// the later one (in file order).
        #[arg(long, value_enum, default_value_t = Duplicates::Error)]
        on_duplicate: Duplicates,
    },
    /// Add the files' rows to the table in one commit; creates the table when there is
    /// none. Columns the table has and the files lack are NULL.
    Append(WriteArgs),
    /// Replace the table's rows (and its schema, when the files' differs) in one commit,
    /// keeping its history; creates the table when there is none.
    Overwrite(WriteArgs),
    /// Create a new table from the files (schema from the first file) in one commit;
    /// fails when the table exists.
    Create(WriteArgs),
    /// Run SQL (DataFusion's dialect) over Delta tables and print the result.
    ///
    ///   deltalite query 'SELECT kind, count(*) FROM events GROUP BY kind' --table ./events
    Query(QueryArgs),
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub(super) enum Duplicates {
    Error,
    Last,
}

#[derive(Debug, Args)]
pub struct QueryArgs {
    /// The statement.
    pub(super) sql: String,

    /// A table the statement reads: NAME=URI, or a URI alone (named by its last path
    /// segment). URIs are local directories or object-store URIs (s3://…); repeatable.
    #[arg(long = "table", value_name = "[NAME=]URI")]
    pub(super) tables: Vec<String>,

    /// Output: `table` (aligned, for a person), `csv` (with a header), `json` (one
    /// array of objects), `ndjson` (one object per line), or `parquet`.
    #[arg(long, value_enum, default_value_t = OutputFormat::Table)]
    pub(super) format: OutputFormat,

    /// Write the result to this file instead of standard output.
    #[arg(long, short)]
    pub(super) output: Option<PathBuf>,

    #[command(flatten)]
    pub(super) store: crate::StoreArgs,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(super) enum OutputFormat {
    Table,
    Csv,
    Json,
    Ndjson,
    Parquet,
}

/// Which write a command is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Mode {
    Upsert,
    Append,
    Overwrite,
    Create,
}

impl Mode {
    pub(super) fn name(self) -> &'static str {
        match self {
            Mode::Upsert => "upsert",
            Mode::Append => "append",
            Mode::Overwrite => "overwrite",
            Mode::Create => "create",
        }
    }
}

pub async fn run(command: DataCommand) -> anyhow::Result<()> {
    match command {
        DataCommand::Query(args) => query::query(args).await,
        DataCommand::Upsert {
            write,
            keys,
            cursor,
            delete_column,
            on_duplicate,
        } => {
            let mut options = UpsertOptions::new(keys);
            options.cursor_fields = cursor;
            options.delete_column = delete_column;
            options.on_duplicate = match on_duplicate {
                Duplicates::Error => OnDuplicate::Error,
                Duplicates::Last => OnDuplicate::Last,
            };
            options.commit_metadata = operation(Mode::Upsert);
            if !write.partition.is_empty() {
                options.partition_key = Some(write.partition.clone());
            }
            write::write_files(Mode::Upsert, write, Some(options)).await
        }
        DataCommand::Append(write) => write::write_files(Mode::Append, write, None).await,
        DataCommand::Overwrite(write) => write::write_files(Mode::Overwrite, write, None).await,
        DataCommand::Create(write) => write::write_files(Mode::Create, write, None).await,
    }
}

pub(super) fn operation(mode: Mode) -> HashMap<String, Value> {
    HashMap::from([(
        "deltalite.operation".to_string(),
        Value::from(format!("cli {}", mode.name())),
    )])
}
