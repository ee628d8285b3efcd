//! `none`: values are stored as they are.

use super::algorithm::Algorithm;
use super::Effort;
use crate::error::Result;

pub struct Identity;

impl Algorithm for Identity {
    fn compress(&self, raw: &[u8], _effort: Effort, out: &mut Vec<u8>) -> Result<()> {
        out.extend_from_slice(raw);
        Ok(())
    }

    fn decompress(&self, body: &[u8], _raw_len: usize, out: &mut Vec<u8>) -> Result<()> {
        out.extend_from_slice(body);
        Ok(())
    }
}
