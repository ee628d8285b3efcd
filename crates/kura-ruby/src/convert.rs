//! Keys and values between Ruby and Kura: Strings (any encoding, taken as their bytes) and,
//! for keys, Symbols in; binary Strings (ASCII-8BIT), or the database's `encoding:`, out.
//!
//! Anything else is a `TypeError`, as leveldb-ruby raises: a database stores bytes, and
//! calling `to_s` on whatever comes would store `"1"` for `1` and read back a different key.

use magnus::encoding::Index;
use magnus::value::ReprValue;
use magnus::{Error, RString, Ruby, Symbol, Value};

/// A key or value argument, checked: its bytes are read only while no Ruby code runs.
pub struct Input {
    text: RString,
}

impl Input {
    /// Checks a key (String or Symbol).
    pub fn key(ruby: &Ruby, value: Value) -> Result<Input, Error> {
        if let Some(text) = RString::from_value(value) {
            return Ok(Input { text });
        }
        if Symbol::from_value(value).is_some() {
            // Symbol#name: the symbol's frozen String, whatever its bytes and encoding.
            return Ok(Input { text: value.funcall("name", ())? });
        }
        Err(type_error(ruby, "keys", "String or Symbol", value))
    }

    /// Checks a value (String).
    pub fn value(ruby: &Ruby, value: Value) -> Result<Input, Error> {
        match RString::from_value(value) {
            Some(text) => Ok(Input { text }),
            None => Err(type_error(ruby, "values", "String", value)),
        }
    }

    /// Runs `use_bytes` on the bytes without copying them. `use_bytes` must not call Ruby
    /// (nor release the GVL): that is what keeps the borrowed string alive and unchanged.
    pub fn with_bytes<R>(&self, use_bytes: impl FnOnce(&[u8]) -> R) -> R {
        // SAFETY: the GVL is held and `use_bytes` runs no Ruby code, so nothing can modify,
        // move or free the string while the slice is in use; the RString is on this thread's
        // stack, where the GC sees it.
        use_bytes(unsafe { self.text.as_slice() })
    }

    /// The bytes, copied: for calls that run without the GVL.
    pub fn to_vec(&self) -> Vec<u8> {
        self.with_bytes(<[u8]>::to_vec)
    }
}

fn type_error(ruby: &Ruby, what: &str, expected: &str, value: Value) -> Error {
    // SAFETY: `classname` borrows the class's name, used at once, before any other Ruby call.
    let class = unsafe { value.classname() }.into_owned();
    Error::new(ruby.exception_type_error(), format!("Kura: {what} must be a {expected}, not {class}"))
}

/// Makes the Ruby strings a database returns: binary unless opened with `encoding:`.
#[derive(Clone, Copy)]
pub struct Output {
    encoding: Option<Index>,
}

impl Output {
    pub fn new(encoding: Option<Index>) -> Output {
        Output { encoding }
    }

    pub fn string(&self, ruby: &Ruby, bytes: &[u8]) -> RString {
        match self.encoding {
            None => ruby.str_from_slice(bytes),
            Some(index) => ruby.enc_str_new(bytes, index),
        }
    }

    pub fn encoding(&self) -> Option<Index> {
        self.encoding
    }
}
