//! The table commands: `info`, `history`, `compact`, `vacuum`, `restore`, `checkpoint`, for
//! a person at a terminal (a readable summary, a spinner while the work runs) or a
//! script (`--json`: one JSON document on stdout, nothing else).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use deltalite::DeltaLiteTable;
use deltalite::compact::CompactOptions;
use serde_json::{Value, json};

/// Where the table is and how to reach it; shared by every table command.
#[derive(Debug, Args)]
pub struct TableArgs {
    /// The table: a local directory or an object-store URI (s3://bucket/path).
    pub(crate) table: String,

    #[command(flatten)]
    pub(crate) store: crate::StoreArgs,

    /// Print one JSON document instead of the human summary.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Debug, Subcommand)]
pub enum TableCommand {
    /// Show a table's version, schema, partition columns, files, size and properties.
    Info(TableArgs),
    /// List a table's commits, newest first.
    History {
        #[command(flatten)]
        table: TableArgs,
        /// Show only the latest N commits.
        #[arg(long)]
        limit: Option<usize>,
    },
    /// Merge each partition's small files into files of about the target size, in
    /// OPTIMIZE commits (the rows do not change; readers and writers keep going).
    Compact {
        #[command(flatten)]
        table: TableArgs,
        /// Output file size target in bytes (default: the table's delta.targetFileSize,
        /// else 100 MiB); larger files are left alone.
        #[arg(long)]
        target_file_size: Option<u64>,
        /// Compact only this value of the partition column (repeatable).
        #[arg(long = "partition")]
        partitions: Vec<String>,
        /// Leave a partition alone unless compacting it removes this many files net.
        #[arg(long, default_value_t = 1)]
        min_removable_files: usize,
        /// Columns to write bloom filters for (default: those the input files have).
        #[arg(long = "bloom-filter", value_delimiter = ',')]
        bloom_filter_columns: Vec<String>,
        /// Plan only: say what would be merged, write nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Delete files no version within the retention reads (files removed longer ago
    /// than the retention, leftovers of writes that never committed).
    Vacuum {
        #[command(flatten)]
        table: TableArgs,
        /// Retention in hours (default: the table's delta.deletedFileRetentionDuration,
        /// 7 days unless set).
        #[arg(long)]
        retain_hours: Option<f64>,
        /// Accept a retention below the table's: readers of older versions and writes in
        /// flight may lose files they need.
        #[arg(long)]
        force: bool,
        /// List what would be deleted; delete nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Make the table what it was at a version or a time, in one RESTORE commit.
    Restore {
        #[command(flatten)]
        table: TableArgs,
        /// The version to restore.
        #[arg(
            long,
            conflicts_with = "timestamp",
            required_unless_present = "timestamp"
        )]
        version: Option<u64>,
        /// Restore the latest version committed at or before this time (RFC 3339, or
        /// YYYY-MM-DD[ HH:MM:SS] in UTC).
        #[arg(long)]
        timestamp: Option<String>,
    },
    /// Write a checkpoint of the current version (readers then replay fewer commits).
    Checkpoint(TableArgs),
}

impl TableCommand {
    fn args(&self) -> &TableArgs {
        match self {
            TableCommand::Info(t) | TableCommand::Checkpoint(t) => t,
            TableCommand::History { table, .. }
            | TableCommand::Compact { table, .. }
            | TableCommand::Vacuum { table, .. }
            | TableCommand::Restore { table, .. } => table,
        }
    }
}

/// Run one table command; its output goes to stdout, the spinner to stderr.
pub async fn run(command: TableCommand) -> anyhow::Result<()> {
    let args = command.args();
    let options = args.store.options()?;
    let json_out = args.json;
    let uri = args.table.clone();
    let mut table = DeltaLiteTable::open(&uri, options)
        .await
        .with_context(|| format!("cannot open the Delta table at {uri}"))?;
    let report =
        match &command {
            TableCommand::Info(_) => info(&table)?,
            TableCommand::History { limit, .. } => json!(table.history(*limit).await?),
            TableCommand::Compact {
                target_file_size,
                partitions,
                min_removable_files,
                bloom_filter_columns,
                dry_run,
                ..
            } => {
                let options = CompactOptions {
                    target_file_size: *target_file_size,
                    partitions: (!partitions.is_empty())
                        .then(|| partitions.iter().cloned().map(Some).collect()),
                    min_partition_removable_files: *min_removable_files,
                    bloom_filter_columns: bloom_filter_columns.clone(),
                    dry_run: *dry_run,
                    ..CompactOptions::default()
                };
                let what = if *dry_run {
                    "planning the compaction of"
                } else {
                    "compacting"
                };
                let stats =
                    with_spinner(json_out, &format!("{what} {uri}"), table.compact(&options))
                        .await?;
                json!({
                    "version": stats.version,
                    "dry_run": stats.dry_run,
                    "files_considered": stats.files_considered,
                    "files_removed": stats.files_removed,
                    "files_added": stats.files_added,
                    "bytes_removed": stats.bytes_removed,
                    "bytes_added": stats.bytes_added,
                    "partitions_compacted": stats.partitions_compacted,
                    "rows_rewritten": stats.rows_rewritten,
                    "commits": stats.commits,
                })
            }
            TableCommand::Vacuum {
                retain_hours,
                force,
                dry_run,
                ..
            } => {
                let retention = retain_hours
                    .map(deltalite::VacuumOptions::hours)
                    .transpose()
                    .map_err(|_| {
                        anyhow::anyhow!(
                            "--retain-hours {} is not a number of hours",
                            retain_hours.unwrap_or_default()
                        )
                    })?;
                let options = deltalite::VacuumOptions {
                    retention,
                    enforce_retention: !force,
                    dry_run: *dry_run,
                };
                let what = if *dry_run {
                    "listing what vacuum would delete in"
                } else {
                    "vacuuming"
                };
                let done =
                    match with_spinner(json_out, &format!("{what} {uri}"), table.vacuum(&options))
                        .await
                    {
                        Ok(done) => done,
                        Err(e) => match e.downcast::<deltalite::DeltaLiteError>() {
                            Ok(e @ deltalite::DeltaLiteError::RetentionTooShort { .. }) => {
                                bail!(
                                    "--retain-hours {}: {e}; add --force if you mean it",
                                    retain_hours.unwrap_or_default()
                                )
                            }
                            Ok(e) => return Err(e.into()),
                            Err(e) => return Err(e),
                        },
                    };
                let (retention, deleted) = (done.retention, done.files);
                json!({
                    "dry_run": dry_run,
                    "retention_hours": retention.as_secs_f64() / 3600.0,
                    "files": deleted,
                })
            }
            TableCommand::Restore {
                version, timestamp, ..
            } => {
                let target = match (version, timestamp) {
                    (Some(v), _) => *v,
                    (None, Some(ts)) => version_at(&table, ts).await?,
                    (None, None) => bail!("give --version or --timestamp"),
                };
                let stats = with_spinner(
                    json_out,
                    &format!("restoring {uri} to version {target}"),
                    table.restore(
                        target,
                        &HashMap::new(),
                        deltalite::options::DEFAULT_COMMIT_MAX_RETRIES,
                    ),
                )
                .await?;
                json!({
                    "restored_version": target,
                    "version": stats.version,
                    "files_removed": stats.files_removed,
                    "files_restored": stats.files_restored,
                })
            }
            TableCommand::Checkpoint(_) => {
                let version = table.version();
                with_spinner(
                    json_out,
                    &format!("checkpointing {uri} at version {version}"),
                    deltalite::deltalake::checkpoints::create_checkpoint(table.delta_table(), None),
                )
                .await?;
                json!({ "version": version })
            }
        };
    if json_out {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", human(&command, &uri, &report));
    }
    Ok(())
}

/// The latest version committed at or before `text`.
async fn version_at(table: &DeltaLiteTable, text: &str) -> anyhow::Result<u64> {
    let when = deltalite_server::sql::time_travel::parse_timestamp(text).map_err(|e| {
        anyhow::anyhow!("{}", e.to_string().trim_start_matches("Conversion Error: "))
    })?;
    let mut at = table.delta_table().clone();
    at.load_with_datetime(when).await?;
    Ok(at.version().unwrap_or(0))
}

/// Await `work` with a spinner and the elapsed time on stderr, when stderr is a terminal
/// and the output is for a person; scripts and pipes see nothing.
async fn with_spinner<T, E: Into<anyhow::Error>>(
    json_out: bool,
    what: &str,
    work: impl std::future::Future<Output = Result<T, E>>,
) -> anyhow::Result<T> {
    if json_out || !std::io::IsTerminal::is_terminal(&std::io::stderr()) {
        return work.await.map_err(Into::into);
    }
    let bar = indicatif::ProgressBar::new_spinner();
    bar.set_style(
        indicatif::ProgressStyle::with_template("{spinner} {msg} ({elapsed})")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
    );
    bar.set_message(what.to_string());
    bar.enable_steady_tick(Duration::from_millis(100));
    let started = Instant::now();
    let out = work.await;
    bar.finish_and_clear();
    let secs = started.elapsed().as_secs_f64();
    match &out {
        Ok(_) => eprintln!("done: {what} ({secs:.1} s)"),
        Err(_) => eprintln!("failed: {what} ({secs:.1} s)"),
    }
    out.map_err(Into::into)
}

fn info(table: &DeltaLiteTable) -> anyhow::Result<Value> {
    let schema = table.schema()?;
    let files = table.files()?;
    let state = table.delta_table().snapshot()?;
    let protocol = state.protocol();
    Ok(json!({
        "uri": table.uri(),
        "version": table.version(),
        "id": table.table_id()?,
        "columns": schema.fields().iter().map(|f| json!({
            "name": f.name(),
            "type": f.data_type().to_string(),
            "nullable": f.is_nullable(),
        })).collect::<Vec<_>>(),
        "partition_columns": table.partition_columns()?,
        "files": files.len(),
        "bytes": files.iter().map(|f| f.size).sum::<u64>(),
        "rows": files.iter().map(|f| f.num_records).sum::<Option<usize>>(),
        "properties": table.configuration()?,
        "protocol": {
            "min_reader_version": protocol.min_reader_version(),
            "min_writer_version": protocol.min_writer_version(),
            "reader_features": protocol.reader_features().map(|f| f.iter().map(|x| x.to_string()).collect::<Vec<_>>()),
            "writer_features": protocol.writer_features().map(|f| f.iter().map(|x| x.to_string()).collect::<Vec<_>>()),
        },
    }))
}

pub(crate) fn mib(bytes: u64) -> String {
    match bytes {
        b if b < 1024 => format!("{b} B"),
        b if b < 1024 * 1024 => format!("{:.1} KiB", b as f64 / 1024.0),
        b => format!("{:.1} MiB", b as f64 / (1024.0 * 1024.0)),
    }
}

/// The summary a person reads.
fn human(command: &TableCommand, uri: &str, r: &Value) -> String {
    let n = |k: &str| r[k].as_u64().unwrap_or_default();
    match command {
        TableCommand::Info(_) => {
            let mut out = format!(
                "table      {uri}\nversion    {}\nfiles      {} ({})\nrows       {}\npartitions {}\ncolumns\n",
                n("version"),
                n("files"),
                mib(n("bytes")),
                r["rows"]
                    .as_u64()
                    .map_or_else(|| "unknown".to_string(), |v| v.to_string()),
                r["partition_columns"]
                    .as_array()
                    .filter(|a| !a.is_empty())
                    .map_or_else(
                        || "none".to_string(),
                        |a| a
                            .iter()
                            .filter_map(Value::as_str)
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
            );
            for c in r["columns"].as_array().into_iter().flatten() {
                out.push_str(&format!(
                    "  {:<24} {}{}\n",
                    c["name"].as_str().unwrap_or_default(),
                    c["type"].as_str().unwrap_or_default(),
                    if c["nullable"].as_bool() == Some(false) {
                        " NOT NULL"
                    } else {
                        ""
                    }
                ));
            }
            if let Some(props) = r["properties"].as_object().filter(|p| !p.is_empty()) {
                out.push_str("properties\n");
                for (k, v) in props {
                    out.push_str(&format!("  {k} = {}\n", v.as_str().unwrap_or_default()));
                }
            }
            out
        }
        TableCommand::History { .. } => {
            let mut out = format!(
                "{:>8}  {:<23}  {:<18}  {}\n",
                "version", "time (UTC)", "operation", "metrics"
            );
            for c in r.as_array().into_iter().flatten() {
                let time = c["timestamp"]
                    .as_i64()
                    .and_then(chrono::DateTime::from_timestamp_millis)
                    .map_or_else(String::new, |t| {
                        t.format("%Y-%m-%d %H:%M:%S%.3f").to_string()
                    });
                let metrics = c["operationMetrics"]
                    .as_object()
                    .map(|m| {
                        m.iter()
                            .filter(|(k, _)| k.starts_with("num"))
                            .map(|(k, v)| format!("{k}={v}"))
                            .collect::<Vec<_>>()
                            .join(" ")
                    })
                    .unwrap_or_default();
                out.push_str(&format!(
                    "{:>8}  {:<23}  {:<18}  {metrics}\n",
                    c["version"].as_u64().unwrap_or_default(),
                    time,
                    c["operation"].as_str().unwrap_or_default(),
                ));
            }
            out
        }
        TableCommand::Compact { dry_run, .. } => {
            let verb = if *dry_run { "would merge" } else { "merged" };
            format!(
                "{verb} {} files ({}) into {} in {} partitions; {} rows rewritten; version {}\n",
                n("files_removed"),
                mib(n("bytes_removed")),
                n("files_added"),
                n("partitions_compacted"),
                n("rows_rewritten"),
                n("version"),
            )
        }
        TableCommand::Vacuum { dry_run, .. } => {
            let files: Vec<&str> = r["files"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            let verb = if *dry_run { "would delete" } else { "deleted" };
            let mut out = format!(
                "{verb} {} files (retention {} hours)\n",
                files.len(),
                r["retention_hours"].as_f64().unwrap_or_default()
            );
            for f in files {
                out.push_str(&format!("  {f}\n"));
            }
            out
        }
        TableCommand::Restore { .. } => format!(
            "restored version {} as version {}: {} files removed, {} restored\n",
            n("restored_version"),
            n("version"),
            n("files_removed"),
            n("files_restored"),
        ),
        TableCommand::Checkpoint(_) => format!("checkpoint written at version {}\n", n("version")),
    }
}
