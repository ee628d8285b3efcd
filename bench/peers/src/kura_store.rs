//! Kura's two file engines as benchmark stores: `TreeDbm` (`.kut`, B+ tree, `cache_bytes` set
//! to the cache size of the run, otherwise its defaults) and `HashDbm` (`.kuh`, `num_buckets`
//! twice the records, so that chains stay short as the peers' indexes do). Both are opened
//! through `kura::open`, the library's front door. A durable commit is
//! `Dbm::write_batch_durable` of a `WriteBatch` (a single durable write is a one-operation
//! batch); a non-durable single write is a commit that survives a killed process (`Dbm::set`,
//! and for TreeDbm `synchronize(false)` after it), and `TreeDbm`'s other non-durable path, a
//! one-operation `write_batch`, is measured as a phase of its own (main.rs). Removals are the same batches of `WriteBatch::remove`, as the peers
//! remove in their transactions (HashDbm's batch is `Dbm`'s default: each operation in turn,
//! then `synchronize(true)` when durable; TreeDbm's is atomic). Range reads are
//! `TreeDbm::scan`, which lends each record from the decoded page (HashDbm has none).

use std::any::Any;
use std::path::{Path, PathBuf};

use kura::{Dbm, OpenMode, Params, TreeDbm, WriteBatch};

use crate::records::{Key, Op, Record};
use crate::store::{err, Result, Store};

/// Which engine.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Engine {
    Tree,
    Hash,
}

pub struct KuraStore {
    db: Box<dyn Dbm>,
    engine: Engine,
}

impl KuraStore {
    /// The database file in `dir`.
    pub fn path(dir: &Path, engine: Engine) -> PathBuf {
        dir.join(match engine {
            Engine::Tree => "db.kut",
            Engine::Hash => "db.kuh",
        })
    }

    /// Opens or creates the database in `dir`; `records` sizes HashDbm's buckets,
    /// `cache_bytes` TreeDbm's page cache.
    pub fn open(dir: &Path, engine: Engine, records: u64, cache_bytes: u64) -> Result<KuraStore> {
        let params = match engine {
            Engine::Tree => format!("cache_bytes={cache_bytes}"),
            Engine::Hash => format!("num_buckets={}", records.saturating_mul(2).max(1024)),
        };
        let params = Params::parse(&params).map_err(err("kura params"))?;
        let db = kura::open(Self::path(dir, engine), OpenMode::Create, &params).map_err(err("kura::open"))?;
        Ok(KuraStore { db, engine })
    }

    fn tree(&self) -> Option<&TreeDbm> {
        (self.db.as_ref() as &dyn Any).downcast_ref::<TreeDbm>()
    }
}

impl Store for KuraStore {
    fn write(&mut self, ops: &mut dyn Iterator<Item = Op>, durable: bool) -> Result<()> {
        let mut batch = WriteBatch::new();
        for op in ops {
            match op {
                Op::Set(record) => batch.set(record.key, record.value),
                Op::Remove(key) => batch.remove(key),
            };
        }
        if durable {
            self.db.write_batch_durable(&batch).map_err(err("kura write_batch_durable"))
        } else {
            self.db.write_batch(&batch).map_err(err("kura write_batch"))
        }
    }

    /// TreeDbm: a checkpoint, which applies the write buffer (in a file larger than half the
    /// memory, commits wait there, journaled) and writes the tree durably.
    fn settle(&mut self) -> Result<()> {
        match self.tree() {
            Some(tree) => tree.checkpoint().map_err(err("kura checkpoint")),
            None => Ok(()),
        }
    }

    /// A commit that survives a killed process, as the peers' non-durable commits do: HashDbm's
    /// `set` is one already; TreeDbm's `set` is followed by `synchronize(false)`, which writes
    /// it to the journal (a `set` alone is lost with a killed process until the next commit).
    fn put_nosync(&mut self, record: &Record) -> Result<()> {
        self.db.set(&record.key, &record.value, true).map_err(err("kura set"))?;
        if self.engine == Engine::Tree {
            self.db.synchronize(false).map_err(err("kura synchronize(false)"))?;
        }
        Ok(())
    }

    fn alt_nosync_name(&self) -> Option<&'static str> {
        (self.engine == Engine::Tree).then_some("nosync writes, 1-op write_batch (overwrites)")
    }

    /// TreeDbm's other non-durable single write: `write_batch` of one operation, its atomic
    /// batch (committed to the file, not synced).
    fn alt_put_nosync(&mut self, record: &Record) -> Result<()> {
        let mut batch = WriteBatch::new();
        batch.set(record.key, record.value);
        self.db.write_batch(&batch).map_err(err("kura write_batch"))
    }

    fn len(&self) -> Result<u64> {
        self.db.count().map_err(err("kura count"))
    }

    fn get_each(&self, keys: &mut dyn Iterator<Item = Key>, visit: &mut dyn FnMut(Option<&[u8]>)) -> Result<()> {
        for key in keys {
            self.db.get_with(&key, visit).map_err(err("kura get_with"))?;
        }
        Ok(())
    }

    fn range_each(
        &self,
        starts: &mut dyn Iterator<Item = Key>,
        len: usize,
        visit: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<bool> {
        let Some(tree) = self.tree() else {
            return Ok(false);
        };
        for start in starts {
            let mut left = len;
            tree.scan(&start[..].., &mut |key, value| {
                visit(key, value);
                left -= 1;
                left > 0
            })
            .map_err(err("kura scan"))?;
        }
        Ok(true)
    }

    fn compact(&mut self) -> Result<bool> {
        self.db.rebuild(&Params::new()).map_err(err("kura rebuild"))?;
        Ok(true)
    }

    fn close(self: Box<Self>) -> Result<()> {
        self.db.close().map_err(err("kura close"))
    }
}
