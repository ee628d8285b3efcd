//! Keys and values between Python and Kura: `bytes` in and out, `str` accepted as input
//! (encoded with the database's encoding, UTF-8 by default) and produced as output when the
//! database was opened with `encoding=...`.

use std::borrow::Cow;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyMemoryView, PyString};

/// How a database hands keys and values back to Python.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Encoding {
    /// `bytes` results; `str` inputs are encoded as UTF-8.
    Bytes,
    /// `str` results decoded as UTF-8 (the fast path: no codec lookup).
    Utf8,
    /// `str` results through Python's codec of this name.
    Codec(String),
}

impl Encoding {
    pub fn from_option(name: Option<&str>) -> Encoding {
        match name {
            None => Encoding::Bytes,
            Some(name) => {
                let normal = name.to_ascii_lowercase().replace(['-', '_'], "");
                if normal == "utf8" {
                    Encoding::Utf8
                } else {
                    Encoding::Codec(name.to_string())
                }
            }
        }
    }

    pub fn name(&self) -> Option<&str> {
        match self {
            Encoding::Bytes => None,
            Encoding::Utf8 => Some("utf-8"),
            Encoding::Codec(name) => Some(name),
        }
    }

    /// The bytes of a key or value given by Python: `bytes` (borrowed, no copy), `str`,
    /// `bytearray` or `memoryview` (copied). Anything else is a TypeError naming `what`.
    pub fn input<'a>(&self, obj: &'a Bound<'_, PyAny>, what: &str) -> PyResult<Cow<'a, [u8]>> {
        if let Ok(bytes) = obj.cast::<PyBytes>() {
            return Ok(Cow::Borrowed(bytes.as_bytes()));
        }
        if let Ok(text) = obj.cast::<PyString>() {
            return match self {
                // Copied: the stable ABI of CPython 3.9 (abi3-py39), which the one wheel is
                // built for, has no call that lends a str's UTF-8; to_cow borrows where a
                // build for a later ABI would allow it.
                Encoding::Bytes | Encoding::Utf8 => Ok(match text.to_cow()? {
                    Cow::Borrowed(text) => Cow::Borrowed(text.as_bytes()),
                    Cow::Owned(text) => Cow::Owned(text.into_bytes()),
                }),
                Encoding::Codec(name) => {
                    let encoded = text.call_method1("encode", (name.as_str(),))?;
                    Ok(Cow::Owned(encoded.cast_into::<PyBytes>()?.as_bytes().to_vec()))
                }
            };
        }
        if let Ok(array) = obj.cast::<PyByteArray>() {
            return Ok(Cow::Owned(array.to_vec()));
        }
        if obj.cast::<PyMemoryView>().is_ok() {
            let copied = obj.py().get_type::<PyBytes>().call1((obj,))?;
            return Ok(Cow::Owned(copied.cast_into::<PyBytes>()?.as_bytes().to_vec()));
        }
        Err(PyTypeError::new_err(format!("{what} must be bytes or str, not {}", obj.get_type().name()?)))
    }

    /// True when `output` runs no Python code (bytes, or UTF-8 decoded in Rust), so it may be
    /// called while the engine holds a lock.
    pub fn runs_no_python(&self) -> bool {
        !matches!(self, Encoding::Codec(_))
    }

    /// A stored key or value as the Python object this database returns.
    pub fn output<'py>(&self, py: Python<'py>, data: &[u8]) -> PyResult<Bound<'py, PyAny>> {
        match self {
            Encoding::Bytes => Ok(PyBytes::new(py, data).into_any()),
            Encoding::Utf8 => match std::str::from_utf8(data) {
                Ok(text) => Ok(PyString::new(py, text).into_any()),
                Err(e) => Err(PyValueError::new_err(format!(
                    "a stored key or value is not UTF-8 ({e}); open without encoding= for bytes"
                ))),
            },
            Encoding::Codec(name) => PyBytes::new(py, data).call_method1("decode", (name.as_str(),)),
        }
    }
}
