//! One bucket as it is held in memory (in its group's arena, `arena.rs`) and in the snapshot:
//! a block of `flag:u8` followed by the raw bucket (flag 0) or the codec's frame of it (flag
//! 1, `varint(raw_len) ++ codec bytes`, see `codec/mod.rs`). An empty bucket is an empty
//! block and takes no bytes. A bucket that compression does not shrink is kept raw, and then
//! a read needs no decoding at all.

use crate::codec::{Codec, CodecKind, Effort, Residence};
use crate::encoding::decode_varint;
use crate::error::{Error, Result};

const RAW: u8 = 0;
const COMPRESSED: u8 = 1;

/// The codec of a map's blocks, one for memory (`codec/residence.rs`): bare zstd frames (a
/// block is in memory, and under a 64-bit checksum in the snapshot), and `zstd-dict` level 16
/// for bulk writes.
pub fn codec(kind: CodecKind, dictionary: Vec<u8>) -> Result<Codec> {
    Codec::with_residence(kind, dictionary, Residence::Memory)
}

/// Encodes the raw bucket `raw` with `codec` at `effort` into `block` (cleared first; left
/// empty when `raw` is), using `scratch` for the frame.
pub fn encode(codec: &Codec, raw: &[u8], effort: Effort, scratch: &mut Vec<u8>, block: &mut Vec<u8>) -> Result<()> {
    block.clear();
    if raw.is_empty() {
        return Ok(());
    }
    let (stored, compressed) = codec.stored(raw, effort, scratch)?;
    block.reserve(stored.len() + 1);
    block.push(if compressed { COMPRESSED } else { RAW });
    block.extend_from_slice(stored);
    Ok(())
}

/// The raw bucket of `block`: borrowed from the block when it is stored raw, else decoded
/// into `scratch`. The codec checks that the frame decodes to exactly its stated length.
pub fn decode<'a>(codec: &Codec, block: &'a [u8], scratch: &'a mut Vec<u8>) -> Result<&'a [u8]> {
    match block.split_first() {
        None => Ok(&[]),
        Some((&RAW, raw)) => Ok(raw),
        Some((&COMPRESSED, frame)) => {
            codec.decode(frame, true, scratch)?;
            Ok(scratch.as_slice())
        }
        Some((flag, _)) => Err(Error::broken(format!("compact bucket: unknown block flag {flag}"))),
    }
}

/// The raw length of the bucket in `block`, read from its header without decoding.
pub fn raw_len(block: &[u8]) -> usize {
    match block.split_first() {
        Some((&COMPRESSED, frame)) => {
            decode_varint(frame).and_then(|(len, _)| usize::try_from(len).ok()).unwrap_or_default()
        }
        Some((_, raw)) => raw.len(),
        None => 0,
    }
}

/// What the allocator holds for a request of `len` bytes: glibc's malloc adds an 8-byte
/// header and rounds chunks up to 16 bytes, 32 at least; nothing for an empty request.
pub fn heap_size(len: usize) -> usize {
    if len == 0 {
        0
    } else {
        (len + 8).div_ceil(16).max(2) * 16
    }
}

#[cfg(test)]
mod tests {
    #![expect(clippy::unwrap_used, reason = "a test fails loudly on the first broken expectation")]
    use super::*;

    #[test]
    fn blocks_round_trip_with_every_codec_and_report_their_raw_length() {
        let raw: Vec<u8> = (0..3000u32).flat_map(|i| format!("{}", i % 37).into_bytes()).collect();
        for kind in CodecKind::ALL {
            let codec = codec(kind, Vec::new()).unwrap();
            let (mut scratch, mut block) = (Vec::new(), Vec::new());
            encode(&codec, &raw, Effort::Quick, &mut scratch, &mut block).unwrap();
            assert_eq!(raw_len(&block), raw.len(), "{kind}");
            let mut out = Vec::new();
            assert_eq!(decode(&codec, &block, &mut out).unwrap(), &raw[..], "{kind}");
        }
        assert_eq!(heap_size(1), 32);
        assert_eq!(heap_size(24), 32);
        assert_eq!(heap_size(25), 48);
    }
}
