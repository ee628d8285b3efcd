//! redb 4: one table of byte-string keys and values in a database with the run's cache size.
//! A commit is one write transaction with `Durability::Immediate` (redb's default, fsync at
//! commit) when durable and `Durability::None` when not. Reads open one read transaction per
//! phase (per thread). Compaction is `Database::compact`.

use std::path::{Path, PathBuf};

use redb::{Database, Durability, ReadableDatabase, ReadableTableMetadata, TableDefinition};

use crate::records::{Key, Op};
use crate::store::{err, Result, Store};

const TABLE: TableDefinition<&[u8], &[u8]> = TableDefinition::new("bench");

pub struct RedbStore {
    db: Database,
}

impl RedbStore {
    pub fn path(dir: &Path) -> PathBuf {
        dir.join("db.redb")
    }

    pub fn open(dir: &Path, cache_bytes: u64) -> Result<RedbStore> {
        let db = Database::builder()
            .set_cache_size(cache_bytes as usize)
            .create(Self::path(dir))
            .map_err(err("redb create"))?;
        let txn = db.begin_write().map_err(err("redb begin_write"))?;
        txn.open_table(TABLE).map_err(err("redb open_table"))?;
        txn.commit().map_err(err("redb commit"))?;
        Ok(RedbStore { db })
    }
}

impl Store for RedbStore {
    fn write(&mut self, ops: &mut dyn Iterator<Item = Op>, durable: bool) -> Result<()> {
        let mut txn = self.db.begin_write().map_err(err("redb begin_write"))?;
        if !durable {
            txn.set_durability(Durability::None).map_err(err("redb set_durability"))?;
        }
        {
            let mut table = txn.open_table(TABLE).map_err(err("redb open_table"))?;
            for op in ops {
                match op {
                    Op::Set(record) => {
                        table.insert(&record.key[..], &record.value[..]).map_err(err("redb insert"))?;
                    }
                    Op::Remove(key) => {
                        table.remove(&key[..]).map_err(err("redb remove"))?;
                    }
                }
            }
        }
        txn.commit().map_err(err("redb commit"))
    }

    fn len(&self) -> Result<u64> {
        let txn = self.db.begin_read().map_err(err("redb begin_read"))?;
        let table = txn.open_table(TABLE).map_err(err("redb open_table"))?;
        table.len().map_err(err("redb len"))
    }

    fn get_each(&self, keys: &mut dyn Iterator<Item = Key>, visit: &mut dyn FnMut(Option<&[u8]>)) -> Result<()> {
        let txn = self.db.begin_read().map_err(err("redb begin_read"))?;
        let table = txn.open_table(TABLE).map_err(err("redb open_table"))?;
        for key in keys {
            let value = table.get(&key[..]).map_err(err("redb get"))?;
            visit(value.as_ref().map(|v| v.value()));
        }
        Ok(())
    }

    fn range_each(
        &self,
        starts: &mut dyn Iterator<Item = Key>,
        len: usize,
        visit: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<bool> {
        let txn = self.db.begin_read().map_err(err("redb begin_read"))?;
        let table = txn.open_table(TABLE).map_err(err("redb open_table"))?;
        for start in starts {
            for item in table.range::<&[u8]>(&start[..]..).map_err(err("redb range"))?.take(len) {
                let (key, value) = item.map_err(err("redb range"))?;
                visit(key.value(), value.value());
            }
        }
        Ok(true)
    }

    fn compact(&mut self) -> Result<bool> {
        // `compact` answers whether it moved anything; either way the file is now compact.
        self.db.compact().map_err(err("redb compact"))?;
        Ok(true)
    }

    fn close(self: Box<Self>) -> Result<()> {
        drop(self.db);
        Ok(())
    }
}
