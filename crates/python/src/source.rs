//! The caller's data, read through the Arrow C stream interface.

use arrow::datatypes::SchemaRef;
use arrow::ffi_stream::ArrowArrayStreamReader;
use arrow::pyarrow::FromPyArrow;
use arrow::record_batch::{RecordBatch, RecordBatchReader};
use deltalite::DeltaLiteError as EngineError;
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;

/// The caller's data as an Arrow stream: anything with `__arrow_c_stream__` (pyarrow,
/// polars, DuckDB, ...), or a pyarrow `RecordBatch` of an older pyarrow.
pub(crate) enum Source {
    Stream(ArrowArrayStreamReader),
    Batch(RecordBatch),
}

impl Source {
    pub(crate) fn from_py(data: &Bound<'_, PyAny>) -> PyResult<Self> {
        let py = data.py();
        if data.hasattr(pyo3::intern!(py, "__arrow_c_stream__"))? {
            return Ok(Source::Stream(ArrowArrayStreamReader::from_pyarrow_bound(
                data,
            )?));
        }
        if data.hasattr(pyo3::intern!(py, "__arrow_c_array__"))? {
            return Ok(Source::Batch(RecordBatch::from_pyarrow_bound(data)?));
        }
        Err(PyTypeError::new_err(format!(
            "data must export the Arrow C stream interface (__arrow_c_stream__), got {}",
            data.get_type().name()?
        )))
    }

    pub(crate) fn schema(&self) -> SchemaRef {
        match self {
            Source::Stream(reader) => reader.schema(),
            Source::Batch(batch) => batch.schema(),
        }
    }

    /// Read every batch, failing as soon as the running in-memory size passes `limit`
    /// (`0` disables), so an oversized source is refused before it is fully read.
    pub(crate) fn collect(self, limit: usize) -> Result<Vec<RecordBatch>, EngineError> {
        let iter: Box<dyn Iterator<Item = Result<RecordBatch, EngineError>> + Send> = match self {
            Source::Stream(reader) => Box::new(reader.map(|b| b.map_err(EngineError::from))),
            Source::Batch(batch) => Box::new(std::iter::once(Ok(batch))),
        };
        let mut total = 0usize;
        let mut out = Vec::new();
        for batch in iter {
            let batch = batch?;
            total += deltalite::runtime::held::batch_bytes(&batch);
            if limit > 0 && total > limit {
                return Err(EngineError::SourceTooLarge {
                    actual: total,
                    limit,
                });
            }
            if batch.num_rows() > 0 {
                out.push(batch);
            }
        }
        Ok(out)
    }

    pub(crate) fn into_iter(
        self,
    ) -> Box<dyn Iterator<Item = Result<RecordBatch, EngineError>> + Send> {
        match self {
            Source::Stream(reader) => Box::new(reader.map(|b| b.map_err(EngineError::from))),
            Source::Batch(batch) => Box::new(std::iter::once(Ok(batch))),
        }
    }
}
