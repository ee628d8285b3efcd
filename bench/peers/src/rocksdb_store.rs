//! RocksDB: Debian's librocksdb (7.8), linked through the `rocksdb` crate, not compiled from
//! source. A commit is one `WriteBatch` written with `WriteOptions::set_sync(true)` when
//! durable (the WAL is synced) and `set_sync(false)` when not (the WAL is written, not
//! synced). Tables as in redb's benchmark: an LRU block cache of the run's cache size, a
//! 10-bit Bloom filter, index and filter blocks in the cache; otherwise RocksDB's defaults,
//! but for the memtable's size when the run gives one (under a memory limit: RocksDB's memory
//! tuning guide names `write_buffer_size` and the block cache as the two to size).
//! Point reads are `get_pinned`; range reads seek one iterator (one implicit snapshot for the
//! phase). Compaction is `compact_range` over everything. Closing flushes the memtable, so
//! that the size measured and the reads after a reopen are the tables'.

use std::path::Path;

use rocksdb::{BlockBasedOptions, Cache, Options, WriteBatch, WriteOptions, DB};

use crate::records::{Key, Op};
use crate::store::{err, Result, Store};

pub struct RocksdbStore {
    db: DB,
    durable: WriteOptions,
    not_durable: WriteOptions,
}

impl RocksdbStore {
    /// `memtable_bytes`: 0 keeps RocksDB's default `write_buffer_size` (64 MiB).
    pub fn open(dir: &Path, cache_bytes: u64, memtable_bytes: u64) -> Result<RocksdbStore> {
        let cache = Cache::new_lru_cache(cache_bytes as usize).map_err(err("rocksdb cache"))?;
        let mut table = BlockBasedOptions::default();
        table.set_block_cache(&cache);
        table.set_bloom_filter(10.0, false);
        table.set_cache_index_and_filter_blocks(true);
        let mut options = Options::default();
        options.set_block_based_table_factory(&table);
        options.create_if_missing(true);
        if memtable_bytes > 0 {
            options.set_write_buffer_size(memtable_bytes as usize);
        }
        options.increase_parallelism(std::thread::available_parallelism().map_or(1, |n| n.get()) as i32);
        let db = DB::open(&options, dir).map_err(err("rocksdb open"))?;
        let mut durable = WriteOptions::default();
        durable.set_sync(true);
        let mut not_durable = WriteOptions::default();
        not_durable.set_sync(false);
        Ok(RocksdbStore { db, durable, not_durable })
    }
}

impl Store for RocksdbStore {
    fn write(&mut self, ops: &mut dyn Iterator<Item = Op>, durable: bool) -> Result<()> {
        let mut batch = WriteBatch::default();
        for op in ops {
            match op {
                Op::Set(record) => batch.put(record.key, record.value),
                Op::Remove(key) => batch.delete(key),
            }
        }
        let options = if durable { &self.durable } else { &self.not_durable };
        self.db.write_opt(batch, options).map_err(err("rocksdb write"))
    }

    fn len(&self) -> Result<u64> {
        // RocksDB keeps no exact count (`rocksdb.estimate-num-keys` is an estimate): iterate,
        // as redb's benchmark does.
        let mut iter = self.db.raw_iterator();
        iter.seek_to_first();
        let mut count = 0;
        while iter.valid() {
            count += 1;
            iter.next();
        }
        iter.status().map_err(err("rocksdb iterate"))?;
        Ok(count)
    }

    fn get_each(&self, keys: &mut dyn Iterator<Item = Key>, visit: &mut dyn FnMut(Option<&[u8]>)) -> Result<()> {
        for key in keys {
            let value = self.db.get_pinned(key).map_err(err("rocksdb get"))?;
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
        let mut iter = self.db.raw_iterator();
        for start in starts {
            iter.seek(start);
            for taken in 0..len {
                if taken > 0 {
                    iter.next();
                }
                let (Some(key), Some(value)) = (iter.key(), iter.value()) else {
                    break;
                };
                visit(key, value);
            }
            iter.status().map_err(err("rocksdb range"))?;
        }
        Ok(true)
    }

    fn compact(&mut self) -> Result<bool> {
        self.db.compact_range::<&[u8], &[u8]>(None, None);
        Ok(true)
    }

    fn close(self: Box<Self>) -> Result<()> {
        self.db.flush().map_err(err("rocksdb flush"))?;
        drop(self.db);
        Ok(())
    }
}
