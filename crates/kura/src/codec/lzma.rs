//! `lzma`: a raw LZMA2 stream, preset 6 (xz's default) with a 1 MiB window: records are
//! small, and the default 8 MiB window would be allocated for every context.

use super::algorithm::{corrupt, Algorithm};
use super::{CodecKind, Effort};
use crate::error::{Error, Result};

const LZMA_PRESET: u32 = 6;
const LZMA_DICT_SIZE: u32 = 1 << 20;

pub struct Lzma;

fn filters() -> Result<liblzma::stream::Filters> {
    let mut options = liblzma::stream::LzmaOptions::new_preset(LZMA_PRESET)
        .map_err(|e| Error::invalid(format!("lzma options: {e}")))?;
    options.dict_size(LZMA_DICT_SIZE);
    let mut filters = liblzma::stream::Filters::new();
    filters.lzma2(&options);
    Ok(filters)
}

impl Algorithm for Lzma {
    fn compress(&self, raw: &[u8], _effort: Effort, out: &mut Vec<u8>) -> Result<()> {
        let mut stream =
            liblzma::stream::Stream::new_raw_encoder(&filters()?).map_err(|e| Error::invalid(format!("lzma: {e}")))?;
        out.reserve(raw.len() + raw.len() / 2 + 128);
        loop {
            let consumed = stream.total_in() as usize;
            let input = raw.get(consumed..).unwrap_or_default();
            let status = stream
                .process_vec(input, out, liblzma::stream::Action::Finish)
                .map_err(|e| Error::invalid(format!("lzma: {e}")))?;
            if status == liblzma::stream::Status::StreamEnd {
                return Ok(());
            }
            out.reserve(out.capacity().max(128));
        }
    }

    fn decompress(&self, body: &[u8], _raw_len: usize, out: &mut Vec<u8>) -> Result<()> {
        let mut stream =
            liblzma::stream::Stream::new_raw_decoder(&filters()?).map_err(|e| corrupt(CodecKind::Lzma, e))?;
        let status =
            stream.process_vec(body, out, liblzma::stream::Action::Finish).map_err(|e| corrupt(CodecKind::Lzma, e))?;
        if status != liblzma::stream::Status::StreamEnd || stream.total_in() as usize != body.len() {
            return Err(corrupt(CodecKind::Lzma, "the stream does not end where the record does"));
        }
        Ok(())
    }
}
