//! `upsert`, `append`, `overwrite`, `create`: the files' rows into one table, in one
//! commit, through the engine.

use std::collections::HashMap;
use std::io::IsTerminal;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, bail};
use deltalite::arrow::array::RecordBatch;
use deltalite::arrow::datatypes::{Schema, SchemaRef};
use deltalite::write::WriteOptions;
use deltalite::{Created, DeltaLiteTable, InitialData, TableLocation, TableSpec, UpsertOptions};
use deltalite_server::types::storable_schema;
use serde_json::{Value, json};

use super::input::{InputBatches, Progress, inputs};
use super::{Mode, WriteArgs, operation};

pub(super) async fn write_files(
    mode: Mode,
    args: WriteArgs,
    upsert: Option<UpsertOptions>,
) -> anyhow::Result<()> {
    let started = Instant::now();
    let storage = args.target.store.options()?;
    let uri = args.target.table.clone();
    let json_out = args.target.json;
    let exists = DeltaLiteTable::table_exists(&uri, storage.clone())
        .await
        .with_context(|| format!("cannot reach {uri}"))?;
    if exists && mode == Mode::Create {
        bail!("a table exists at {uri} already (append, overwrite and upsert write into it)");
    }
    let inputs = inputs(&args.files, args.format)?;
    let files = inputs.len();
    let bytes: u64 = inputs.iter().map(|i| i.size).sum();
    let visible = !json_out && std::io::stderr().is_terminal();
    let progress = Progress::new(visible, &format!("{} {uri}", mode.name()), bytes);
    progress.show(0, 0, files);
    let (schema, batches) = InputBatches::open(inputs, &progress)?;
    let rows_read = Arc::clone(&batches.rows);
    let target = Target {
        uri: &uri,
        storage,
        exists,
        partition: &args.partition,
    };
    let outcome = match upsert {
        Some(options) => target.upsert(schema, batches, options).await,
        None => target.write(mode, schema, batches).await,
    };
    let rows_read = rows_read.load(std::sync::atomic::Ordering::Relaxed);
    if visible {
        progress.show(rows_read, files, files);
        progress.bar.abandon();
        let secs = started.elapsed().as_secs_f64();
        match &outcome {
            Ok(_) => eprintln!("done: {} {uri} ({secs:.1} s)", mode.name()),
            Err(_) => eprintln!("failed: {} {uri} ({secs:.1} s)", mode.name()),
        }
    }
    let mut report = outcome?;
    report["table"] = json!(uri);
    report["operation"] = json!(mode.name());
    report["files_read"] = json!(files);
    report["bytes_read"] = json!(bytes);
    report["rows_read"] = json!(rows_read);
    if json_out {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!("{}", summary(mode, &report));
    }
    Ok(())
}

/// The table a write goes to.
struct Target<'a> {
    uri: &'a str,
    storage: HashMap<String, String>,
    exists: bool,
    partition: &'a [String],
}

impl Target<'_> {
    fn spec(&self, schema: &Schema) -> TableSpec {
        TableSpec {
            schema: storable_schema(schema),
            partition_columns: self.partition.to_vec(),
            configuration: HashMap::new(),
        }
    }

    async fn open(&self) -> anyhow::Result<DeltaLiteTable> {
        DeltaLiteTable::open(self.uri, self.storage.clone())
            .await
            .with_context(|| format!("cannot open the Delta table at {}", self.uri))
    }

    /// Upsert: the engine's memory bound is the source batch, so the files' rows are
    /// read into memory first, under the engine's own size guard.
    async fn upsert(
        &self,
        schema: SchemaRef,
        batches: InputBatches,
        options: UpsertOptions,
    ) -> anyhow::Result<Value> {
        for column in options
            .primary_keys
            .iter()
            .chain(&options.cursor_fields)
            .chain(&options.delete_column)
        {
            if schema.index_of(column).is_err() {
                bail!("column {column:?} is not in the input files");
            }
        }
        let held = collect(batches, options.knobs.max_source_bytes)?;
        if !self.exists {
            let location = TableLocation::new(self.uri, self.storage.clone())?;
            let data = InitialData::Upsert {
                schema: &schema,
                batches: &held,
                options: &options,
            };
            let write_options = WriteOptions {
                commit_metadata: options.commit_metadata.clone(),
                ..Default::default()
            };
            match location
                .create(&self.spec(&schema), data, &write_options)
                .await?
            {
                Created::New(new) => {
                    let stats = new.stats.upsert.unwrap_or_default();
                    return Ok(upsert_report(new.table.version(), &stats, true));
                }
                // Another writer created it meanwhile: upsert into it like any table.
                Created::Exists => {}
            }
        }
        let mut table = self.open().await?;
        let stats = table.upsert(&schema, &held, &options).await?;
        Ok(upsert_report(stats.version, &stats, false))
    }

    /// Append, overwrite, create: the rows stream from the files into the table's
    /// writer, one file's batch at a time.
    async fn write(
        &self,
        mode: Mode,
        schema: SchemaRef,
        batches: InputBatches,
    ) -> anyhow::Result<Value> {
        let mut options = WriteOptions {
            commit_metadata: operation(mode),
            ..Default::default()
        };
        if !self.exists {
            let location = TableLocation::new(self.uri, self.storage.clone())?;
            let data = InitialData::Rows(Box::new(batches));
            return match location.create(&self.spec(&schema), data, &options).await? {
                Created::New(new) => Ok(write_report(new.table.version(), &new.stats.write, true)),
                Created::Exists => bail!(
                    "another writer created the table at {} meanwhile; nothing was written, run the command again",
                    self.uri
                ),
            };
        }
        let mut table = self.open().await?;
        let stats = match mode {
            Mode::Append => {
                let columns = table.partition_columns()?;
                if !self.partition.is_empty() && self.partition != columns.as_slice() {
                    bail!(
                        "the table is partitioned by [{}], not [{}] (overwrite re-lays it out)",
                        columns.join(", "),
                        self.partition.join(", ")
                    );
                }
                table.append(batches, &options).await?
            }
            Mode::Overwrite => {
                if !self.partition.is_empty() {
                    options.partition_by = Some(self.partition.to_vec());
                }
                table
                    .overwrite(&storable_schema(&schema), batches, &options)
                    .await?
            }
            Mode::Create | Mode::Upsert => unreachable!("handled by the caller"),
        };
        Ok(write_report(stats.version, &stats, false))
    }
}

/// Read every batch, failing as soon as the running in-memory size passes `limit`.
fn collect(batches: InputBatches, limit: usize) -> anyhow::Result<Vec<RecordBatch>> {
    let mut out = Vec::new();
    let mut held = 0usize;
    for batch in batches {
        let batch = batch?;
        held = held.saturating_add(deltalite::runtime::held::batch_bytes(&batch));
        if held > limit {
            return Err(deltalite::DeltaLiteError::SourceTooLarge {
                actual: held,
                limit,
            }
            .into());
        }
        out.push(batch);
    }
    Ok(out)
}

fn upsert_report(version: u64, stats: &deltalite::UpsertStats, created: bool) -> Value {
    json!({
        "version": version,
        "created": created,
        "rows_inserted": stats.rows_inserted,
        "rows_updated": stats.rows_updated,
        "rows_deleted": stats.rows_deleted,
        "files_added": stats.files_added,
        "files_removed": stats.files_removed,
    })
}

fn write_report(version: u64, stats: &deltalite::write::WriteStats, created: bool) -> Value {
    json!({
        "version": version,
        "created": created,
        "rows_written": stats.rows_written,
        "files_added": stats.files_added,
        "files_removed": stats.files_removed,
    })
}

/// The line a person reads.
fn summary(mode: Mode, r: &Value) -> String {
    let n = |k: &str| r[k].as_u64().unwrap_or_default();
    let what = match mode {
        Mode::Upsert => format!(
            "{} inserted, {} updated, {} deleted",
            n("rows_inserted"),
            n("rows_updated"),
            n("rows_deleted")
        ),
        _ => format!("{} rows written", n("rows_written")),
    };
    let plural = |k: &str, one: &str, many: &str| {
        let v = n(k);
        format!("{v} {}", if v == 1 { one } else { many })
    };
    format!(
        "{} {}: {what} from {} in {} ({}); version {}{}",
        mode.name(),
        r["table"].as_str().unwrap_or_default(),
        plural("rows_read", "row", "rows"),
        plural("files_read", "file", "files"),
        crate::tables::mib(n("bytes_read")),
        n("version"),
        if r["created"].as_bool() == Some(true) {
            " (table created)"
        } else {
            ""
        }
    )
}
