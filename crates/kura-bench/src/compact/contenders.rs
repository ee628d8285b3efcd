//! The maps the density benchmark compares: CompactDbm (by codec and bucket size), TinyDbm
//! and a plain `HashMap<Vec<u8>, Vec<u8>>`, behind one small interface.

use std::collections::HashMap;

use kura::{CompactDbm, Dbm, Params, TinyDbm, WriteBatch};

use super::dataset::Records;

pub trait Table: Sync {
    /// Stores every record (timed): from `batch` in one bulk batch where the map takes one,
    /// else record by record.
    fn load(&mut self, records: &Records, batch: Option<&WriteBatch>) -> kura::Result<()>;
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
    fn load(&mut self, records: &Records, _batch: Option<&WriteBatch>) -> kura::Result<()> {
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

/// Any Kura engine.
pub struct Engine<D: Dbm> {
    pub dbm: D,
}

/// The bulk batch of every record, built before the memory baseline so that its copy of the
/// records is not counted as the map's.
pub fn bulk_batch(records: &Records) -> WriteBatch {
    let mut batch = WriteBatch::new();
    for (key, value) in records {
        batch.set(key, value);
    }
    batch
}

pub fn tiny(records: u64) -> kura::Result<Engine<TinyDbm>> {
    // Cells for every record from the start, as Tkrzw's TinyDBM is given its bucket count.
    let params = Params::new().with("num_buckets", records.max(1024) * 4 / 3);
    Ok(Engine { dbm: TinyDbm::new(&params)? })
}

/// What a CompactDbm contender is made with.
pub struct CompactSettings<'a> {
    pub codec: &'a str,
    pub bucket_records: u64,
    /// Any other parameters (`dict_size=65536,cache_bytes=0`), as given; they win over the
    /// ones above.
    pub extra: &'a str,
}

pub fn compact(records: u64, settings: &CompactSettings<'_>) -> kura::Result<Engine<CompactDbm>> {
    let base = Params::new()
        .with("bucket_comp", settings.codec)
        .with("expected_records", records.max(1))
        .with("bucket_records", settings.bucket_records);
    let params = Params::parse(settings.extra)?.or_defaults(&base);
    Ok(Engine { dbm: CompactDbm::new(&params)? })
}

impl<D: Dbm> Table for Engine<D> {
    fn load(&mut self, records: &Records, batch: Option<&WriteBatch>) -> kura::Result<()> {
        match batch {
            Some(batch) => self.dbm.write_batch(batch),
            None => records.iter().try_for_each(|(key, value)| self.dbm.set(key, value, true)),
        }
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
        let stats = self.dbm.inspect().ok()?;
        Some(stats.number("memory_bytes").unwrap_or(stats.file_size))
    }
}
