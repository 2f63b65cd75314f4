//! The data commands' inputs: files named on the command line (globs, standard input),
//! their formats, and their batches decoded in order while the progress bar advances.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use anyhow::{Context, bail};
use deltalite::arrow::array::RecordBatch;
use deltalite::arrow::datatypes::SchemaRef;
use deltalite_server::ingest::{Format, open_source};
use indicatif::{ProgressBar, ProgressStyle};
use tempfile::NamedTempFile;

use super::InputFormat;

/// One input file, its format decided.
pub(super) struct Input {
    path: PathBuf,
    format: Format,
    pub(super) size: u64,
    /// Standard input, spooled: removed when the command ends.
    _spool: Option<NamedTempFile>,
}

/// The inputs named on the command line, globs expanded, in order.
pub(super) fn inputs(files: &[String], format: Option<InputFormat>) -> anyhow::Result<Vec<Input>> {
    let mut paths = Vec::new();
    let mut stdin = None;
    for name in files {
        if name == "-" {
            if stdin.is_some() {
                bail!("`-` (standard input) may be given once");
            }
            let mut spool = NamedTempFile::new().context("cannot spool standard input")?;
            std::io::copy(&mut std::io::stdin().lock(), &mut spool)
                .context("cannot read standard input")?;
            paths.push(spool.path().to_path_buf());
            stdin = Some(spool);
        } else if name.contains(['*', '?', '[']) {
            let before = paths.len();
            for entry in glob::glob(name).with_context(|| format!("bad glob {name:?}"))? {
                paths.push(entry.with_context(|| format!("cannot read a match of {name:?}"))?);
            }
            if paths.len() == before {
                bail!("no file matches {name:?}");
            }
        } else {
            paths.push(PathBuf::from(name));
        }
    }
    let mut out = Vec::with_capacity(paths.len());
    for path in paths {
        let mut file =
            File::open(&path).with_context(|| format!("cannot open {}", path.display()))?;
        let meta = file.metadata()?;
        if !meta.is_file() {
            bail!("{} is not a file", path.display());
        }
        let hint = match format {
            Some(InputFormat::Parquet) => Some("parquet"),
            Some(InputFormat::Csv) => Some("csv"),
            Some(InputFormat::Json) => Some("json"),
            None => path.extension().and_then(|e| e.to_str()),
        };
        let format = Format::detect(None, hint, &mut file)
            .map_err(|e| anyhow::anyhow!("{}: {}", path.display(), decode_error(e)))?;
        let spool = match &stdin {
            Some(s) if s.path() == path => stdin.take(),
            _ => None,
        };
        out.push(Input {
            path,
            format,
            size: meta.len(),
            _spool: spool,
        });
    }
    Ok(out)
}

/// A decoder's error as a person at a terminal reads it: without the HTTP API's
/// `Failed to execute ingest:` lead.
fn decode_error(e: deltalite_server::ApiError) -> String {
    let text = e.to_string();
    text.strip_prefix(deltalite_server::ingest::INGEST_ERR)
        .and_then(|rest| rest.strip_prefix(": "))
        .map_or_else(|| text.clone(), str::to_string)
}

/// What the progress bar shows, and the counts the summary reports.
#[derive(Clone)]
pub(super) struct Progress {
    pub(super) bar: ProgressBar,
}

impl Progress {
    pub(super) fn new(visible: bool, what: &str, total_bytes: u64) -> Self {
        let bar = if visible {
            ProgressBar::new(total_bytes)
        } else {
            ProgressBar::hidden()
        };
        bar.set_style(
            ProgressStyle::with_template(
                "{prefix} [{bar:30}] {bytes}/{total_bytes} · {msg} · {elapsed} (ETA {eta})",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("#>-"),
        );
        bar.set_prefix(what.to_string());
        bar.enable_steady_tick(Duration::from_millis(200));
        Self { bar }
    }

    pub(super) fn show(&self, rows: u64, file: usize, files: usize) {
        self.bar
            .set_message(format!("{rows} rows · file {file}/{files}"));
    }
}

/// The inputs' batches, in order, every one in the first file's schema (columns matched
/// by name, types cast), decoded lazily while the progress bar advances. The first error
/// ends it.
pub(super) struct InputBatches {
    inputs: std::vec::IntoIter<Input>,
    files: usize,
    target: SchemaRef,
    progress: Progress,
    current: Option<Current>,
    /// Files opened so far.
    opened: usize,
    /// Bytes of the files read to the end.
    done_bytes: u64,
    pub(super) rows: Arc<AtomicU64>,
    failed: bool,
}

struct Current {
    input: Input,
    name: String,
    batches: Box<dyn Iterator<Item = deltalite::Result<RecordBatch>> + Send>,
    /// Parquet's footer row count: how far along a file the rows are.
    file_rows: Option<u64>,
    read_rows: u64,
}

impl InputBatches {
    /// The first file's schema, and the batches of all of them.
    pub(super) fn open(
        inputs: Vec<Input>,
        progress: &Progress,
    ) -> anyhow::Result<(SchemaRef, Self)> {
        let first = inputs.first().context("no input files")?;
        let schema = open_source(&first.path, first.format, None)
            .map_err(|e| anyhow::anyhow!("{}: {}", first.path.display(), decode_error(e)))?
            .schema;
        let batches = Self {
            files: inputs.len(),
            inputs: inputs.into_iter(),
            target: Arc::clone(&schema),
            progress: progress.clone(),
            current: None,
            opened: 0,
            done_bytes: 0,
            rows: Arc::default(),
            failed: false,
        };
        Ok((schema, batches))
    }

    fn fail(&mut self, name: &str, e: impl std::fmt::Display) -> deltalite::DeltaLiteError {
        self.failed = true;
        deltalite::DeltaLiteError::Other(format!("{name}: {e}"))
    }
}

impl Iterator for InputBatches {
    type Item = deltalite::Result<RecordBatch>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if self.failed {
                return None;
            }
            if self.current.is_none() {
                let input = self.inputs.next()?;
                self.opened += 1;
                let name = input.path.display().to_string();
                let batches = match open_source(&input.path, input.format, None) {
                    Ok(source) => source.batches,
                    Err(e) => return Some(Err(self.fail(&name, decode_error(e)))),
                };
                let file_rows = (input.format == Format::Parquet)
                    .then(|| parquet_rows(&input.path))
                    .flatten();
                self.current = Some(Current {
                    input,
                    name,
                    batches,
                    file_rows,
                    read_rows: 0,
                });
            }
            let current = self.current.as_mut()?;
            match current.batches.next() {
                Some(Ok(batch)) => {
                    let n = batch.num_rows() as u64;
                    current.read_rows += n;
                    let rows = self.rows.fetch_add(n, Ordering::Relaxed) + n;
                    if let Some(total) = current.file_rows.filter(|t| *t > 0) {
                        let within = current.input.size * current.read_rows.min(total) / total;
                        self.progress.bar.set_position(self.done_bytes + within);
                    }
                    self.progress.show(rows, self.opened, self.files);
                    let name = current.name.clone();
                    return Some(match conform(batch, &self.target) {
                        Ok(batch) => Ok(batch),
                        Err(e) => Err(self.fail(&name, e)),
                    });
                }
                Some(Err(e)) => {
                    let name = current.name.clone();
                    return Some(Err(self.fail(&name, e)));
                }
                None => {
                    // At a file's end the bar is exact; within a CSV or JSON file it
                    // moves only with the rows.
                    self.done_bytes += current.input.size;
                    self.progress.bar.set_position(self.done_bytes);
                    self.current = None;
                }
            }
        }
    }
}

/// A Parquet file's row count, from its footer.
fn parquet_rows(path: &Path) -> Option<u64> {
    let file = File::open(path).ok()?;
    let reader = deltalite::parquet::file::reader::SerializedFileReader::new(file).ok()?;
    use deltalite::parquet::file::reader::FileReader;
    u64::try_from(reader.metadata().file_metadata().num_rows()).ok()
}

/// `batch` with `target`'s columns, matched by name and cast to its types.
fn conform(batch: RecordBatch, target: &SchemaRef) -> anyhow::Result<RecordBatch> {
    if batch.schema() == *target {
        return Ok(batch);
    }
    let schema = batch.schema();
    if let Some(extra) = schema
        .fields()
        .iter()
        .find(|f| target.index_of(f.name()).is_err())
    {
        bail!(
            "has a column {:?} that the first file does not have",
            extra.name()
        );
    }
    let options = arrow::compute::CastOptions {
        safe: false,
        ..Default::default()
    };
    let columns = target
        .fields()
        .iter()
        .map(|field| {
            let index = schema.index_of(field.name()).map_err(|_| {
                anyhow::anyhow!("has no column {:?} (the first file has it)", field.name())
            })?;
            let column = batch.column(index);
            if column.data_type() == field.data_type() {
                return Ok(Arc::clone(column));
            }
            arrow::compute::cast_with_options(column, field.data_type(), &options).with_context(
                || {
                    format!(
                        "column {:?} ({}) does not convert to the first file's {}",
                        field.name(),
                        column.data_type(),
                        field.data_type()
                    )
                },
            )
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    Ok(RecordBatch::try_new(Arc::clone(target), columns)?)
}
