//! `snappy`: snappy's raw format, whose own length header must agree with the frame's.

use super::algorithm::{corrupt, Algorithm};
use super::pool::Pool;
use super::{CodecKind, Effort};
use crate::error::{Error, Result};

#[derive(Default)]
pub struct Snappy {
    encoders: Pool<snap::raw::Encoder>,
    decoders: Pool<snap::raw::Decoder>,
}

impl Algorithm for Snappy {
    fn compress(&self, raw: &[u8], _effort: Effort, out: &mut Vec<u8>) -> Result<()> {
        let start = out.len();
        out.resize(start + snap::raw::max_compress_len(raw.len()), 0);
        let target = out.get_mut(start..).unwrap_or_default();
        let written = self
            .encoders
            .with(|| Ok(snap::raw::Encoder::new()), |e| e.compress(raw, target))?
            .map_err(|e| Error::invalid(format!("snappy: {e}")))?;
        out.truncate(start + written);
        Ok(())
    }

    fn decompress(&self, body: &[u8], raw_len: usize, out: &mut Vec<u8>) -> Result<()> {
        let claimed = snap::raw::decompress_len(body).map_err(|e| corrupt(CodecKind::Snappy, e))?;
        if claimed != raw_len {
            return Err(corrupt(CodecKind::Snappy, "length header disagrees with the record"));
        }
        out.resize(raw_len, 0);
        let written = self
            .decoders
            .with(|| Ok(snap::raw::Decoder::new()), |d| d.decompress(body, out.as_mut_slice()))?
            .map_err(|e| corrupt(CodecKind::Snappy, e))?;
        out.truncate(written);
        Ok(())
    }
}
