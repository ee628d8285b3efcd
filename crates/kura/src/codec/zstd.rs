//! `zstd` and `zstd-dict`: one zstd frame per value, the latter made with a dictionary
//! trained on the database's own records (see `dictionary.rs`).
//!
//! No frame names its dictionary (a database has one). A file's codec writes standard frames,
//! a memory codec (CompactDbm's) bare ones, without magic number and content size
//! (`residence.rs`). A file's codec reads standard frames only (a file never held others); a
//! memory codec reads a frame that starts with zstd's magic number as standard (snapshots
//! written before bare frames) and any other as bare. No bare frame starts with it: its first
//! byte would be a frame header descriptor (0x28) with the reserved bit (3) set.

use std::cell::RefCell;

use zstd::zstd_safe::{CParameter, DCtx, DDict, DParameter, FrameFormat};

use super::algorithm::{corrupt, Algorithm};
use super::pool::Pool;
use super::{CodecKind, Effort, Residence};
use crate::error::{Error, ErrorKind, Result};

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
/// `zstd-dict` in memory (CompactDbm): level 16 for bulk writes, where the density curve bends
/// (`residence.rs`).
pub const ZSTD_DICT_MEMORY_LEVELS: Levels = Levels { dense: 16, quick: 3 };

type Compressor = zstd::bulk::Compressor<'static>;

/// zstd's magic number as it starts a standard frame (little-endian 0xFD2FB528).
const STANDARD_FRAME_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];

/// A decompression context and the frame format it is set to read.
struct DecodingContext {
    context: DCtx<'static>,
    format: FrameFormat,
}

impl DecodingContext {
    fn new() -> Result<DecodingContext> {
        let context = DCtx::try_create()
            .ok_or_else(|| Error::new(ErrorKind::Limit, "zstd: no memory for a decompression context"))?;
        // A new context reads standard frames.
        Ok(DecodingContext { context, format: FrameFormat::One })
    }

    /// Sets the context to read `body` as a codec for `residence` reads it (see the file's
    /// header), when it is set to the other format.
    fn read_format_of(&mut self, body: &[u8], residence: Residence) -> Result<&mut DCtx<'static>> {
        let format = match residence {
            Residence::Memory if !body.starts_with(&STANDARD_FRAME_MAGIC) => FrameFormat::Magicless,
            Residence::Memory | Residence::File => FrameFormat::One,
        };
        if format != self.format {
            self.context.set_parameter(DParameter::Format(format)).map_err(|code| {
                Error::new(ErrorKind::Limit, format!("zstd: {}", zstd::zstd_safe::get_error_name(code)))
            })?;
            self.format = format;
        }
        Ok(&mut self.context)
    }
}

pub struct Zstd {
    kind: CodecKind,
    levels: Levels,
    residence: Residence,
    dictionary: Vec<u8>,
    /// Contexts of the dense level, and of the quick level when it differs.
    dense_compressors: Pool<Compressor>,
    quick_compressors: Pool<Compressor>,
    /// The dictionary digested for decoding, shared by every thread (None: no dictionary).
    decoding_dictionary: Option<DDict<'static>>,
}

thread_local! {
    /// One decompression context per thread, for every zstd codec: a context keeps no
    /// dictionary of its own (each codec passes its shared `DDict`), so a decode takes no lock
    /// and threads decoding with one dictionary read one copy of it.
    static DECOMPRESSION: RefCell<Option<DecodingContext>> = const { RefCell::new(None) };
}

impl Zstd {
    /// A zstd codec at `levels` with `dictionary` (empty: none). Loading the dictionary once
    /// here turns a bad stored dictionary into an error at open time rather than at the
    /// first record.
    pub fn new(kind: CodecKind, levels: Levels, dictionary: Vec<u8>, residence: Residence) -> Result<Zstd> {
        let decoding_dictionary = if dictionary.is_empty() {
            None
        } else {
            let digested = DDict::try_create(&dictionary);
            Some(digested.ok_or_else(|| Error::broken("the stored zstd dictionary is unusable"))?)
        };
        Ok(Zstd {
            kind,
            levels,
            residence,
            dictionary,
            dense_compressors: Pool::default(),
            quick_compressors: Pool::default(),
            decoding_dictionary,
        })
    }

    /// The level and context pool of `effort`.
    fn level_and_pool(&self, effort: Effort) -> (i32, &Pool<Compressor>) {
        match effort {
            Effort::Quick if self.levels.quick != self.levels.dense => (self.levels.quick, &self.quick_compressors),
            Effort::Quick | Effort::Dense => (self.levels.dense, &self.dense_compressors),
        }
    }

    /// Decodes `body` into `out` with `context`, up to `out`'s capacity.
    fn decompress_with(&self, context: &mut DecodingContext, body: &[u8], out: &mut Vec<u8>) -> Result<()> {
        let context = context.read_format_of(body, self.residence)?;
        let decoded = match &self.decoding_dictionary {
            Some(dictionary) => context.decompress_using_ddict(out, body, dictionary),
            None => context.decompress(out, body),
        };
        decoded.map(|_| ()).map_err(|code| corrupt(self.kind, zstd::zstd_safe::get_error_name(code)))
    }
}

impl Algorithm for Zstd {
    fn compress(&self, raw: &[u8], effort: Effort, out: &mut Vec<u8>) -> Result<()> {
        let (level, pool) = self.level_and_pool(effort);
        let make = || {
            let mut compressor = Compressor::with_dictionary(level, &self.dictionary)
                .map_err(|e| Error::invalid(format!("zstd dictionary: {e}")))?;
            let zstd_error = |e: std::io::Error| Error::invalid(format!("zstd: {e}"));
            // The database has one dictionary: 4 bytes saved on every frame.
            compressor.set_parameter(CParameter::DictIdFlag(false)).map_err(zstd_error)?;
            if self.residence == Residence::Memory {
                compressor.set_parameter(CParameter::Format(FrameFormat::Magicless)).map_err(zstd_error)?;
                compressor.set_parameter(CParameter::ContentSizeFlag(false)).map_err(zstd_error)?;
            }
            Ok(compressor)
        };
        pool.with(make, |c| {
            // The frame goes straight after what `out` holds: no buffer of its own to
            // allocate and copy from on every record.
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

    fn dictionary(&self) -> &[u8] {
        &self.dictionary
    }

    fn decompress(&self, body: &[u8], _raw_len: usize, out: &mut Vec<u8>) -> Result<()> {
        DECOMPRESSION.with(|cell| match cell.try_borrow_mut() {
            Ok(mut slot) => {
                let context = match &mut *slot {
                    Some(context) => context,
                    empty => empty.insert(DecodingContext::new()?),
                };
                self.decompress_with(context, body, out)
            }
            // Only a decode inside a decode could find it taken; it gets a context of its own.
            Err(_) => self.decompress_with(&mut DecodingContext::new()?, body, out),
        })
    }
}

#[cfg(test)]
mod tests {
    #![expect(clippy::unwrap_used, reason = "tests fail loudly")]
    #![expect(clippy::indexing_slicing, reason = "tests fail loudly")]
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
        let zstd = Zstd::new(CodecKind::ZstdDict, ZSTD_DICT_LEVELS, dictionary.clone(), Residence::File).unwrap();
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
        let plain = Zstd::new(CodecKind::Zstd, ZSTD_LEVELS, Vec::new(), Residence::File).unwrap();
        let (mut dense, mut quick) = (Vec::new(), Vec::new());
        plain.compress(&samples.concat(), Effort::Dense, &mut dense).unwrap();
        plain.compress(&samples.concat(), Effort::Quick, &mut quick).unwrap();
        assert_eq!(dense, quick);
    }

    #[test]
    fn a_dictionary_with_broken_entropy_tables_is_an_error_and_threads_share_one_that_works() {
        // zstd's dictionary magic followed by tables that do not parse.
        let mut broken = vec![0x37, 0xa4, 0x30, 0xec, 1, 0, 0, 0];
        broken.extend(std::iter::repeat_n(0xff, 300));
        let refused = Zstd::new(CodecKind::ZstdDict, ZSTD_DICT_LEVELS, broken, Residence::File).err();
        assert_eq!(refused.map(|e| e.kind()), Some(ErrorKind::BrokenData));

        let samples: Vec<Vec<u8>> = (0..2000u32).map(|i| format!("record {i} of {}", i % 17).into_bytes()).collect();
        let dictionary = train_dictionary(&samples, 2048).unwrap();
        let zstd = Zstd::new(CodecKind::ZstdDict, ZSTD_DICT_LEVELS, dictionary.clone(), Residence::File).unwrap();
        let frames: Vec<Vec<u8>> = samples
            .iter()
            .map(|raw| {
                let mut frame = Vec::new();
                zstd.compress(raw, Effort::Quick, &mut frame).unwrap();
                frame
            })
            .collect();
        std::thread::scope(|scope| {
            for _ in 0..3 {
                scope.spawn(|| {
                    for (raw, frame) in samples.iter().zip(&frames) {
                        let mut out = Vec::with_capacity(raw.len());
                        zstd.decompress(frame, raw.len(), &mut out).unwrap();
                        assert_eq!(&out, raw);
                        // A frame cut short is an error, and the thread's context still works after it.
                        let mut cut = Vec::with_capacity(raw.len());
                        assert!(zstd.decompress(&frame[..frame.len() / 2], raw.len(), &mut cut).is_err());
                    }
                });
            }
        });
    }

    #[test]
    fn bare_frames_leave_out_magic_and_size_and_decode_beside_standard_ones() {
        let samples: Vec<Vec<u8>> = (0..4000u32)
            .map(|i| {
                format!("word{i} noun: a thing numbered {} of the set {}", i * 7919 % 1000, i % 13)
                    .repeat(1 + i as usize % 9)
                    .into_bytes()
            })
            .collect();
        let dictionary = train_dictionary(&samples, 4096).unwrap();
        assert!(!dictionary.is_empty());
        // The same levels for both residences: the sizes below differ by framing only.
        let make = |kind, residence| {
            let (levels, dictionary) = if kind == CodecKind::Zstd {
                (ZSTD_LEVELS, Vec::new())
            } else {
                (ZSTD_DICT_LEVELS, dictionary.clone())
            };
            Zstd::new(kind, levels, dictionary, residence).unwrap()
        };
        for kind in [CodecKind::Zstd, CodecKind::ZstdDict] {
            let (standard, bare) = (make(kind, Residence::File), make(kind, Residence::Memory));
            // As files wrote them before the dictionary id was dropped.
            let mut named =
                zstd::bulk::Compressor::with_dictionary(standard.levels.dense, standard.dictionary()).unwrap();
            // Decoding alternates between the formats on one thread's context.
            for raw in samples.iter().step_by(97) {
                let (mut standard_frame, mut bare_frame) = (Vec::new(), Vec::new());
                standard.compress(raw, Effort::Dense, &mut standard_frame).unwrap();
                bare.compress(raw, Effort::Dense, &mut bare_frame).unwrap();
                let named_frame = named.compress(raw).unwrap();
                assert!(standard_frame.starts_with(&STANDARD_FRAME_MAGIC));
                assert!(!bare_frame.starts_with(&STANDARD_FRAME_MAGIC));
                assert_eq!(bare_frame.first().map(|header| header & 0x08), Some(0), "the reserved bit is clear");
                // A single-segment frame states the size in 1 byte below 256, else 2 (RFC 8878);
                // a frame without it has a 1-byte window descriptor instead.
                let size_saving = usize::from(raw.len() >= 256);
                assert_eq!(bare_frame.len() + 4 + size_saving, standard_frame.len(), "{kind}, {} bytes", raw.len());
                let id_len = if kind == CodecKind::Zstd { 0 } else { 4 };
                assert_eq!(standard_frame.len() + id_len, named_frame.len(), "{kind}");
                for frame in [&bare_frame, &standard_frame, &named_frame, &bare_frame] {
                    let mut out = Vec::with_capacity(raw.len());
                    bare.decompress(frame, raw.len(), &mut out).unwrap();
                    assert_eq!(&out, raw);
                }
                // A file never held bare frames: its codec reads standard ones only.
                for frame in [&standard_frame, &named_frame] {
                    let mut out = Vec::with_capacity(raw.len());
                    standard.decompress(frame, raw.len(), &mut out).unwrap();
                    assert_eq!(&out, raw);
                }
                assert!(standard.decompress(&bare_frame, raw.len(), &mut Vec::with_capacity(raw.len())).is_err());
                for codec in [&standard, &bare] {
                    // A frame that lost its first byte never decodes to the value.
                    for frame in [&bare_frame, &standard_frame] {
                        let mut out = Vec::with_capacity(raw.len());
                        let decoded = codec.decompress(&frame[1..], raw.len(), &mut out);
                        assert!(decoded.is_err() || out != *raw);
                    }
                }
            }
        }
    }
}
