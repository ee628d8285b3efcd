//! `lz4`: one LZ4 block per value (lz4_flex, safe decoding).

use super::algorithm::{corrupt, Algorithm};
use super::{CodecKind, Effort};
use crate::error::{Error, Result};

pub struct Lz4;

impl Algorithm for Lz4 {
    fn compress(&self, raw: &[u8], _effort: Effort, out: &mut Vec<u8>) -> Result<()> {
        let start = out.len();
        out.resize(start + lz4_flex::block::get_maximum_output_size(raw.len()), 0);
        let target = out.get_mut(start..).unwrap_or_default();
        let written = lz4_flex::block::compress_into(raw, target).map_err(|e| Error::invalid(format!("lz4: {e}")))?;
        out.truncate(start + written);
        Ok(())
    }

    fn decompress(&self, body: &[u8], raw_len: usize, out: &mut Vec<u8>) -> Result<()> {
        out.resize(raw_len, 0);
        let written =
            lz4_flex::block::decompress_into(body, out.as_mut_slice()).map_err(|e| corrupt(CodecKind::Lz4, e))?;
        out.truncate(written);
        Ok(())
    }
}
