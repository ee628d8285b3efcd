//! Opening a database file: only regular files qualify, so that a directory or a device
//! given as a database is a clear InvalidArgument rather than a strange failure later.

use std::fs::{File, OpenOptions};
use std::path::Path;

use crate::error::{Error, Result};

/// Opens `path` for reading (and writing with `writable`), creating it when `create` and
/// `writable` are both set.
pub fn open_regular_file(path: &Path, writable: bool, create: bool) -> Result<File> {
    let mut options = OpenOptions::new();
    options.read(true).write(writable).create(create && writable);
    let file = options.open(path).map_err(|e| {
        // Opening a directory for writing fails in the kernel (EISDIR); say what reading it
        // says, so that every mode gives the same error for the same mistake.
        if std::fs::metadata(path).is_ok_and(|m| m.is_dir()) {
            not_regular(path)
        } else {
            Error::io(format!("open {}", path.display()), e)
        }
    })?;
    let meta = file.metadata().map_err(|e| Error::io(format!("stat {}", path.display()), e))?;
    if !meta.is_file() {
        return Err(not_regular(path));
    }
    Ok(file)
}

/// The error for a database path that is a directory or a device: a mistake in the
/// arguments (InvalidArgument), said the same way by every engine.
pub fn not_regular(path: &Path) -> Error {
    Error::invalid(format!("{} is not a regular file", path.display()))
}
