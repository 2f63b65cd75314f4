//! Python arguments as the engine takes them.

use std::collections::HashMap;

use deltalite::DeltaLiteError as EngineError;
use deltalite::write::WriteOptions;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString};

use crate::errors::to_py;

/// A string or a list of strings, as the seed accepts for key arguments.
pub(crate) fn str_or_list(value: &Bound<'_, PyAny>, name: &str) -> PyResult<Vec<String>> {
    if let Ok(s) = value.cast::<PyString>() {
        return Ok(vec![s.to_str()?.to_string()]);
    }
    value
        .extract::<Vec<String>>()
        .map_err(|_| PyTypeError::new_err(format!("{name} must be a str or a list of str")))
}

/// A table URI: a `str`, or a `pathlib.Path` (anything `os.fspath` takes).
pub(crate) fn uri_arg(value: &Bound<'_, PyAny>) -> PyResult<String> {
    if let Ok(s) = value.cast::<PyString>() {
        return Ok(s.to_str()?.to_string());
    }
    let path = value
        .py()
        .import("os")?
        .call_method1("fspath", (value,))
        .map_err(|_| {
            PyTypeError::new_err(format!(
                "uri must be a str or a path, not {}",
                value
                    .get_type()
                    .name()
                    .map_or_else(|_| "?".to_string(), |n| n.to_string())
            ))
        })?;
    path.extract::<String>()
        .map_err(|_| PyTypeError::new_err("uri must be a str path, not bytes"))
}

/// Commit metadata as JSON values, converted by Python's own `json` module so that every
/// JSON-able value is accepted (and anything else is stringified rather than refused).
pub(crate) fn metadata_json(
    py: Python<'_>,
    metadata: Option<&Bound<'_, PyDict>>,
) -> PyResult<HashMap<String, serde_json::Value>> {
    let Some(metadata) = metadata else {
        return Ok(HashMap::new());
    };
    let json = py.import("json")?;
    let kwargs = PyDict::new(py);
    kwargs.set_item("default", py.get_type::<PyString>())?;
    let text: String = json
        .call_method("dumps", (metadata,), Some(&kwargs))?
        .extract()?;
    serde_json::from_str(&text)
        .map_err(|e| PyValueError::new_err(format!("commit_metadata is not a JSON object: {e}")))
}

pub(crate) fn parse<T: std::str::FromStr<Err = EngineError>>(value: &str) -> PyResult<T> {
    value.parse().map_err(to_py)
}

pub(crate) fn write_options(
    py: Python<'_>,
    target_file_size: Option<u64>,
    commit_max_retries: Option<usize>,
    metadata: Option<&Bound<'_, PyDict>>,
) -> PyResult<WriteOptions> {
    let defaults = WriteOptions::default();
    let options = WriteOptions {
        target_file_size,
        commit_max_retries: commit_max_retries.unwrap_or(defaults.commit_max_retries),
        commit_metadata: metadata_json(py, metadata)?,
        ..defaults
    };
    options.validate().map_err(to_py)?;
    Ok(options)
}
