//! The raw form of one bucket: its records end to end, sorted by key, each as
//! `varint(key_len) varint(value_len) key value` (docs/compact.md).
//!
//! Sorted rather than hashed inside the bucket, because: a bucket is small (tens of records)
//! and is scanned after being decoded whole, so a hash index would cost bytes for no fewer
//! comparisons; a miss stops at the first larger key; a batch merges into a bucket in one
//! linear pass; neighbouring keys share prefixes, which the codecs compress better; and the
//! same records always encode to the same bytes. Every read checks each length against the
//! bytes that remain, so a damaged bucket is a BrokenData error, never a panic.

use std::cmp::Ordering;

use crate::encoding::{put_varint, ByteReader};
use crate::error::{Error, Result};

fn broken(what: &str) -> Error {
    Error::broken(format!("compact bucket: {what}"))
}

/// Walks the records of a raw bucket, checking every length.
pub struct BucketRecords<'a> {
    reader: ByteReader<'a>,
}

impl<'a> BucketRecords<'a> {
    pub fn new(raw: &'a [u8]) -> BucketRecords<'a> {
        BucketRecords { reader: ByteReader::new(raw, "compact bucket") }
    }

    /// The next record, or None at the end of the bucket.
    pub fn next_record(&mut self) -> Result<Option<(&'a [u8], &'a [u8])>> {
        if self.reader.is_at_end() {
            return Ok(None);
        }
        let key_len = self.reader.length()?;
        let value_len = self.reader.length()?;
        let key = self.reader.take(key_len)?;
        let value = self.reader.take(value_len)?;
        Ok(Some((key, value)))
    }
}

/// The value of `key` in a raw bucket (sorted): stops at the first larger key.
pub fn find<'a>(raw: &'a [u8], key: &[u8]) -> Result<Option<&'a [u8]>> {
    let mut records = BucketRecords::new(raw);
    while let Some((stored, value)) = records.next_record()? {
        match stored.cmp(key) {
            Ordering::Less => {}
            Ordering::Equal => return Ok(Some(value)),
            Ordering::Greater => return Ok(None),
        }
    }
    Ok(None)
}

/// Appends one record in the bucket format.
pub fn put_record(out: &mut Vec<u8>, key: &[u8], value: &[u8]) {
    put_varint(out, key.len() as u64);
    put_varint(out, value.len() as u64);
    out.extend_from_slice(key);
    out.extend_from_slice(value);
}

/// One change to a bucket: set the key to the value, or remove it (None).
pub type Edit<'a> = (&'a [u8], Option<&'a [u8]>);

/// Writes into `out` (cleared first) the bucket `raw` with `edits` applied. `edits` must be
/// sorted by key with each key at most once. Returns the change in record count.
pub fn merge(raw: &[u8], edits: &[Edit<'_>], out: &mut Vec<u8>) -> Result<i64> {
    out.clear();
    out.reserve(raw.len() + edits.iter().map(|(k, v)| k.len() + v.map_or(0, <[u8]>::len) + 4).sum::<usize>());
    let mut delta = 0i64;
    let mut records = BucketRecords::new(raw);
    let mut current = records.next_record()?;
    let mut edits = edits.iter().peekable();
    loop {
        match (current, edits.peek()) {
            (None, None) => return Ok(delta),
            (Some((key, value)), None) => {
                put_record(out, key, value);
                current = records.next_record()?;
            }
            (Some((key, value)), Some((edit_key, _))) if key < *edit_key => {
                put_record(out, key, value);
                current = records.next_record()?;
            }
            (current_record, Some(&&(edit_key, edit_value))) => {
                let replaces = current_record.is_some_and(|(key, _)| key == edit_key);
                if replaces {
                    current = records.next_record()?;
                    delta -= 1;
                }
                if let Some(value) = edit_value {
                    put_record(out, edit_key, value);
                    delta += 1;
                }
                edits.next();
            }
        }
    }
}

/// Checks a whole raw bucket: every length in bounds and keys strictly increasing; calls
/// `visit` on each key. Returns the number of records.
pub fn validate(raw: &[u8], mut visit: impl FnMut(&[u8]) -> Result<()>) -> Result<u64> {
    let mut records = BucketRecords::new(raw);
    let mut previous: Option<&[u8]> = None;
    let mut count = 0u64;
    while let Some((key, _)) = records.next_record()? {
        if previous.is_some_and(|p| p >= key) {
            return Err(broken("keys out of order"));
        }
        visit(key)?;
        previous = Some(key);
        count += 1;
    }
    Ok(count)
}

#[cfg(test)]
mod tests {
    #![expect(clippy::unwrap_used, reason = "a test fails loudly on the first broken expectation")]
    use super::*;
    use std::collections::BTreeMap;

    fn encode(map: &BTreeMap<Vec<u8>, Vec<u8>>) -> Vec<u8> {
        let mut out = Vec::new();
        for (k, v) in map {
            put_record(&mut out, k, v);
        }
        out
    }

    #[test]
    fn merging_random_edits_matches_a_map() {
        let mut rng = crate::split_mix::SplitMix64::new(7);
        let mut model = BTreeMap::new();
        let mut raw = Vec::new();
        for _ in 0..300 {
            let mut edits = BTreeMap::new();
            for _ in 0..rng.below(5) {
                let key = vec![rng.below(20) as u8; rng.below(3) as usize];
                let value = (rng.below(3) > 0).then(|| vec![rng.below(255) as u8; rng.below(6) as usize]);
                edits.insert(key, value);
            }
            let list: Vec<Edit<'_>> = edits.iter().map(|(k, v)| (k.as_slice(), v.as_deref())).collect();
            let mut out = Vec::new();
            let before = model.len() as i64;
            let delta = merge(&raw, &list, &mut out).unwrap();
            for (k, v) in &edits {
                match v {
                    Some(v) => model.insert(k.clone(), v.clone()),
                    None => model.remove(k),
                };
            }
            assert_eq!(delta, model.len() as i64 - before);
            assert_eq!(out, encode(&model));
            assert_eq!(validate(&out, |_| Ok(())).unwrap(), model.len() as u64);
            for k in edits.keys() {
                assert_eq!(find(&out, k).unwrap(), model.get(k).map(Vec::as_slice));
            }
            raw = out;
        }
    }

    #[test]
    fn every_truncation_is_an_error_or_a_shorter_valid_bucket() {
        let mut map = BTreeMap::new();
        for i in 0..10u8 {
            map.insert(vec![i; 3], vec![i; 200]);
        }
        let raw = encode(&map);
        for len in 0..raw.len() {
            if let Ok(count) = validate(raw.get(..len).unwrap(), |_| Ok(())) {
                assert!(count < 10);
            }
        }
    }
}
