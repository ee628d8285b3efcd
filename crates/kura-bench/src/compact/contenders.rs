//! The maps the density benchmark compares: CompactDbm (by codec and bucket size), TinyDbm
//! and a plain `HashMap<Vec<u8>, Vec<u8>>`, behind one small interface.

use std::collections::HashMap;

use kura::{CompactDbm, Dbm, Params, TinyDbm, WriteBatch};

use super::dataset::Records;

pub trait Table: Sync {
    /// Work done before the memory baseline is taken: CompactDbm's bulk batch is built here,
    /// so that its copy of the records is not counted as the map's memory.
    fn prepare(&mut self, _records: &Records) {}
    /// Stores every record (timed).
    fn load(&mut self, records: &Records) -> kura::Result<()>;
    /// Drops what `prepare` built (after the memory is measured).
    fn release(&mut self) {}
    fn get(&self, key: &[u8]) -> bool;
    /// One set from one thread.
    fn set(&mut self, key: &[u8], value: &[u8]) -> kura::Result<()>;
    /// Sets from several threads at once, when the map allows it.
    fn shared_set(&self, _key: &[u8], _value: &[u8]) -> Option<kura::Result<()>> {
        None
    }
    /// The memory the map says it holds, when it says.
    fn memory_bytes(&self) -> Option<u64> {
        None
    }
}

#[derive(Default)]
pub struct PlainHashMap {
    map: HashMap<Vec<u8>, Vec<u8>>,
}

impl Table for PlainHashMap {
    fn load(&mut self, records: &Records) -> kura::Result<()> {
        for (key, value) in records {
            self.map.insert(key.clone(), value.clone());
        }
        Ok(())
    }
    fn get(&self, key: &[u8]) -> bool {
        self.map.contains_key(key)
    }
    fn set(&mut self, key: &[u8], value: &[u8]) -> kura::Result<()> {
        self.map.insert(key.to_vec(), value.to_vec());
        Ok(())
    }
}

/// Any Kura engine, loaded record by record or, with a batch, in one bulk batch.
pub struct Engine<D: Dbm> {
    pub dbm: D,
    pub bulk: bool,
    batch: Option<WriteBatch>,
}

impl<D: Dbm> Engine<D> {
    pub fn new(dbm: D, bulk: bool) -> Engine<D> {
        Engine { dbm, bulk, batch: None }
    }
}

pub fn tiny(records: u64) -> kura::Result<Engine<TinyDbm>> {
    // Cells for every record from the start, as Tkrzw's TinyDBM is given its bucket count.
    let params = Params::new().with("num_buckets", records.max(1024) * 4 / 3);
    Ok(Engine::new(TinyDbm::new(&params)?, false))
}

pub fn compact(records: u64, codec: &str, bucket_records: u64) -> kura::Result<Engine<CompactDbm>> {
    let params = Params::new()
        .with("bucket_comp", codec)
        .with("expected_records", records.max(1))
        .with("bucket_records", bucket_records);
    Ok(Engine::new(CompactDbm::new(&params)?, true))
}

impl<D: Dbm> Table for Engine<D> {
    fn prepare(&mut self, records: &Records) {
        if self.bulk {
            let mut batch = WriteBatch::new();
            for (key, value) in records {
                batch.set(key, value);
            }
            self.batch = Some(batch);
        }
    }
    fn load(&mut self, records: &Records) -> kura::Result<()> {
        match &self.batch {
            Some(batch) => self.dbm.write_batch(batch),
            None => records.iter().try_for_each(|(key, value)| self.dbm.set(key, value, true)),
        }
    }
    fn release(&mut self) {
        self.batch = None;
    }
    fn get(&self, key: &[u8]) -> bool {
        let mut found = false;
        let _ = self.dbm.get_with(key, &mut |value| found = value.is_some());
        found
    }
    fn set(&mut self, key: &[u8], value: &[u8]) -> kura::Result<()> {
        self.dbm.set(key, value, true)
    }
    fn shared_set(&self, key: &[u8], value: &[u8]) -> Option<kura::Result<()>> {
        Some(self.dbm.set(key, value, true))
    }
    fn memory_bytes(&self) -> Option<u64> {
        let properties = self.dbm.inspect().ok()?;
        let find = |name: &str| properties.iter().find(|(n, _)| n == name).and_then(|(_, v)| v.parse().ok());
        find("memory_bytes").or_else(|| find("file_size"))
    }
}
