//! `zstd` and `zstd-dict`: one zstd frame per value, the latter made with a dictionary
//! trained on the database's own records (see `dictionary.rs`).

use super::algorithm::{corrupt, Algorithm};
use super::pool::Pool;
use super::CodecKind;
use crate::error::{Error, Result};

/// zstd level for per-record compression: level 3 is zstd's own default and balances build
/// time against size.
pub const ZSTD_LEVEL: i32 = 3;
/// The dictionary codec uses a higher level because its records are small and written once
/// at import or rebuild.
pub const ZSTD_DICT_LEVEL: i32 = 12;

pub struct Zstd {
    kind: CodecKind,
    level: i32,
    dictionary: Vec<u8>,
    compressors: Pool<zstd::bulk::Compressor<'static>>,
    decompressors: Pool<zstd::bulk::Decompressor<'static>>,
}

impl Zstd {
    /// A zstd codec at `level` with `dictionary` (empty: none). Loading the dictionary once
    /// here turns a bad stored dictionary into an error at open time rather than at the
    /// first record.
    pub fn new(kind: CodecKind, level: i32, dictionary: &[u8]) -> Result<Zstd> {
        let zstd = Zstd {
            kind,
            level,
            dictionary: dictionary.to_vec(),
            compressors: Pool::default(),
            decompressors: Pool::default(),
        };
        zstd.decompressors.with(|| zstd.new_decompressor(), |_| ())?;
        Ok(zstd)
    }

    fn new_decompressor(&self) -> Result<zstd::bulk::Decompressor<'static>> {
        zstd::bulk::Decompressor::with_dictionary(&self.dictionary)
            .map_err(|e| Error::broken(format!("the stored zstd dictionary is unusable: {e}")))
    }
}

impl Algorithm for Zstd {
    fn compress(&self, raw: &[u8], out: &mut Vec<u8>) -> Result<()> {
        let make = || {
            zstd::bulk::Compressor::with_dictionary(self.level, &self.dictionary)
                .map_err(|e| Error::invalid(format!("zstd dictionary: {e}")))
        };
        self.compressors.with(make, |c| {
            let frame = c.compress(raw).map_err(|e| Error::invalid(format!("zstd: {e}")))?;
            out.extend_from_slice(&frame);
            Ok(())
        })?
    }

    fn decompress(&self, body: &[u8], _raw_len: usize, out: &mut Vec<u8>) -> Result<()> {
        self.decompressors.with(
            || self.new_decompressor(),
            |d| d.decompress_to_buffer(body, out).map(|_| ()).map_err(|e| corrupt(self.kind, e)),
        )?
    }
}
