//! Records routed to shards and packed into one byte string per shard: what a distributed
//! loader moves between its tasks (`kura.dask.to_kura`: a task per input partition splits it,
//! a task per shard writes it). One byte string a shard travels between processes as one
//! copy, where a list of a million `(key, value)` objects would be serialised one by one.
//!
//! The packing is `varint key length, key, varint value length, value`, record after record
//! (the varints of `encoding`); `PackedRows` reads it back, every length checked against the
//! bytes there are (a truncated or damaged string is BrokenData, never a record made up).

use crate::encoding::{put_varint, ByteReader};
use crate::error::Result;
use crate::shard_dbm::{naming, shard_of};

/// Records routed by `shard_of` into one packed byte string per shard, in the order given.
#[derive(Debug, Clone)]
pub struct ShardedRows {
    parts: Vec<Vec<u8>>,
    counts: Vec<u64>,
}

impl ShardedRows {
    /// Empty parts for a set of `num_shards` (checked as a set's count is).
    pub fn new(num_shards: usize) -> Result<ShardedRows> {
        naming::check_count(num_shards)?;
        Ok(ShardedRows { parts: vec![Vec::new(); num_shards], counts: vec![0; num_shards] })
    }

    /// Adds a record to the part of the shard its key routes to.
    pub fn push(&mut self, key: &[u8], value: &[u8]) {
        let shard = shard_of(key, self.parts.len());
        // shard_of is below the part count by construction (multiply-shift of a u64 by it).
        if let (Some(part), Some(count)) = (self.parts.get_mut(shard), self.counts.get_mut(shard)) {
            pack(part, key, value);
            *count += 1;
        }
    }

    /// The packed parts in shard order, each with its record count.
    pub fn into_parts(self) -> Vec<(Vec<u8>, u64)> {
        self.parts.into_iter().zip(self.counts).collect()
    }
}

/// Appends one record to a packed byte string.
pub fn pack(out: &mut Vec<u8>, key: &[u8], value: &[u8]) {
    put_varint(out, key.len() as u64);
    out.extend_from_slice(key);
    put_varint(out, value.len() as u64);
    out.extend_from_slice(value);
}

/// The records of a packed byte string, in order; a damaged string ends with a BrokenData error.
pub struct PackedRows<'a> {
    reader: ByteReader<'a>,
    failed: bool,
}

impl<'a> PackedRows<'a> {
    /// The records of `packed`.
    pub fn new(packed: &'a [u8]) -> PackedRows<'a> {
        PackedRows { reader: ByteReader::new(packed, "packed rows"), failed: false }
    }

    fn record(&mut self) -> Result<(&'a [u8], &'a [u8])> {
        let key_len = self.reader.length()?;
        let key = self.reader.take(key_len)?;
        let value_len = self.reader.length()?;
        let value = self.reader.take(value_len)?;
        Ok((key, value))
    }
}

impl<'a> Iterator for PackedRows<'a> {
    type Item = Result<(&'a [u8], &'a [u8])>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.reader.is_at_end() {
            return None;
        }
        let record = self.record();
        self.failed = record.is_err();
        Some(record)
    }
}

#[cfg(test)]
mod tests {
    #![expect(clippy::unwrap_used, reason = "a test fails loudly on the first broken expectation")]
    #![expect(clippy::indexing_slicing, reason = "the shards are indexed by construction")]
    use super::*;
    use crate::error::ErrorKind;
    use crate::split_mix::mix;

    #[test]
    fn rows_come_back_in_order_in_the_shard_they_route_to_and_damage_is_an_error() {
        let mut sharded = ShardedRows::new(3).unwrap();
        let mut model: Vec<Vec<(Vec<u8>, Vec<u8>)>> = vec![Vec::new(); 3];
        for i in 0..2000u64 {
            let key = format!("k{}", mix(i) % 700).into_bytes();
            let value = vec![b'v'; (mix(i ^ 7) % 300) as usize];
            model[shard_of(&key, 3)].push((key.clone(), value.clone()));
            sharded.push(&key, &value);
        }
        let parts = sharded.into_parts();
        for ((packed, count), expected) in parts.iter().zip(&model) {
            let rows: Vec<(Vec<u8>, Vec<u8>)> = PackedRows::new(packed)
                .map(|r| r.map(|(k, v)| (k.to_vec(), v.to_vec())))
                .collect::<Result<_>>()
                .unwrap();
            assert_eq!(&rows, expected);
            assert_eq!(*count, expected.len() as u64);
        }
        let (packed, _) = &parts[0];
        for cut in [1, packed.len() / 2, packed.len() - 1] {
            let results: Vec<_> = PackedRows::new(&packed[..cut]).collect();
            assert_eq!(results.last().and_then(|r| r.as_ref().err()).map(|e| e.kind()), Some(ErrorKind::BrokenData));
            assert_eq!(results.iter().filter(|r| r.is_err()).count(), 1, "the error ends the rows");
        }
        assert!(ShardedRows::new(0).is_err());
    }
}
