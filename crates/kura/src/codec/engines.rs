//! The compression libraries behind each codec, with their contexts pooled.
//!
//! zstd, zlib and lzma contexts are costly to create (zstd's is ~100 KiB, lzma's allocates
//! its window), so each codec keeps a small pool; a thread takes a context, uses it for one
//! record and puts it back. The pool is a mutex-guarded stack: it is held for a push or a
//! pop only, never while compressing.

use parking_lot::Mutex;

use super::CodecKind;
use crate::error::{Error, Result};

/// zstd level for per-record compression: level 3 is zstd's own default and balances build
/// time against size; the dictionary codec uses a higher level because its records are
/// small and written once at import or rebuild.
const ZSTD_LEVEL: i32 = 3;
const ZSTD_DICT_LEVEL: i32 = 12;
/// Deflate level 6, zlib's default.
const ZLIB_LEVEL: u32 = 6;
/// LZMA preset 6 (xz's default) with a 1 MiB window: records are small, and the default
/// 8 MiB window would be allocated for every context.
const LZMA_PRESET: u32 = 6;
const LZMA_DICT_SIZE: u32 = 1 << 20;

pub(super) struct Pool<T> {
    free: Mutex<Vec<T>>,
}

impl<T> Pool<T> {
    fn new() -> Pool<T> {
        Pool { free: Mutex::new(Vec::new()) }
    }

    /// Runs `f` with a pooled context, creating one with `make` when the pool is empty.
    fn with<R>(&self, make: impl FnOnce() -> Result<T>, f: impl FnOnce(&mut T) -> R) -> Result<R> {
        let taken = self.free.lock().pop();
        let mut context = match taken {
            Some(context) => context,
            None => make()?,
        };
        let result = f(&mut context);
        self.free.lock().push(context);
        Ok(result)
    }
}

pub(super) enum Engines {
    None,
    Zlib {
        compressors: Pool<flate2::Compress>,
        decompressors: Pool<flate2::Decompress>,
    },
    Zstd {
        level: i32,
        dictionary: Vec<u8>,
        compressors: Pool<zstd::bulk::Compressor<'static>>,
        decompressors: Pool<zstd::bulk::Decompressor<'static>>,
    },
    Lz4,
    Lzma,
    Snappy {
        encoders: Pool<snap::raw::Encoder>,
        decoders: Pool<snap::raw::Decoder>,
    },
}

fn corrupt(kind: CodecKind, detail: impl std::fmt::Display) -> Error {
    Error::broken(format!("corrupted {kind} frame: {detail}"))
}

fn lzma_filters() -> Result<liblzma::stream::Filters> {
    let mut options = liblzma::stream::LzmaOptions::new_preset(LZMA_PRESET)
        .map_err(|e| Error::invalid(format!("lzma options: {e}")))?;
    options.dict_size(LZMA_DICT_SIZE);
    let mut filters = liblzma::stream::Filters::new();
    filters.lzma2(&options);
    Ok(filters)
}

impl Engines {
    pub(super) fn new(kind: CodecKind, dictionary: &[u8]) -> Result<Engines> {
        Ok(match kind {
            CodecKind::None => Engines::None,
            CodecKind::Zlib => Engines::Zlib { compressors: Pool::new(), decompressors: Pool::new() },
            CodecKind::Zstd | CodecKind::ZstdDict => {
                let level = if kind == CodecKind::ZstdDict { ZSTD_DICT_LEVEL } else { ZSTD_LEVEL };
                let engines = Engines::Zstd {
                    level,
                    dictionary: dictionary.to_vec(),
                    compressors: Pool::new(),
                    decompressors: Pool::new(),
                };
                // Loading the dictionary once here turns a bad stored dictionary into an error
                // at open time rather than at the first record.
                if let Engines::Zstd { decompressors, .. } = &engines {
                    decompressors.with(|| engines.new_zstd_decompressor(), |_| ())?;
                }
                engines
            }
            CodecKind::Lz4 => Engines::Lz4,
            CodecKind::Lzma => Engines::Lzma,
            CodecKind::Snappy => Engines::Snappy { encoders: Pool::new(), decoders: Pool::new() },
        })
    }

    fn new_zstd_decompressor(&self) -> Result<zstd::bulk::Decompressor<'static>> {
        let dictionary = match self {
            Engines::Zstd { dictionary, .. } => dictionary.as_slice(),
            _ => &[],
        };
        zstd::bulk::Decompressor::with_dictionary(dictionary)
            .map_err(|e| Error::broken(format!("the stored zstd dictionary is unusable: {e}")))
    }

    /// Appends the compressed form of `raw` to `out`.
    pub(super) fn compress(&self, raw: &[u8], out: &mut Vec<u8>) -> Result<()> {
        match self {
            Engines::None => out.extend_from_slice(raw),
            Engines::Zlib { compressors, .. } => {
                let make = || Ok(flate2::Compress::new(flate2::Compression::new(ZLIB_LEVEL), false));
                compressors.with(make, |c| {
                    c.reset();
                    out.reserve(raw.len() + raw.len() / 1000 + 64);
                    loop {
                        let before = c.total_in() as usize;
                        let input = raw.get(before..).unwrap_or_default();
                        let status = c
                            .compress_vec(input, out, flate2::FlushCompress::Finish)
                            .map_err(|e| Error::invalid(format!("zlib: {e}")))?;
                        if status == flate2::Status::StreamEnd {
                            return Ok(());
                        }
                        out.reserve(out.capacity().max(64));
                    }
                })??
            }
            Engines::Zstd { level, dictionary, compressors, .. } => {
                let make = || {
                    zstd::bulk::Compressor::with_dictionary(*level, dictionary)
                        .map_err(|e| Error::invalid(format!("zstd dictionary: {e}")))
                };
                compressors.with(make, |c| {
                    let frame = c.compress(raw).map_err(|e| Error::invalid(format!("zstd: {e}")))?;
                    out.extend_from_slice(&frame);
                    Ok(())
                })??
            }
            Engines::Lz4 => {
                let start = out.len();
                out.resize(start + lz4_flex::block::get_maximum_output_size(raw.len()), 0);
                let target = out.get_mut(start..).unwrap_or_default();
                let written =
                    lz4_flex::block::compress_into(raw, target).map_err(|e| Error::invalid(format!("lz4: {e}")))?;
                out.truncate(start + written);
            }
            Engines::Lzma => {
                let mut stream = liblzma::stream::Stream::new_raw_encoder(&lzma_filters()?)
                    .map_err(|e| Error::invalid(format!("lzma: {e}")))?;
                out.reserve(raw.len() + raw.len() / 2 + 128);
                loop {
                    let consumed = stream.total_in() as usize;
                    let input = raw.get(consumed..).unwrap_or_default();
                    let status = stream
                        .process_vec(input, out, liblzma::stream::Action::Finish)
                        .map_err(|e| Error::invalid(format!("lzma: {e}")))?;
                    if status == liblzma::stream::Status::StreamEnd {
                        break;
                    }
                    out.reserve(out.capacity().max(128));
                }
            }
            Engines::Snappy { encoders, .. } => {
                let start = out.len();
                out.resize(start + snap::raw::max_compress_len(raw.len()), 0);
                let target = out.get_mut(start..).unwrap_or_default();
                let written = encoders
                    .with(|| Ok(snap::raw::Encoder::new()), |e| e.compress(raw, target))?
                    .map_err(|e| Error::invalid(format!("snappy: {e}")))?;
                out.truncate(start + written);
            }
        }
        Ok(())
    }

    /// Decompresses `body` into `out` (empty, with capacity for `raw_len`), producing at most
    /// `raw_len` bytes; the caller checks that exactly `raw_len` came out.
    pub(super) fn decompress(&self, body: &[u8], raw_len: usize, out: &mut Vec<u8>) -> Result<()> {
        match self {
            Engines::None => out.extend_from_slice(body),
            Engines::Zlib { decompressors, .. } => decompressors.with(
                || Ok(flate2::Decompress::new(false)),
                |d| {
                    d.reset(false);
                    let status = d
                        .decompress_vec(body, out, flate2::FlushDecompress::Finish)
                        .map_err(|e| corrupt(CodecKind::Zlib, e))?;
                    if status != flate2::Status::StreamEnd {
                        return Err(corrupt(CodecKind::Zlib, "the stream does not end where the record does"));
                    }
                    Ok(())
                },
            )??,
            Engines::Zstd { decompressors, .. } => decompressors.with(
                || self.new_zstd_decompressor(),
                |d| d.decompress_to_buffer(body, out).map(|_| ()).map_err(|e| corrupt(CodecKind::Zstd, e)),
            )??,
            Engines::Lz4 => {
                out.resize(raw_len, 0);
                let written = lz4_flex::block::decompress_into(body, out.as_mut_slice())
                    .map_err(|e| corrupt(CodecKind::Lz4, e))?;
                out.truncate(written);
            }
            Engines::Lzma => {
                let mut stream = liblzma::stream::Stream::new_raw_decoder(&lzma_filters()?)
                    .map_err(|e| corrupt(CodecKind::Lzma, e))?;
                let status = stream
                    .process_vec(body, out, liblzma::stream::Action::Finish)
                    .map_err(|e| corrupt(CodecKind::Lzma, e))?;
                if status != liblzma::stream::Status::StreamEnd || stream.total_in() as usize != body.len() {
                    return Err(corrupt(CodecKind::Lzma, "the stream does not end where the record does"));
                }
            }
            Engines::Snappy { decoders, .. } => {
                let claimed = snap::raw::decompress_len(body).map_err(|e| corrupt(CodecKind::Snappy, e))?;
                if claimed != raw_len {
                    return Err(corrupt(CodecKind::Snappy, "length header disagrees with the record"));
                }
                out.resize(raw_len, 0);
                let written = decoders
                    .with(|| Ok(snap::raw::Decoder::new()), |d| d.decompress(body, out.as_mut_slice()))?
                    .map_err(|e| corrupt(CodecKind::Snappy, e))?;
                out.truncate(written);
            }
        }
        Ok(())
    }
}
