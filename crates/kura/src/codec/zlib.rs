//! `zlib`: a raw deflate stream (no zlib header), level 6, zlib's default.

use super::algorithm::{corrupt, Algorithm};
use super::pool::Pool;
use super::{CodecKind, Effort};
use crate::error::{Error, Result};

const ZLIB_LEVEL: u32 = 6;

#[derive(Default)]
pub struct Zlib {
    compressors: Pool<flate2::Compress>,
    decompressors: Pool<flate2::Decompress>,
}

impl Algorithm for Zlib {
    fn compress(&self, raw: &[u8], _effort: Effort, out: &mut Vec<u8>) -> Result<()> {
        let make = || Ok(flate2::Compress::new(flate2::Compression::new(ZLIB_LEVEL), false));
        self.compressors.with(make, |c| {
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
        })?
    }

    fn release_compressors(&self) {
        self.compressors.clear();
    }

    fn decompress(&self, body: &[u8], _raw_len: usize, out: &mut Vec<u8>) -> Result<()> {
        self.decompressors.with(
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
        )?
    }
}
