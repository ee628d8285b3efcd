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
            let mut compressor = zstd::bulk::Compressor::with_dictionary(self.level, &self.dictionary)
                .map_err(|e| Error::invalid(format!("zstd dictionary: {e}")))?;
            // The database stores its one dictionary itself, so a frame need not name it:
            // 4 bytes saved on every frame (decoding ignores the field either way).
            compressor
                .set_parameter(zstd::zstd_safe::CParameter::DictIdFlag(false))
                .map_err(|e| Error::invalid(format!("zstd: {e}")))?;
            Ok(compressor)
        };
        self.compressors.with(make, |c| {
            let frame = c.compress(raw).map_err(|e| Error::invalid(format!("zstd: {e}")))?;
            out.extend_from_slice(&frame);
            Ok(())
        })?
    }

    fn release_compressors(&self) {
        self.compressors.clear();
    }

    fn decompress(&self, body: &[u8], _raw_len: usize, out: &mut Vec<u8>) -> Result<()> {
        self.decompressors.with(
            || self.new_decompressor(),
            |d| d.decompress_to_buffer(body, out).map(|_| ()).map_err(|e| corrupt(self.kind, e)),
        )?
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests fail loudly")]
    use super::*;
    use crate::codec::dictionary::train_dictionary;

    #[test]
    fn zstd_dict_frames_decode_with_or_without_the_dictionary_id() {
        let samples: Vec<Vec<u8>> = (0..4000u32)
            .map(|i| format!("word{i} noun: a thing numbered {} of the set {}", i * 7919 % 1000, i % 13).into_bytes())
            .collect();
        let dictionary = train_dictionary(&samples, 4096).unwrap();
        assert!(!dictionary.is_empty());
        let zstd = Zstd::new(CodecKind::ZstdDict, ZSTD_DICT_LEVEL, &dictionary).unwrap();
        let mut with_id = zstd::bulk::Compressor::with_dictionary(ZSTD_DICT_LEVEL, &dictionary).unwrap();
        for raw in samples.iter().step_by(97) {
            let mut ours = Vec::new();
            zstd.compress(raw, &mut ours).unwrap();
            let named = with_id.compress(raw).unwrap();
            // Files written before frames dropped the id hold `named` frames: both decode.
            assert_eq!(ours.len() + 4, named.len(), "the 4-byte dictionary id is left out");
            for frame in [&ours, &named] {
                let mut out = Vec::with_capacity(raw.len());
                zstd.decompress(frame, raw.len(), &mut out).unwrap();
                assert_eq!(&out, raw);
            }
        }
    }
}
