//! Keyword arguments of `kura.open(...)` and `rebuild(...)` as engine `Params`.
//!
//! Values may be `str`, `int`, `float` or `bool` (`record_comp="zstd"`, `num_buckets=1_000_000`,
//! `update_mode="appending"`); the engine checks names and values, so a typo is an error.

use kura::Params;
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyString};

/// Options of `kura.open` that the binding handles itself rather than the engine.
pub const BINDING_OPTIONS: [&str; 2] = ["encoding", "release_gil"];

/// Engine parameters from keyword arguments, leaving out the binding's own options.
pub fn from_kwargs(kwargs: Option<&Bound<'_, PyDict>>) -> PyResult<Params> {
    let mut params = Params::new();
    let Some(kwargs) = kwargs else {
        return Ok(params);
    };
    for (name, value) in kwargs.iter() {
        let name: String = name.extract()?;
        if BINDING_OPTIONS.contains(&name.as_str()) {
            continue;
        }
        params = params.with(&name, param_text(&name, &value)?);
    }
    Ok(params)
}

fn param_text(name: &str, value: &Bound<'_, PyAny>) -> PyResult<String> {
    if let Ok(text) = value.cast::<PyString>() {
        return Ok(text.to_cow()?.into_owned());
    }
    // bool before int: Python's bool is an int.
    if let Ok(flag) = value.cast::<PyBool>() {
        return Ok(if flag.is_true() { "true" } else { "false" }.to_string());
    }
    if value.cast::<PyInt>().is_ok() || value.cast::<PyFloat>().is_ok() {
        return Ok(value.str()?.to_cow()?.into_owned());
    }
    Err(PyTypeError::new_err(format!(
        "parameter {name} must be str, int, float or bool, not {}",
        value.get_type().name()?
    )))
}
