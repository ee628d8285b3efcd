//! One shard file of a set, written on its own: the step a distributed loader (Dask's
//! `kura.dask.to_kura`, or Spark's or Ray's `mapPartitions`) runs once per shard after routing
//! its rows to shards with `shard_of`, each shard perhaps in another process or on another
//! host writing to shared storage.
//!
//! The writer batches records as the importer's writers do (`DEFAULT_BATCH` records or
//! `BATCH_BYTES` bytes a `write_batch`; one whole batch for an engine that prefers it), sizes
//! a new file for `expected_records` or, when that is unknown, rebuilds it at the end for the
//! records it got (as an import from a stream does), and refuses a key that routes to another
//! shard: such a record would be unreachable in the set.
//!
//! Until `finish` the shard is written under `<shard file>.partial`, a name no set lists, and
//! renamed into place only once closed cleanly. A writer that fails, is aborted or dropped
//! unfinished removes its partial file; a process killed midway leaves only a `.partial`
//! file, which the next writer of that shard replaces. So a shard file under its own name is
//! always a complete one, and a set with a shard still being written or lost in a failure
//! opens as incomplete (its missing shard named), never as a set short of records.

use std::path::{Path, PathBuf};

use crate::batch::WriteBatch;
use crate::dbm::{Dbm, OpenMode, Params};
use crate::error::{Error, ErrorKind, Result};
use crate::journal::journal_path;
use crate::shard_dbm::{self, naming};

use super::packed_rows::PackedRows;
use super::pipeline::BATCH_BYTES;
use super::{to_size, SizeAtEnd, DEFAULT_BATCH};

/// How to write a shard, besides its place in the set and the engine parameters.
#[derive(Debug, Clone, Default)]
pub struct ShardWriterOptions {
    /// Replace an existing shard file (otherwise its existence is a Duplicate error).
    pub overwrite: bool,
    /// The records this shard will get, if known: a new file is sized for them at the start
    /// instead of being rebuilt at the end.
    pub expected_records: Option<u64>,
    /// Records per write batch (default `DEFAULT_BATCH`).
    pub batch: Option<usize>,
}

/// What `ShardWriter::finish` wrote.
#[derive(Debug, Clone)]
pub struct ShardWritten {
    /// The shard file, under its final name.
    pub path: PathBuf,
    /// Records written (a key given twice counts twice).
    pub stored: u64,
    /// Records in the shard.
    pub count: u64,
    /// Bytes of the shard file.
    pub file_size: u64,
    /// Whether the shard was rebuilt at the end (sized for its records, or as it asked).
    pub rebuilt: bool,
}

/// Writes shard `index` of a set of `num_shards` under `base` (module documentation).
pub struct ShardWriter {
    index: usize,
    num_shards: usize,
    path: PathBuf,
    partial: PathBuf,
    /// `None` once finished (or failed at the end, the partial file removed).
    db: Option<Box<dyn Dbm>>,
    pending: WriteBatch,
    batch: usize,
    /// The engine takes the whole input as one batch (`Dbm::prefers_whole_batches`).
    whole: bool,
    stored: u64,
    size_at_end: Option<SizeAtEnd>,
}

impl ShardWriter {
    /// Starts shard `index` of `num_shards` under `base`: the inner engine comes from `params`
    /// (`inner_engine=`) or the base's extension, as for `ShardDbm::open`, and every other
    /// parameter goes to it. `num_shards` in `params`, if given, must agree.
    pub fn create(
        base: &Path,
        index: usize,
        num_shards: usize,
        params: &Params,
        options: &ShardWriterOptions,
    ) -> Result<ShardWriter> {
        naming::check_count(num_shards)?;
        if index >= num_shards {
            return Err(Error::invalid(format!("shard index {index} is outside a set of {num_shards} shards")));
        }
        if base.as_os_str().is_empty() {
            return Err(Error::invalid("a shard writer needs the set's base path, on storage every writer shares"));
        }
        if options.batch == Some(0) {
            return Err(Error::invalid("batch must be at least 1"));
        }
        if let Some(given) = params.get_u64("num_shards")? {
            if given != num_shards as u64 {
                return Err(Error::invalid(format!(
                    "num_shards={given} in the parameters but the writer writes a set of {num_shards}"
                )));
            }
        }
        let inner = shard_dbm::new_set_inner_engine(crate::registry::ENGINES, base, params)?;
        let path = naming::shard_path(base, index, num_shards);
        if !options.overwrite && path.exists() {
            return Err(Error::new(
                ErrorKind::Duplicate,
                format!("{} exists: remove the old set first, or pass overwrite to replace it", path.display()),
            ));
        }
        let mut partial = path.clone().into_os_string();
        partial.push(".partial");
        let partial = PathBuf::from(partial);
        // The caps the set shares out (a cache's) bound the set: this shard takes its share.
        let mut inner_params = shard_dbm::params_of_shard(
            inner,
            &params.without("num_shards").without("inner_engine").without("engine"),
            num_shards,
            index,
        )?;
        let mut size_at_end = None;
        if to_size(inner, &inner_params) {
            match options.expected_records {
                Some(records) => inner_params = inner_params.or_defaults(&inner.import_params(records)),
                None => size_at_end = Some(SizeAtEnd { engine: inner, given: inner_params.clone(), ways: 1 }),
            }
        }
        // Truncate: a partial file left by a killed writer is replaced (and one that another
        // writer holds open is a Locked error, not shared).
        let db = inner.open(&partial, OpenMode::Truncate, &inner_params).map_err(|e| name_shard(e, &path))?;
        let whole = db.prefers_whole_batches();
        Ok(ShardWriter {
            index,
            num_shards,
            path,
            partial,
            db: Some(db),
            pending: WriteBatch::new(),
            batch: options.batch.unwrap_or(DEFAULT_BATCH),
            whole,
            stored: 0,
            size_at_end,
        })
    }

    /// The shard file this writer makes (it lies under `.partial` until `finish`).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Adds a record. A key that routes to another shard is an InvalidArgument error and
    /// changes nothing; the writer stays usable.
    pub fn set(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        let routed = shard_dbm::shard_of(key, self.num_shards);
        if routed != self.index {
            let shown: String = key.escape_ascii().to_string().chars().take(80).collect();
            return Err(Error::invalid(format!(
                "key \"{shown}\" routes to shard {routed} of {}, not to shard {} that this writer writes ({}): \
                 route each row with shard_of(key, {})",
                self.num_shards,
                self.index,
                self.path.display(),
                self.num_shards
            )));
        }
        self.pending.set(key, value);
        if !self.whole && (self.pending.len() >= self.batch || self.pending.byte_size() >= BATCH_BYTES) {
            self.flush()?;
        }
        Ok(())
    }

    /// Adds every record of a packed byte string (`packed_rows`); returns how many. A
    /// misrouted key stops it with the records before it added.
    pub fn set_packed(&mut self, packed: &[u8]) -> Result<u64> {
        let mut added = 0;
        for record in PackedRows::new(packed) {
            let (key, value) = record?;
            self.set(key, value)?;
            added += 1;
        }
        Ok(added)
    }

    fn db(&self) -> Result<&dyn Dbm> {
        self.db
            .as_deref()
            .ok_or_else(|| Error::infeasible(format!("the writer of {} has finished", self.path.display())))
    }

    fn flush(&mut self) -> Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        self.db()?.write_batch(&self.pending).map_err(|e| name_shard(e, &self.path))?;
        self.stored += self.pending.len() as u64;
        self.pending.clear();
        Ok(())
    }

    /// Writes what is pending, sizes the shard if it was created unsized, closes it and
    /// renames it to its shard name. On an error the partial file is removed.
    pub fn finish(mut self) -> Result<ShardWritten> {
        let outcome = self.complete();
        if outcome.is_err() {
            self.discard();
        }
        outcome
    }

    fn complete(&mut self) -> Result<ShardWritten> {
        self.flush()?;
        let db = self.db()?;
        let rebuilt = self.size_at_end.is_some() || db.should_be_rebuilt()?;
        if rebuilt {
            let params = match &self.size_at_end {
                Some(size) => size.params(db.count()?),
                None => Params::new(),
            };
            db.rebuild(&params)?;
        }
        let count = db.count()?;
        db.close()?;
        self.db = None;
        let rename = |from: &Path, to: &Path| {
            std::fs::rename(from, to)
                .map_err(|e| Error::io(format!("rename {} to {}", from.display(), to.display()), e))
        };
        // A journal left by the engine goes with its file; an old shard's journal goes.
        let (journal, final_journal) = (journal_path(&self.partial), journal_path(&self.path));
        if journal.exists() {
            rename(&journal, &final_journal)?;
        } else {
            remove_if_exists(&final_journal)?;
        }
        rename(&self.partial, &self.path)?;
        let file_size = std::fs::metadata(&self.path).map_or(0, |m| m.len());
        Ok(ShardWritten { path: self.path.clone(), stored: self.stored, count, file_size, rebuilt })
    }

    /// Stops without a shard: the partial file is removed.
    pub fn abort(mut self) {
        self.discard();
    }

    fn discard(&mut self) {
        if let Some(db) = self.db.take() {
            // The file goes anyway: how it was closed does not matter.
            let _ = db.close();
        }
        let _ = remove_if_exists(&self.partial);
        let _ = remove_if_exists(&journal_path(&self.partial));
    }
}

impl Drop for ShardWriter {
    /// An unfinished writer leaves no file behind (a build that failed midway).
    fn drop(&mut self) {
        if self.db.is_some() {
            self.discard();
        }
    }
}

fn remove_if_exists(path: &Path) -> Result<()> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Error::io(format!("remove {}", path.display()), e)),
    }
}

/// Names the shard in an error unless the message already does.
fn name_shard(e: Error, path: &Path) -> Error {
    let shown = path.display().to_string();
    if e.message().contains(&shown) {
        e
    } else {
        Error::new(e.kind(), format!("{shown}: {}", e.message()))
    }
}

#[cfg(test)]
mod tests {
    #![expect(clippy::unwrap_used, reason = "a test fails loudly on the first broken expectation")]
    #![expect(clippy::indexing_slicing, reason = "the shards are indexed by construction")]
    use std::collections::BTreeMap;

    use super::*;
    use crate::shard_dbm::{shard_of, ShardDbm};
    use crate::split_mix::mix;

    fn options() -> ShardWriterOptions {
        ShardWriterOptions { batch: Some(7), ..ShardWriterOptions::default() }
    }

    /// Writers of every shard, fed random records routed by `shard_of`, make a set that
    /// holds exactly the model's records (the later value of a repeated key winning).
    #[test]
    fn writers_of_every_shard_make_a_set_equal_to_the_model() {
        for (extension, params, expected) in [
            ("kuh", Params::new(), None),
            ("kuh", Params::new(), Some(300)),
            ("kut", Params::new().with("record_comp", "lz4"), None),
            ("kumz", Params::new(), Some(300)),
        ] {
            let dir = tempfile::tempdir().unwrap();
            let base = dir.path().join(format!("set.{extension}"));
            let shards = 3;
            let mut model = BTreeMap::new();
            let mut routed: Vec<Vec<(Vec<u8>, Vec<u8>)>> = vec![Vec::new(); shards];
            for i in 0..900u64 {
                let key = format!("k{}", mix(i) % 400).into_bytes();
                let value = format!("v{i}").into_bytes();
                model.insert(key.clone(), value.clone());
                routed[shard_of(&key, shards)].push((key, value));
            }
            let options = ShardWriterOptions { expected_records: expected, ..options() };
            for (index, records) in routed.iter().enumerate() {
                let mut writer = ShardWriter::create(&base, index, shards, &params, &options).unwrap();
                // Half the records one by one, half packed as a distributed loader sends them.
                let (single, packed) = records.split_at(records.len() / 2);
                for (key, value) in single {
                    writer.set(key, value).unwrap();
                }
                let mut bytes = Vec::new();
                for (key, value) in packed {
                    super::super::packed_rows::pack(&mut bytes, key, value);
                }
                assert_eq!(writer.set_packed(&bytes).unwrap(), packed.len() as u64);
                let written = writer.finish().unwrap();
                assert_eq!(written.stored, records.len() as u64);
                assert_eq!(written.path, naming::shard_path(&base, index, shards));
            }
            let set = ShardDbm::open(&base, OpenMode::ReadOnly, &params, crate::registry::ENGINES).unwrap();
            assert_eq!(set.count().unwrap(), model.len() as u64, "{extension}");
            for (key, value) in &model {
                assert_eq!(&set.get(key).unwrap(), value, "{extension}");
            }
            set.close().unwrap();
        }
    }

    /// A set of caches written shard by shard holds the caps given for the set, as one
    /// opened whole does: each writer gives its shard its share.
    #[test]
    fn shards_written_apart_share_the_set_s_caps() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().join("set.kumc");
        let (shards, cap) = (4, 1001u64);
        let params = Params::new().with("cap_rec_num", cap);
        let mut routed: Vec<Vec<Vec<u8>>> = vec![Vec::new(); shards];
        for i in 0..2000u64 {
            let key = format!("k{i}").into_bytes();
            routed[shard_of(&key, shards)].push(key);
        }
        for (index, keys) in routed.iter().enumerate() {
            let mut writer = ShardWriter::create(&base, index, shards, &params, &options()).unwrap();
            for key in keys {
                writer.set(key, b"value").unwrap();
            }
            let written = writer.finish().unwrap();
            assert!(written.count <= crate::memory_dbm::slotted::share(cap, shards, index) as u64);
        }
        let set = ShardDbm::open(&base, OpenMode::ReadOnly, &Params::new(), crate::registry::ENGINES).unwrap();
        assert_eq!(set.inspect().unwrap().caps.unwrap().records, cap);
        assert!(set.count().unwrap() <= cap);
        set.close().unwrap();
    }

    #[test]
    fn a_misrouted_key_an_existing_shard_and_an_unfinished_writer_are_refused_or_leave_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().join("set.kuh");
        let key_of =
            |shard: usize| (0u64..).map(|i| format!("key{i}")).find(|k| shard_of(k.as_bytes(), 2) == shard).unwrap();
        let mut writer = ShardWriter::create(&base, 0, 2, &Params::new(), &options()).unwrap();
        let error = writer.set(key_of(1).as_bytes(), b"v").unwrap_err();
        assert_eq!(error.kind(), ErrorKind::InvalidArgument);
        assert!(error.message().contains("routes to shard 1 of 2"), "{}", error.message());
        writer.set(key_of(0).as_bytes(), b"v").unwrap();
        assert!(!writer.path().exists(), "nothing under the shard's name before finish");
        drop(writer);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "a dropped writer leaves no file");

        let writer = ShardWriter::create(&base, 1, 2, &Params::new(), &options()).unwrap();
        writer.finish().unwrap();
        let again = ShardWriter::create(&base, 1, 2, &Params::new(), &options());
        assert_eq!(again.err().map(|e| e.kind()), Some(ErrorKind::Duplicate));
        let replace = ShardWriterOptions { overwrite: true, ..options() };
        let mut writer = ShardWriter::create(&base, 1, 2, &Params::new(), &replace).unwrap();
        writer.set(key_of(1).as_bytes(), b"new").unwrap();
        assert_eq!(writer.finish().unwrap().count, 1);
        // Shard 0 missing: the set does not open as if complete.
        let opened = ShardDbm::open(&base, OpenMode::ReadOnly, &Params::new(), crate::registry::ENGINES);
        assert_eq!(opened.err().map(|e| e.kind()), Some(ErrorKind::BrokenData));
        for (index, count) in [(2, 2), (0, 0)] {
            assert!(ShardWriter::create(&base, index, count, &Params::new(), &options()).is_err());
        }
    }
}
