//! `lz4`: one raw LZ4 block per value (the block format, without a frame or size prefix).
//!
//! Encoded by lz4_flex (safe Rust), decoded by liblz4 (`liblz4.rs`), the C library Tkrzw
//! uses too, which decodes dictionary values in about two thirds of lz4_flex's time. Both
//! follow the LZ4 block format, so the files written before the decoder changed read the same
//! (tests/format_fixtures.rs); blocks beyond liblz4's size limit (2 GiB) go to lz4_flex.

use super::algorithm::{corrupt, Algorithm};
use super::liblz4::{self, BlockError};
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
        match liblz4::decompress_block(body, raw_len, out) {
            Ok(_) => Ok(()),
            Err(BlockError::Malformed { at }) => Err(corrupt(CodecKind::Lz4, format!("malformed at byte {at}"))),
            Err(BlockError::TooLarge) => decompress_with_lz4_flex(body, raw_len, out),
        }
    }
}

/// Kura's decoder before liblz4, kept for the blocks liblz4 cannot take.
fn decompress_with_lz4_flex(body: &[u8], raw_len: usize, out: &mut Vec<u8>) -> Result<()> {
    out.clear();
    out.resize(raw_len, 0);
    let written = lz4_flex::block::decompress_into(body, out.as_mut_slice()).map_err(|e| corrupt(CodecKind::Lz4, e))?;
    out.truncate(written);
    Ok(())
}

#[cfg(test)]
mod tests {
    #![expect(
        clippy::unwrap_used,
        clippy::indexing_slicing,
        reason = "a test fails loudly on the first broken expectation"
    )]
    use super::*;
    use crate::codec::{Codec, MAX_RATIO};
    use crate::error::ErrorKind;
    use crate::split_mix::SplitMix64;

    /// Words for English-like values, which compress as the dictionary's do.
    const WORDS: &[&str] = &[
        "the", "of", "a", "to", "in", "and", "or", "is", "that", "which", "river", "stone", "quiet", "lantern",
        "meadow", "copper", "thistle", "(", ")", "\"", ":", ",", "noun", "verb", "gloss", "synonym", "related",
    ];

    /// `len` bytes of a `kind`: 0 random bytes, 1 English-like words, 2 runs of a few bytes.
    fn sample(kind: usize, len: usize, rng: &mut SplitMix64) -> Vec<u8> {
        let mut value = Vec::with_capacity(len + 16);
        while value.len() < len {
            match kind % 3 {
                0 => value.push(rng.next_u64() as u8),
                1 => {
                    value.extend_from_slice(WORDS[(rng.next_u64() % WORDS.len() as u64) as usize].as_bytes());
                    value.push(b' ');
                }
                _ => {
                    let byte = rng.next_u64() as u8 % 4;
                    let run = (rng.next_u64() % 40) as usize;
                    value.extend(std::iter::repeat_n(byte, run));
                }
            }
        }
        value.truncate(len);
        value
    }

    /// Lengths 1 to 300 one by one, then more and more apart up to 1 MiB.
    fn lengths() -> Vec<usize> {
        let mut lengths: Vec<usize> = (1..=300).collect();
        let mut len = 301;
        while len <= 1 << 20 {
            lengths.push(len);
            len = len * 5 / 4 + 7;
        }
        lengths.extend([65_535, 65_536, 65_537, 1 << 20]);
        lengths
    }

    fn lz4_flex_block(raw: &[u8]) -> Vec<u8> {
        let mut block = Vec::new();
        Lz4.compress(raw, Effort::Quick, &mut block).unwrap();
        block
    }

    #[test]
    fn liblz4_decodes_blocks_of_every_size_and_kind_to_the_input() {
        let mut rng = SplitMix64::new(47);
        let mut out = Vec::new();
        for len in lengths() {
            for kind in 0..3 {
                let raw = sample(kind, len, &mut rng);
                let block = lz4_flex_block(&raw);
                assert_eq!(liblz4::decompress_block(&block, raw.len(), &mut out), Ok(raw.len()), "kind {kind}, {len}");
                assert!(out == raw, "kind {kind}, {len} bytes: liblz4 decoded other bytes");
                Lz4.decompress(&block, raw.len(), &mut out).unwrap();
                assert!(out == raw, "kind {kind}, {len} bytes: the codec decoded other bytes");
                decompress_with_lz4_flex(&block, raw.len(), &mut out).unwrap();
                assert!(out == raw, "kind {kind}, {len} bytes: the lz4_flex fallback decoded other bytes");
            }
        }
    }

    /// The values of a file written before the decoder changed are lz4_flex's blocks: its
    /// `compress` (the allocating one) and `compress_into` (the one `compress` above calls)
    /// both, framed as `Codec::encode` frames them, decode through the codec.
    #[test]
    fn frames_of_the_lz4_flex_encoder_decode() {
        let codec = Codec::new(CodecKind::Lz4, Vec::new()).unwrap();
        let mut rng = SplitMix64::new(6);
        let mut out = Vec::new();
        for len in lengths().into_iter().step_by(3) {
            let raw = sample(1, len, &mut rng);
            let mut frame = Vec::new();
            let mut header = [0u8; crate::encoding::MAX_VARINT_LEN];
            let header_len = crate::encoding::encode_varint(raw.len() as u64, &mut header);
            frame.extend_from_slice(&header[..header_len]);
            frame.extend_from_slice(&lz4_flex::block::compress(&raw));
            codec.decode(&frame, true, &mut out).unwrap();
            assert!(out == raw, "{len} bytes");

            let compressed = codec.encode(&raw, Effort::Dense, &mut frame).unwrap();
            codec.decode(&frame, compressed, &mut out).unwrap();
            assert!(out == raw, "{len} bytes");
            assert!(compressed || len < 300, "{len} bytes of words do not compress");
        }
    }

    fn assert_broken(result: Result<()>, what: &str) {
        match result {
            Ok(()) => panic!("{what}: decoded"),
            Err(e) => assert_eq!(e.kind(), ErrorKind::BrokenData, "{what}: {e}"),
        }
    }

    #[test]
    fn truncated_frames_are_broken_data() {
        let codec = Codec::new(CodecKind::Lz4, Vec::new()).unwrap();
        let mut rng = SplitMix64::new(7);
        let mut out = Vec::new();
        for len in [1, 2, 13, 100, 542, 4000, 70_000] {
            for kind in 0..3 {
                let raw = sample(kind, len, &mut rng);
                let block = lz4_flex_block(&raw);
                for cut in 0..block.len() {
                    let result = Lz4.decompress(&block[..cut], raw.len(), &mut out);
                    // A shorter prefix may still be a well-formed block of fewer bytes: the
                    // frame's length check (`Codec::decode`) catches those.
                    if result.is_ok() {
                        assert!(out.len() < raw.len(), "kind {kind}, {len} cut to {cut}: decoded it whole");
                    } else {
                        assert_broken(result, &format!("kind {kind}, {len} bytes cut to {cut}"));
                    }
                }
                let mut frame = Vec::new();
                if !codec.encode(&raw, Effort::Dense, &mut frame).unwrap() {
                    continue;
                }
                for cut in 0..frame.len() {
                    assert_broken(codec.decode(&frame[..cut], true, &mut out), &format!("frame of {len} cut to {cut}"));
                }
            }
        }
    }

    #[test]
    fn corrupted_frames_are_broken_data_or_other_bytes_never_a_panic() {
        let codec = Codec::new(CodecKind::Lz4, Vec::new()).unwrap();
        let mut rng = SplitMix64::new(8);
        let mut out = Vec::new();
        let mut broken = 0;
        let mut tries = 0;
        for len in [1, 20, 100, 542, 3000, 70_000] {
            for kind in 0..3 {
                let raw = sample(kind, len, &mut rng);
                let mut frame = Vec::new();
                if !codec.encode(&raw, Effort::Dense, &mut frame).unwrap() {
                    continue;
                }
                for _ in 0..300 {
                    let mut damaged = frame.clone();
                    for _ in 0..1 + rng.next_u64() % 3 {
                        let at = (rng.next_u64() % damaged.len() as u64) as usize;
                        damaged[at] ^= 1 + (rng.next_u64() % 255) as u8;
                    }
                    tries += 1;
                    match codec.decode(&damaged, true, &mut out) {
                        Ok(()) => {
                            // LZ4 has no checksum (the record's checksum is the file's): a
                            // changed literal decodes to other bytes of the claimed length.
                            assert!(out.len() <= damaged.len().saturating_mul(MAX_RATIO));
                        }
                        Err(e) => {
                            assert_eq!(e.kind(), ErrorKind::BrokenData, "{e}");
                            broken += 1;
                        }
                    }
                }
            }
        }
        assert!(broken * 4 > tries, "only {broken} of {tries} damaged frames were refused");
    }

    #[test]
    fn a_block_decoding_to_more_than_the_frame_claims_is_broken_data() {
        let raw = sample(1, 1000, &mut SplitMix64::new(9));
        let block = lz4_flex_block(&raw);
        let mut out = Vec::new();
        assert_broken(Lz4.decompress(&block, raw.len() - 1, &mut out), "one byte short");
        assert!(out.capacity() < raw.len() + 64, "the buffer grew to {} bytes", out.capacity());
        assert_broken(Lz4.decompress(&[], 10, &mut out), "an empty block");
        assert_broken(Lz4.decompress(&[0xf0], 10, &mut out), "a token without its literals");
    }

    #[test]
    fn blocks_beyond_liblz4_limit_are_left_to_lz4_flex() {
        let mut out = Vec::new();
        assert_eq!(liblz4::decompress_block(&[0x10, b'a'], liblz4::MAX_BLOCK + 1, &mut out), Err(BlockError::TooLarge));
        assert_eq!(out.capacity(), 0, "nothing allocated for a block liblz4 does not take");
        assert_eq!(liblz4::decompress_block(&[0x10, b'a'], 1, &mut out), Ok(1));
        assert_eq!(out, b"a");
    }

    #[test]
    fn the_linked_liblz4_is_1_9_or_newer() {
        let version = liblz4::version();
        let numbers: Vec<u32> = version.split('.').map(|n| n.parse().unwrap()).collect();
        assert!(numbers.as_slice() >= [1, 9].as_slice(), "liblz4 {version}");
    }
}
