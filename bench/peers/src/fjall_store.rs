//! fjall 3, the Rust LSM tree: one keyspace in a `Database` with the run's cache size,
//! otherwise fjall's defaults, but for the memtable's size when the run gives one (under a
//! memory limit; fjall's docs recommend 8-64 MiB "depending on how much memory is available"). A commit is one `OwnedWriteBatch` with durability
//! `PersistMode::SyncData` (the journal is fdatasync'ed before the commit returns) when
//! durable, and `PersistMode::Buffer` (written to the OS, not synced) when not, as redb's
//! benchmark persists fjall. Compaction is `Keyspace::major_compact`. Closing persists the
//! journal and flushes the memtable to a table (`rotate_memtable_and_wait`), so that the size
//! measured and the reads after a reopen are the tables'.

use std::path::Path;

use fjall::{Database, Keyspace, KeyspaceCreateOptions, PersistMode};

use crate::records::{Key, Op};
use crate::store::{err, Result, Store};

pub struct FjallStore {
    db: Database,
    keyspace: Keyspace,
}

impl FjallStore {
    /// `memtable_bytes`: 0 keeps fjall's default `max_memtable_size` (64 MiB).
    pub fn open(dir: &Path, cache_bytes: u64, memtable_bytes: u64) -> Result<FjallStore> {
        let mut builder = Database::builder(dir).cache_size(cache_bytes);
        if memtable_bytes > 0 {
            // Without a cap on all memtables together (RocksDB's `db_write_buffer_size`, off
            // by default in fjall) sealed memtables pile up while their flushes run behind the
            // bulk load: OOM-killed at 128 MiB within 5 s. fjall marks the setting hidden and
            // deprecated ("todo"), but it is the one that stalls writers, as RocksDB's
            // `max_write_buffer_number` does there.
            #[expect(deprecated, reason = "fjall 3.1's only cap on all memtables together")]
            {
                builder = builder.max_write_buffer_size(Some(memtable_bytes * 2));
            }
        }
        let db = builder.open().map_err(err("fjall open"))?;
        let options = || {
            let options = KeyspaceCreateOptions::default();
            if memtable_bytes > 0 {
                options.max_memtable_size(memtable_bytes)
            } else {
                options
            }
        };
        let keyspace = db.keyspace("bench", options).map_err(err("fjall keyspace"))?;
        Ok(FjallStore { db, keyspace })
    }
}

impl Store for FjallStore {
    fn write(&mut self, ops: &mut dyn Iterator<Item = Op>, durable: bool) -> Result<()> {
        let mode = if durable { PersistMode::SyncData } else { PersistMode::Buffer };
        let mut batch = self.db.batch().durability(Some(mode));
        for op in ops {
            match op {
                Op::Set(record) => batch.insert(&self.keyspace, record.key, record.value),
                Op::Remove(key) => batch.remove(&self.keyspace, key),
            }
        }
        batch.commit().map_err(err("fjall commit"))
    }

    fn len(&self) -> Result<u64> {
        Ok(self.keyspace.len().map_err(err("fjall len"))? as u64)
    }

    fn get_each(&self, keys: &mut dyn Iterator<Item = Key>, visit: &mut dyn FnMut(Option<&[u8]>)) -> Result<()> {
        for key in keys {
            let value = self.keyspace.get(key).map_err(err("fjall get"))?;
            visit(value.as_deref());
        }
        Ok(())
    }

    fn range_each(
        &self,
        starts: &mut dyn Iterator<Item = Key>,
        len: usize,
        visit: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<bool> {
        for start in starts {
            for guard in self.keyspace.range(start..).take(len) {
                let (key, value) = guard.into_inner().map_err(err("fjall range"))?;
                visit(&key, &value);
            }
        }
        Ok(true)
    }

    fn compact(&mut self) -> Result<bool> {
        self.keyspace.major_compact().map_err(err("fjall major_compact"))?;
        Ok(true)
    }

    fn close(self: Box<Self>) -> Result<()> {
        self.db.persist(PersistMode::SyncAll).map_err(err("fjall persist"))?;
        self.keyspace.rotate_memtable_and_wait().map_err(err("fjall flush"))?;
        drop(self.keyspace);
        drop(self.db);
        Ok(())
    }
}
