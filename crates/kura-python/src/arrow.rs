//! A column of Arrow strings or binaries read from its buffers (validity bitmap, offsets,
//! data), as `kura.dask` hands a pyarrow array to `kura.split_arrow`: the rows of a dataframe
//! partition reach Rust without a Python object per row. Every offset is checked against the
//! buffers there are: a column whose buffers do not agree is an InvalidArgument error naming
//! the row, never a read outside them.

use pyo3::prelude::*;
use pyo3::types::PyBytes;

/// What Python passes for one array: `(length, offset, validity or None, offsets, data,
/// wide)`, the array's `len()`, `.offset`, its buffers' bytes, and whether its offsets are
/// 64-bit (`large_string`, `large_binary`) rather than 32-bit.
pub type ArrowArg<'py> = (usize, usize, Option<Bound<'py, PyBytes>>, Bound<'py, PyBytes>, Bound<'py, PyBytes>, bool);

/// One Arrow string or binary array over borrowed buffers.
pub struct ArrowStrings<'a> {
    len: usize,
    start: usize,
    validity: Option<&'a [u8]>,
    offsets: &'a [u8],
    data: &'a [u8],
    wide: bool,
}

impl<'a> ArrowStrings<'a> {
    /// The array an `ArrowArg` describes.
    pub fn new(arg: &'a ArrowArg<'_>) -> ArrowStrings<'a> {
        let (len, start, validity, offsets, data, wide) = arg;
        ArrowStrings {
            len: *len,
            start: *start,
            validity: validity.as_ref().map(|v| v.as_bytes()),
            offsets: offsets.as_bytes(),
            data: data.as_bytes(),
            wide: *wide,
        }
    }

    /// The number of rows.
    pub fn len(&self) -> usize {
        self.len
    }

    /// The bytes of `row` (None when it is null), or what is wrong with the buffers there.
    pub fn get(&self, row: usize) -> Result<Option<&'a [u8]>, String> {
        if row >= self.len {
            return Err(format!("row {row} is past the column's {} rows", self.len));
        }
        let at = self.start + row;
        if let Some(validity) = self.validity {
            let byte = validity.get(at / 8).ok_or_else(|| format!("row {row}: the validity bitmap is too short"))?;
            if byte & (1 << (at % 8)) == 0 {
                return Ok(None);
            }
        }
        let (begin, end) = (self.offset(at), self.offset(at + 1));
        match (begin, end) {
            (Some(begin), Some(end)) => self
                .data
                .get(begin..end)
                .map(Some)
                .ok_or_else(|| format!("row {row}: offsets {begin}..{end} outside the data")),
            _ => Err(format!("row {row}: the offsets buffer is too short")),
        }
    }

    /// Offset number `at`, if the offsets buffer has it and it fits a usize.
    fn offset(&self, at: usize) -> Option<usize> {
        if self.wide {
            let bytes = self.offsets.get(at * 8..at * 8 + 8)?;
            usize::try_from(i64::from_le_bytes(bytes.try_into().ok()?)).ok()
        } else {
            let bytes = self.offsets.get(at * 4..at * 4 + 4)?;
            usize::try_from(i32::from_le_bytes(bytes.try_into().ok()?)).ok()
        }
    }
}
