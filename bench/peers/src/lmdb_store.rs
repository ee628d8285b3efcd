//! LMDB through heed. Durable commits use LMDB's default environment flags, its documented
//! durable setting (every commit syncs the data and the meta page). A non-durable commit runs
//! on the same environment with `NO_SYNC | NO_META_SYNC` switched on by `mdb_env_set_flags`
//! around it (a flag store, no I/O; redb's benchmark switches `NO_SYNC` the same way). The map
//! is 64 GiB: LMDB has no cache of its own (the page cache is its cache). Compaction is
//! `mdb_env_copy2` with `MDB_CP_COMPACT` into a new file that replaces the old, as in redb's
//! benchmark.

use std::fs::File;
use std::ops::Bound;
use std::path::{Path, PathBuf};

use heed::types::Bytes;
use heed::{CompactionOption, Database, Env, EnvFlags, EnvOpenOptions, FlagSetMode};

use crate::records::{Key, Op};
use crate::store::{err, Result, Store};

const MAP_SIZE: usize = 64 << 30;

pub struct LmdbStore {
    /// None only while compaction closes and reopens it.
    env: Option<Env>,
    db: Database<Bytes, Bytes>,
    dir: PathBuf,
}

impl LmdbStore {
    pub fn open(dir: &Path) -> Result<LmdbStore> {
        // SAFETY: heed asks that an environment is opened once per process and that nothing
        // changes its files behind it: this process opens it once at a time, alone.
        let env = unsafe { EnvOpenOptions::new().map_size(MAP_SIZE).open(dir) }.map_err(err("lmdb open"))?;
        let mut txn = env.write_txn().map_err(err("lmdb write_txn"))?;
        let db = env.create_database(&mut txn, None).map_err(err("lmdb create_database"))?;
        txn.commit().map_err(err("lmdb commit"))?;
        Ok(LmdbStore { env: Some(env), db, dir: dir.to_path_buf() })
    }

    fn env(&self) -> Result<&Env> {
        self.env.as_ref().ok_or_else(|| "lmdb: the environment is closed".to_string())
    }

    fn set_no_sync(&self, on: bool) -> Result<()> {
        let mode = if on { FlagSetMode::Enable } else { FlagSetMode::Disable };
        // SAFETY: NO_SYNC and NO_META_SYNC only weaken durability, which is why heed marks
        // them unsafe; no write transaction is open while they change.
        unsafe { self.env()?.set_flags(EnvFlags::NO_SYNC | EnvFlags::NO_META_SYNC, mode) }
            .map_err(err("lmdb set_flags"))
    }

    fn commit(&self, ops: &mut dyn Iterator<Item = Op>) -> Result<()> {
        let mut txn = self.env()?.write_txn().map_err(err("lmdb write_txn"))?;
        for op in ops {
            match op {
                Op::Set(record) => self.db.put(&mut txn, &record.key, &record.value).map_err(err("lmdb put"))?,
                Op::Remove(key) => {
                    self.db.delete(&mut txn, &key).map_err(err("lmdb delete"))?;
                }
            }
        }
        txn.commit().map_err(err("lmdb commit"))
    }
}

impl Store for LmdbStore {
    fn write(&mut self, ops: &mut dyn Iterator<Item = Op>, durable: bool) -> Result<()> {
        if durable {
            return self.commit(ops);
        }
        self.set_no_sync(true)?;
        let outcome = self.commit(ops);
        self.set_no_sync(false)?;
        outcome
    }

    fn len(&self) -> Result<u64> {
        let txn = self.env()?.read_txn().map_err(err("lmdb read_txn"))?;
        Ok(self.db.stat(&txn).map_err(err("lmdb stat"))?.entries as u64)
    }

    fn get_each(&self, keys: &mut dyn Iterator<Item = Key>, visit: &mut dyn FnMut(Option<&[u8]>)) -> Result<()> {
        let txn = self.env()?.read_txn().map_err(err("lmdb read_txn"))?;
        for key in keys {
            visit(self.db.get(&txn, &key).map_err(err("lmdb get"))?);
        }
        Ok(())
    }

    fn range_each(
        &self,
        starts: &mut dyn Iterator<Item = Key>,
        len: usize,
        visit: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<bool> {
        let txn = self.env()?.read_txn().map_err(err("lmdb read_txn"))?;
        for start in starts {
            let range = (Bound::Included(&start[..]), Bound::Unbounded);
            for item in self.db.range(&txn, &range).map_err(err("lmdb range"))?.take(len) {
                let (key, value) = item.map_err(err("lmdb range"))?;
                visit(key, value);
            }
        }
        Ok(true)
    }

    fn compact(&mut self) -> Result<bool> {
        let copy = self.dir.join("data2.mdb");
        let mut file = File::create_new(&copy).map_err(err("lmdb compact: create"))?;
        self.env()?.copy_to_file(&mut file, CompactionOption::Enabled).map_err(err("lmdb copy_to_file"))?;
        file.sync_all().map_err(err("lmdb compact: sync"))?;
        drop(file);
        if let Some(env) = self.env.take() {
            env.prepare_for_closing().wait();
        }
        std::fs::rename(&copy, self.dir.join("data.mdb")).map_err(err("lmdb compact: rename"))?;
        *self = LmdbStore::open(&self.dir)?;
        Ok(true)
    }

    fn close(self: Box<Self>) -> Result<()> {
        if let Some(env) = self.env {
            env.prepare_for_closing().wait();
        }
        Ok(())
    }
}
