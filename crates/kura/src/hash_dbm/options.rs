//! The tuning parameters of HashDbm, parsed from `name=value` pairs.

use super::header::{RecordCheck, UpdateMode, BUCKET_WIDTH, HEADER_REGION, MAX_ADDRESSABLE};
use crate::codec::{CodecKind, DEFAULT_DICTIONARY_SIZE};
use crate::dbm::Params;
use crate::error::{Error, Result};

/// Buckets of a new database unless told otherwise: enough for a million records at a load
/// factor of one, as Tkrzw's default; 5 MiB of bucket array, allocated sparsely.
pub const DEFAULT_NUM_BUCKETS: u64 = 1 << 20;
/// The default and largest maximum file size: what a 5-byte offset addresses (1 TiB).
pub const DEFAULT_MAX_FILE_SIZE: u64 = MAX_ADDRESSABLE;

pub(crate) const PARAMS: &[&str] =
    &["record_comp", "num_buckets", "update_mode", "max_file_size", "dict_size", "checkpoint_bytes", "record_check"];

/// Parameters as given; `None` means "the default" at creation and "keep" at rebuild.
#[derive(Debug, Clone, Default)]
pub struct HashOptions {
    /// `record_comp`: the codec of a new or rebuilt file.
    pub record_comp: Option<CodecKind>,
    /// `num_buckets`: the bucket count of a new or rebuilt file.
    pub num_buckets: Option<u64>,
    /// `update_mode`: in place or appending.
    pub update_mode: Option<UpdateMode>,
    /// `max_file_size`: the address space reserved for the mapping.
    pub max_file_size: Option<u64>,
    /// `dict_size`: bytes of the zstd dictionary a zstd-dict rebuild trains.
    pub dict_size: Option<usize>,
    /// `checkpoint_bytes`: journal bytes that trigger a checkpoint (journaled.rs).
    pub checkpoint_bytes: Option<u64>,
    /// `record_check`: `wide` (37 check bits in every record) or `narrow` (13, format
    /// version 4's layout) for a new or rebuilt file.
    pub record_check: Option<RecordCheck>,
}

impl HashOptions {
    /// Parses and checks HashDbm's parameters; an unknown name is InvalidArgument.
    pub fn from_params(params: &Params) -> Result<HashOptions> {
        params.check_known("HashDbm", PARAMS)?;
        let num_buckets = params.get_u64("num_buckets")?;
        if let Some(n) = num_buckets {
            if n == 0 || n > (MAX_ADDRESSABLE - HEADER_REGION) / BUCKET_WIDTH / 2 {
                return Err(Error::invalid(format!("num_buckets {n} is out of range")));
            }
        }
        let max_file_size = params.get_u64("max_file_size")?;
        if let Some(m) = max_file_size {
            if !(4096..=MAX_ADDRESSABLE).contains(&m) {
                return Err(Error::invalid(format!(
                    "max_file_size {m} is out of range (4 KiB to {MAX_ADDRESSABLE} bytes)"
                )));
            }
        }
        let dict_size = params.get_u64("dict_size")?.map(|d| d as usize);
        if let Some(d) = dict_size {
            if !(256..=(16 << 20)).contains(&d) {
                return Err(Error::invalid(format!("dict_size {d} is out of range (256 bytes to 16 MiB)")));
            }
        }
        Ok(HashOptions {
            record_comp: params.get("record_comp").map(CodecKind::from_name).transpose()?,
            num_buckets,
            update_mode: params.get("update_mode").map(UpdateMode::from_name).transpose()?,
            max_file_size,
            dict_size,
            checkpoint_bytes: params.get_u64("checkpoint_bytes")?,
            record_check: params.get("record_check").map(RecordCheck::from_name).transpose()?,
        })
    }

    /// The journal size that triggers a checkpoint, given or default.
    pub fn checkpoint_bytes(&self) -> u64 {
        self.checkpoint_bytes.unwrap_or(crate::journal::DEFAULT_CHECKPOINT_BYTES)
    }

    /// The dictionary size to train, given or default.
    pub fn dict_size(&self) -> usize {
        self.dict_size.unwrap_or(DEFAULT_DICTIONARY_SIZE)
    }
}
