//! `zstd` and `zstd-dict`: one zstd frame per value, the latter made with a dictionary
//! trained on the database's own records (see `dictionary.rs`).

use super::algorithm::{corrupt, Algorithm};
use super::pool::Pool;
use super::{CodecKind, Effort};
use crate::error::{Error, Result};

/// The levels of one zstd codec, by `Effort`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Levels {
    pub dense: i32,
    pub quick: i32,
}

/// `zstd`: level 3, zstd's own default, for every write. Without a dictionary, a small frame
/// spends most of its time building its entropy tables, which lower levels build too: level
/// 1 saves about 10% on a 555-byte record, for larger frames, so there is one level.
pub const ZSTD_LEVELS: Levels = Levels { dense: 3, quick: 3 };
/// `zstd-dict`: level 12 when records are written once at import or rebuild (frames about 8%
/// smaller than level 3's); level 3 for a single write, which it makes about 9 times faster
/// on the dictionary data set (see `effort.rs`).
pub const ZSTD_DICT_LEVELS: Levels = Levels { dense: 12, quick: 3 };

type Compressor = zstd::bulk::Compressor<'static>;

pub struct Zstd {
    kind: CodecKind,
    levels: Levels,
    dictionary: Vec<u8>,
    /// Contexts of the dense level, and of the quick level when it differs.
    dense_compressors: Pool<Compressor>,
    quick_compressors: Pool<Compressor>,
    decompressors: Pool<zstd::bulk::Decompressor<'static>>,
}

impl Zstd {
    /// A zstd codec at `levels` with `dictionary` (empty: none). Loading the dictionary once
    /// here turns a bad stored dictionary into an error at open time rather than at the
    /// first record.
    pub fn new(kind: CodecKind, levels: Levels, dictionary: &[u8]) -> Result<Zstd> {
        let zstd = Zstd {
            kind,
            levels,
            dictionary: dictionary.to_vec(),
            dense_compressors: Pool::default(),
            quick_compressors: Pool::default(),
            decompressors: Pool::default(),
        };
        zstd.decompressors.with(|| zstd.new_decompressor(), |_| ())?;
        Ok(zstd)
    }

    /// The level and context pool of `effort`.
    fn level_and_pool(&self, effort: Effort) -> (i32, &Pool<Compressor>) {
        match effort {
            Effort::Quick if self.levels.quick != self.levels.dense => (self.levels.quick, &self.quick_compressors),
            Effort::Quick | Effort::Dense => (self.levels.dense, &self.dense_compressors),
        }
    }

    fn new_decompressor(&self) -> Result<zstd::bulk::Decompressor<'static>> {
        zstd::bulk::Decompressor::with_dictionary(&self.dictionary)
            .map_err(|e| Error::broken(format!("the stored zstd dictionary is unusable: {e}")))
    }
}

impl Algorithm for Zstd {
    fn compress(&self, raw: &[u8], effort: Effort, out: &mut Vec<u8>) -> Result<()> {
        let (level, pool) = self.level_and_pool(effort);
        let make = || {
            let mut compressor = Compressor::with_dictionary(level, &self.dictionary)
                .map_err(|e| Error::invalid(format!("zstd dictionary: {e}")))?;
            // The database stores its one dictionary itself, so a frame need not name it:
            // 4 bytes saved on every frame (decoding ignores the field either way).
            compressor
                .set_parameter(zstd::zstd_safe::CParameter::DictIdFlag(false))
                .map_err(|e| Error::invalid(format!("zstd: {e}")))?;
            Ok(compressor)
        };
        pool.with(make, |c| {
            // The frame goes straight after what `out` holds: no buffer of its own, whose
            // allocation would sit between a caller's growing buffers (CompactDbm's arenas).
            out.reserve(zstd::zstd_safe::compress_bound(raw.len()));
            let start = out.len() as u64;
            let mut cursor = std::io::Cursor::new(std::mem::take(out));
            cursor.set_position(start);
            let written = c.compress_to_buffer(raw, &mut cursor);
            *out = cursor.into_inner();
            written.map(|_| ()).map_err(|e| Error::invalid(format!("zstd: {e}")))
        })?
    }

    fn release_compressors(&self) {
        self.dense_compressors.clear();
        self.quick_compressors.clear();
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
    fn zstd_dict_quick_frames_differ_from_dense_ones_and_both_decode() {
        let samples: Vec<Vec<u8>> = (0..4000u32)
            .map(|i| {
                format!(
                    "{{\"word\":\"w{i}\",\"gloss\":\"a thing numbered {} of set {}\",\"n\":{}}}",
                    i * 7919 % 1000,
                    i % 13,
                    i % 7
                )
                .repeat(1 + (i % 5) as usize)
                .into_bytes()
            })
            .collect();
        let dictionary = train_dictionary(&samples, 8192).unwrap();
        let zstd = Zstd::new(CodecKind::ZstdDict, ZSTD_DICT_LEVELS, &dictionary).unwrap();
        let mut differing = 0;
        for raw in samples.iter().step_by(7) {
            let (mut dense, mut quick) = (Vec::new(), Vec::new());
            zstd.compress(raw, Effort::Dense, &mut dense).unwrap();
            zstd.compress(raw, Effort::Quick, &mut quick).unwrap();
            differing += usize::from(dense != quick);
            for frame in [&dense, &quick] {
                let mut out = Vec::with_capacity(raw.len());
                zstd.decompress(frame, raw.len(), &mut out).unwrap();
                assert_eq!(&out, raw);
            }
        }
        assert!(differing > 0, "the quick effort used the dense level");
        // Which is smaller depends on the data (on this synthetic text level 3 wins; on the
        // dictionary data set level 12 makes frames 8% smaller): only the levels are asserted.
        // Plain zstd has one level: both efforts make the same frame.
        let plain = Zstd::new(CodecKind::Zstd, ZSTD_LEVELS, &[]).unwrap();
        let (mut dense, mut quick) = (Vec::new(), Vec::new());
        plain.compress(&samples.concat(), Effort::Dense, &mut dense).unwrap();
        plain.compress(&samples.concat(), Effort::Quick, &mut quick).unwrap();
        assert_eq!(dense, quick);
    }

    #[test]
    fn zstd_dict_frames_decode_with_or_without_the_dictionary_id() {
        let samples: Vec<Vec<u8>> = (0..4000u32)
            .map(|i| format!("word{i} noun: a thing numbered {} of the set {}", i * 7919 % 1000, i % 13).into_bytes())
            .collect();
        let dictionary = train_dictionary(&samples, 4096).unwrap();
        assert!(!dictionary.is_empty());
        let zstd = Zstd::new(CodecKind::ZstdDict, ZSTD_DICT_LEVELS, &dictionary).unwrap();
        let mut with_id = zstd::bulk::Compressor::with_dictionary(ZSTD_DICT_LEVELS.dense, &dictionary).unwrap();
        for raw in samples.iter().step_by(97) {
            let mut ours = Vec::new();
            zstd.compress(raw, Effort::Dense, &mut ours).unwrap();
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
