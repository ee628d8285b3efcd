//! What the memory engines share about their life: the optional backing file (loaded at
//! open, written back atomically on synchronize and close), the writable flag and the
//! closed state, the properties `inspect` reports about them, and the salvage of a damaged
//! snapshot into a new one.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::Mutex;

use super::snapshot::{Snapshot, SnapshotWriter};
use super::snapshot_salvage::Salvage;
use crate::dbm::OpenMode;
use crate::engine::RestoreReport;
use crate::error::{Error, Result};
use crate::file::{remove_if_exists, replace_file, sibling_path};
use crate::stats::{Stat, Stats};

pub struct Backing {
    /// The snapshot file, or None for a purely in-memory database.
    path: Option<PathBuf>,
    /// Engine class byte written in snapshot headers.
    class: u8,
    writable: bool,
    closed: AtomicBool,
    /// One snapshot write at a time (they share the temporary file).
    saving: Mutex<()>,
}

/// A freshly opened backing and what the engine must do with it.
pub struct Opened {
    pub backing: Backing,
    /// The snapshot's bytes to load, if the file existed and is to be read.
    pub snapshot: Option<Vec<u8>>,
    /// Whether to write an (empty) snapshot at once: a created or truncated file, so that
    /// the path exists from the open on and a bad directory fails now, not at close.
    pub write_now: bool,
}

impl Backing {
    /// A database with no file.
    pub fn in_memory(class: u8) -> Backing {
        Backing { path: None, class, writable: true, closed: AtomicBool::new(false), saving: Mutex::new(()) }
    }

    /// Resolves `mode` for `path` (an empty path means no file).
    pub fn open(path: &Path, mode: OpenMode, class: u8) -> Result<Opened> {
        if path.as_os_str().is_empty() {
            return Ok(Opened { backing: Backing::in_memory(class), snapshot: None, write_now: false });
        }
        if std::fs::metadata(path).is_ok_and(|m| !m.is_file()) {
            // A directory or a device is a mistake in the arguments, as the file engines say.
            return Err(crate::file::not_regular(path));
        }
        let backing = Backing {
            path: Some(path.to_path_buf()),
            class,
            writable: mode.is_writable(),
            closed: AtomicBool::new(false),
            saving: Mutex::new(()),
        };
        let read = || std::fs::read(path).map_err(|e| Error::io(format!("read {}", path.display()), e));
        let (snapshot, write_now) = match mode {
            OpenMode::ReadOnly | OpenMode::Write => (Some(read()?), false),
            OpenMode::Create => match read() {
                Ok(bytes) => (Some(bytes), false),
                Err(e) if e.is_not_found() => (None, true),
                Err(e) => return Err(e),
            },
            OpenMode::Truncate => (None, true),
        };
        if mode.is_writable() && snapshot.is_some() {
            // Snapshots replace the file by a rename, which a read-only file does not stop:
            // a writer checks that it may write the file itself, as the file engines do.
            std::fs::OpenOptions::new()
                .write(true)
                .open(path)
                .map_err(|e| Error::io(format!("open {} for writing", path.display()), e))?;
        }
        Ok(Opened { backing, snapshot, write_now })
    }

    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    pub fn is_writable(&self) -> bool {
        self.writable
    }

    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Relaxed)
    }

    /// Fails with Infeasible once the database is closed.
    #[inline]
    pub fn check_open(&self) -> Result<()> {
        if self.closed.load(Ordering::Relaxed) {
            return Err(Error::infeasible("the database is closed"));
        }
        Ok(())
    }

    /// Fails with Infeasible on a closed or read-only database.
    #[inline]
    pub fn check_writable(&self) -> Result<()> {
        self.check_open()?;
        if !self.writable {
            return Err(read_only());
        }
        Ok(())
    }

    /// Writes `params` (what a reopen takes from the file, `name=value,...`) and every record
    /// given by `write_records` to the backing file, atomically: into a sibling temporary
    /// file, fsynced, then renamed over. Does nothing without a file or when read-only.
    pub fn save(&self, params: &str, write_records: impl FnOnce(&mut SnapshotWriter) -> Result<()>) -> Result<()> {
        let Some(path) = self.path.as_deref() else { return Ok(()) };
        if !self.writable {
            return Ok(());
        }
        let _one_at_a_time = self.saving.lock();
        let temporary = sibling_path(path, ".tmp");
        let outcome = SnapshotWriter::create(&temporary, self.class, params).and_then(|mut writer| {
            write_records(&mut writer)?;
            writer.finish()
        });
        match outcome {
            Ok(_) => replace_file(&temporary, path),
            Err(e) => {
                let _ = remove_if_exists(&temporary);
                Err(e)
            }
        }
    }

    /// `Dbm::synchronize` of every memory engine: writes the file back with `save`. The
    /// snapshot is fsynced before it replaces the file, so `hard` asks for nothing more.
    pub fn synchronize(&self, save: impl FnOnce() -> Result<()>) -> Result<()> {
        self.check_open()?;
        save()
    }

    /// `Dbm::inspect` of every memory engine: the stats all report (`file_size` is the
    /// memory in use, there being no file of records; always healthy), the backing file's
    /// `path` if there is one, then the engine's `own` figures.
    pub fn stats(
        &self,
        class: &'static str,
        count: u64,
        memory_usage: u64,
        own: impl IntoIterator<Item = (&'static str, Stat)>,
    ) -> Stats {
        let mut stats = Stats::new(class, count, memory_usage, true);
        stats.path = self.path().map(Path::to_path_buf);
        stats.details.extend(own);
        stats
    }

    /// Marks the database closed; false if it already was.
    pub fn mark_closed(&self) -> bool {
        !self.closed.swap(true, Ordering::AcqRel)
    }

    /// `Dbm::close` of every memory engine: writes the file back with `save`, then closes.
    pub fn close(&self, save: impl FnOnce() -> Result<()>) -> Result<()> {
        self.check_open()?;
        save()?;
        self.mark_closed();
        Ok(())
    }

    /// What a memory engine does when dropped: a database dropped without `close` still
    /// writes its file back, as a user of an in-memory database with a file would expect;
    /// errors cannot be reported from a drop.
    pub fn save_if_open(&self, save: impl FnOnce() -> Result<()>) {
        if !self.is_closed() {
            let _ = save();
        }
    }
}

/// The error of a change asked of a read-only database.
pub fn read_only() -> Error {
    Error::infeasible("the database is opened read-only")
}

/// Loads a snapshot's records through `insert`, for an engine that stores no parameters.
pub fn load(bytes: &[u8], insert: impl FnMut(&[u8], &[u8]) -> Result<()>) -> Result<u64> {
    Snapshot::read(bytes)?.records(insert)
}

/// `kura restore` of a TinyDbm, BabyDbm or CacheDbm snapshot (engine class `class`): writes
/// every record of every intact block of `source` and its parameters (when a copy is intact)
/// into a new snapshot at `dest`, atomically, and reports what it kept and dropped.
pub fn salvage_file(source: &Path, dest: &Path, class: u8) -> Result<RestoreReport> {
    let bytes = std::fs::read(source).map_err(|e| Error::io(format!("read {}", source.display()), e))?;
    let salvage = Salvage::read(&bytes).map_err(|e| e.in_file(source))?;
    let mut report = None;
    let target = Backing::open(dest, OpenMode::Truncate, class)?.backing;
    target.save(salvage.params().unwrap_or_default(), |writer| {
        report = Some(salvage.records(|key, value| writer.record(key, value))?);
        Ok(())
    })?;
    report.ok_or_else(|| Error::broken("a bug in Kura: the snapshot salvage wrote no report"))
}
