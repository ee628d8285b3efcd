//! CompactDbm's parameters, their defaults and how the bucket count follows from them.
//!
//! Where the defaults sit and why is in docs/compact.md; the benchmark (`bench/compact.py`)
//! measures the trade-off they pick a point on.

use super::training::{AutoTraining, AUTO_TRAIN};
use crate::codec::CodecKind;
use crate::dbm::Params;
use crate::error::{Error, Result};

pub(crate) const PARAMS: &[&str] = &[
    "bucket_comp",
    "num_buckets",
    "expected_records",
    "bucket_records",
    "cache_bytes",
    "dict_size",
    "train_records",
    "train_bytes",
];

/// Lock groups: a bucket's group is picked by the high half of the key hash, so a group's
/// records stay in it whatever the bucket count, and a rebuild works group by group.
pub const NUM_GROUPS: usize = 256;
/// The record count the bucket array is sized for when the caller does not say.
pub const DEFAULT_EXPECTED_RECORDS: u64 = 1 << 20;
/// Records a bucket holds on average at the expected count: a get decodes a whole bucket and
/// a set re-encodes one, while fewer records a bucket compress worse and cost more table. With
/// a dictionary (the default codec) small buckets lose little density: 4 (docs/compact.md,
/// "Parameters and where the defaults sit").
pub const DEFAULT_BUCKET_RECORDS: u64 = 4;
/// zstd-dict: zstd with a dictionary trained on the table's own records once it has enough
/// (`training.rs`), which carries the entropy tables a small `zstd` frame builds on every
/// decode: as dense as `zstd` with 16 records a bucket, at several times its gets.
pub const DEFAULT_CODEC: CodecKind = CodecKind::ZstdDict;
/// The dictionary's size: 1 MiB held 152.7 B a record of the dictionary data set where 256 KiB
/// held 158.0, at the same or better gets (docs/compact.md). A dictionary is at most a tenth of
/// the records it learns from, so a table trained small gets a smaller one.
pub const DEFAULT_DICTIONARY_SIZE: usize = 1 << 20;
/// The decoded-bucket cache: small, for the hot buckets of skewed reads.
pub const DEFAULT_CACHE_BYTES: u64 = 4 << 20;
/// The most buckets a database may have: a 4 GiB bucket table, which also bounds what a
/// snapshot's layout record can make a load allocate.
pub const MAX_BUCKETS: u64 = 1 << 28;
/// The longest key: every get of a bucket decodes it, so huge records slow their neighbours.
pub const MAX_KEY_LEN: usize = 1 << 20;
/// The longest value.
pub const MAX_VALUE_LEN: usize = 1 << 26;

/// Parameters as given; `None` means "the default" at open and "keep" at rebuild.
#[derive(Debug, Clone)]
pub struct Options {
    pub codec: Option<CodecKind>,
    num_buckets: Option<u64>,
    expected_records: Option<u64>,
    bucket_records: Option<u64>,
    pub cache_bytes: Option<u64>,
    pub dict_size: Option<usize>,
    /// When single writes train the dictionary (`training.rs`): `train_records` and
    /// `train_bytes` over `AUTO_TRAIN`.
    pub auto_training: AutoTraining,
}

impl Options {
    pub fn parse(params: &Params) -> Result<Options> {
        params.check_known("CompactDbm", PARAMS)?;
        let codec = params.get("bucket_comp").map(CodecKind::from_name).transpose()?;
        let num_buckets = params.get_u64("num_buckets")?;
        if num_buckets.is_some_and(|n| n > MAX_BUCKETS) {
            return Err(Error::invalid(format!("num_buckets: at most {MAX_BUCKETS}")));
        }
        let bucket_records = params.get_u64("bucket_records")?;
        if bucket_records == Some(0) {
            return Err(Error::invalid("bucket_records must be at least 1"));
        }
        let dict_size = params
            .get_u64("dict_size")?
            .map(|n| usize::try_from(n).map_err(|_| Error::invalid("dict_size: too large")))
            .transpose()?;
        let auto_training = AutoTraining {
            records: params.get_u64("train_records")?.unwrap_or(AUTO_TRAIN.records),
            raw_bytes: params.get_u64("train_bytes")?.unwrap_or(AUTO_TRAIN.raw_bytes),
            ..AUTO_TRAIN
        };
        Ok(Options {
            codec,
            num_buckets,
            expected_records: params.get_u64("expected_records")?,
            bucket_records,
            cache_bytes: params.get_u64("cache_bytes")?,
            dict_size,
            auto_training,
        })
    }

    /// Buckets per group from `num_buckets`, or from `expected_records` (else `records`) and
    /// `bucket_records` (else the default) when either is given; None when none is.
    pub fn buckets_per_group(&self, records: u64) -> Option<usize> {
        if let Some(n) = self.num_buckets {
            return Some(buckets_per_group(n));
        }
        if self.expected_records.is_none() && self.bucket_records.is_none() {
            return None;
        }
        let expected = self.expected_records.unwrap_or(records);
        let per_bucket = self.bucket_records.unwrap_or(DEFAULT_BUCKET_RECORDS);
        Some(buckets_per_group(expected.div_ceil(per_bucket).min(MAX_BUCKETS)))
    }
}

/// Buckets per group for a bucket count: at least one bucket a group.
pub fn buckets_per_group(num_buckets: u64) -> usize {
    usize::try_from(num_buckets.div_ceil(NUM_GROUPS as u64).max(1)).unwrap_or(usize::MAX)
}

/// Buckets per group sized for `records` records at the default bucket size.
pub fn buckets_per_group_for(records: u64) -> usize {
    buckets_per_group(records.div_ceil(DEFAULT_BUCKET_RECORDS))
}

/// The dictionary size to train for zstd-dict.
pub fn dictionary_size(options: &Options) -> usize {
    options.dict_size.unwrap_or(DEFAULT_DICTIONARY_SIZE)
}

/// A clear Limit error for a key or value over the limits.
pub fn check_sizes(key: &[u8], value: Option<&[u8]>) -> Result<()> {
    if key.len() > MAX_KEY_LEN {
        return Err(Error::new(
            crate::error::ErrorKind::Limit,
            format!("CompactDbm: a key of {} bytes exceeds the limit of {MAX_KEY_LEN}", key.len()),
        ));
    }
    if let Some(value) = value.filter(|v| v.len() > MAX_VALUE_LEN) {
        return Err(Error::new(
            crate::error::ErrorKind::Limit,
            format!("CompactDbm: a value of {} bytes exceeds the limit of {MAX_VALUE_LEN}", value.len()),
        ));
    }
    Ok(())
}
