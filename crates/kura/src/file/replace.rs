//! Replacing a database file by a new one so that a crash at any moment leaves either the
//! old file or the new one, never a mix: write beside it, fsync, rename over, fsync the
//! directory.

use std::fs::File;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// `path` with `suffix` appended to its file name (`a.kuh` -> `a.kuh.rebuild`), in the same
/// directory so that the final rename stays within one file system.
pub fn sibling_path(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.file_name().map(|n| n.to_os_string()).unwrap_or_default();
    name.push(suffix);
    path.with_file_name(name)
}

/// Atomically moves the finished file `new` over `target`. `new` must already be fsynced.
pub fn replace_file(new: &Path, target: &Path) -> Result<()> {
    std::fs::rename(new, target)
        .map_err(|e| Error::io(format!("rename {} to {}", new.display(), target.display()), e))?;
    sync_parent(target)
}

/// Fsyncs the directory holding `path`, so that a file created or renamed there stays there
/// across a power loss.
pub fn sync_parent(path: &Path) -> Result<()> {
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let dir = File::open(parent).map_err(|e| Error::io(format!("open {}", parent.display()), e))?;
    super::sync_probe::before_sync(parent);
    dir.sync_all().map_err(|e| Error::io(format!("fsync {}", parent.display()), e))
}

/// `fdatasync`s the file at `path` as it stands, when it exists (a file this process did not
/// write, or wrote without syncing).
pub fn sync_existing(path: &Path) -> Result<()> {
    let file = match File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(Error::io(format!("open {}", path.display()), e)),
    };
    super::sync_probe::before_sync(path);
    file.sync_data().map_err(|e| Error::io(format!("fdatasync {}", path.display()), e))
}

/// Removes a leftover file, treating "already absent" as success.
pub fn remove_if_exists(path: &Path) -> Result<()> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Error::io(format!("remove {}", path.display()), e)),
    }
}
