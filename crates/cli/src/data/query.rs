//! `query`: SQL over Delta tables through DataFusion, printed or written in a format.

use std::fs::File;
use std::io::{IsTerminal, Write};
use std::sync::Arc;

use anyhow::{Context, bail};
use deltalite::DeltaLiteTable;
use deltalite::arrow::array::RecordBatch;
use deltalite::arrow::datatypes::SchemaRef;

use super::{OutputFormat, QueryArgs};

pub(super) async fn query(args: QueryArgs) -> anyhow::Result<()> {
    use datafusion::prelude::SessionContext;
    use futures::StreamExt;

    let storage = args.store.options()?;
    let ctx = SessionContext::new();
    for spec in &args.tables {
        let (name, uri) = match spec.split_once('=') {
            Some((name, uri)) => (name.trim().to_string(), uri.trim().to_string()),
            None => {
                let name = spec
                    .trim_end_matches('/')
                    .rsplit('/')
                    .next()
                    .filter(|n| !n.is_empty())
                    .with_context(|| format!("--table {spec:?} names no table: use NAME=URI"))?;
                (name.to_string(), spec.clone())
            }
        };
        let table = DeltaLiteTable::open(&uri, storage.clone())
            .await
            .with_context(|| format!("cannot open the Delta table at {uri}"))?;
        let provider = table.delta_table().table_provider().await?;
        ctx.register_table(name.as_str(), provider)
            .with_context(|| format!("cannot register {name:?}"))?;
    }
    // DataFusion's errors repeat their cause in `{:#}`: one line each.
    let df = |e: datafusion::error::DataFusionError| anyhow::anyhow!("{e}");
    let frame = ctx.sql(&args.sql).await.map_err(df)?;
    let schema = Arc::new(frame.schema().as_arrow().clone());
    let mut stream = frame.execute_stream().await.map_err(df)?;
    let mut out: Box<dyn Write + Send> = match &args.output {
        Some(path) => Box::new(std::io::BufWriter::new(
            File::create(path).with_context(|| format!("cannot create {}", path.display()))?,
        )),
        None if args.format == OutputFormat::Parquet && std::io::stdout().is_terminal() => {
            bail!("Parquet is binary: give --output FILE, or redirect standard output")
        }
        None => Box::new(std::io::BufWriter::new(std::io::stdout())),
    };
    let mut sink = Sink::new(args.format, &schema, &mut out)?;
    while let Some(batch) = stream.next().await {
        sink.write(&batch.map_err(df)?)?;
    }
    sink.finish()?;
    out.flush()?;
    Ok(())
}

/// Where a query's batches go, in the chosen format; all but `table` stream.
enum Sink<'w> {
    Table(SchemaRef, Vec<RecordBatch>, &'w mut (dyn Write + Send)),
    Csv(arrow::csv::Writer<&'w mut (dyn Write + Send)>),
    Json(arrow::json::ArrayWriter<&'w mut (dyn Write + Send)>),
    Ndjson(arrow::json::LineDelimitedWriter<&'w mut (dyn Write + Send)>),
    Parquet(deltalite::parquet::arrow::ArrowWriter<&'w mut (dyn Write + Send)>),
}

impl<'w> Sink<'w> {
    fn new(
        format: OutputFormat,
        schema: &SchemaRef,
        out: &'w mut Box<dyn Write + Send>,
    ) -> anyhow::Result<Self> {
        let out: &'w mut (dyn Write + Send) = out.as_mut();
        Ok(match format {
            OutputFormat::Table => Self::Table(Arc::clone(schema), Vec::new(), out),
            OutputFormat::Csv => {
                // The header even when no row follows.
                let mut w = arrow::csv::Writer::new(out);
                w.write(&RecordBatch::new_empty(Arc::clone(schema)))?;
                Self::Csv(w)
            }
            OutputFormat::Json => Self::Json(arrow::json::ArrayWriter::new(out)),
            OutputFormat::Ndjson => Self::Ndjson(arrow::json::LineDelimitedWriter::new(out)),
            OutputFormat::Parquet => Self::Parquet(
                deltalite::parquet::arrow::ArrowWriter::try_new(out, Arc::clone(schema), None)?,
            ),
        })
    }

    fn write(&mut self, batch: &RecordBatch) -> anyhow::Result<()> {
        match self {
            Self::Table(_, held, _) => held.push(batch.clone()),
            Self::Csv(w) => w.write(batch)?,
            Self::Json(w) => w.write(batch)?,
            Self::Ndjson(w) => w.write(batch)?,
            Self::Parquet(w) => w.write(batch)?,
        }
        Ok(())
    }

    fn finish(self) -> anyhow::Result<()> {
        match self {
            Self::Table(schema, held, out) => {
                // With the schema: no rows still shows the columns.
                let shown = arrow::util::pretty::pretty_format_batches_with_schema(schema, &held)?;
                let rows: usize = held.iter().map(RecordBatch::num_rows).sum();
                writeln!(out, "{shown}")?;
                writeln!(out, "{rows} row{}", if rows == 1 { "" } else { "s" })?;
            }
            Self::Csv(w) => drop(w.into_inner()),
            Self::Json(mut w) => w.finish()?,
            Self::Ndjson(mut w) => w.finish()?,
            Self::Parquet(w) => drop(w.into_inner()?),
        }
        Ok(())
    }
}
