//! Record and page codecs: which compression a database uses, and the framing that makes
//! decompression safe on untrusted bytes.
//!
//! A stored value is either the raw bytes, or `varint(raw_len) ++ codec bytes` when the codec
//! made it smaller. Which of the two is recorded by the caller (a flag bit in the record
//! header), so incompressible values cost nothing. On decode, `raw_len` is checked against a
//! ratio bound before anything is allocated (see `MAX_RATIO`), and the codec must produce
//! exactly `raw_len` bytes, or the record is BrokenData.

mod algorithm;
mod dictionary;
#[cfg(test)]
mod dummy;
mod effort;
mod liblz4;
mod lz4;
mod lzma;
mod none;
mod pool;
mod registry;
mod residence;
mod snappy;
mod zlib;
mod zstd;

pub use dictionary::{train_dictionary, DictionaryTraining, DEFAULT_DICTIONARY_SIZE};
pub use effort::Effort;
pub use registry::{names, shipped, CodecKind, CodecSpec, CODECS};
pub use residence::Residence;

use std::fmt;

use crate::encoding::{decode_varint, encode_varint, MAX_VARINT_LEN};
use crate::error::{Error, Result};
use algorithm::Algorithm;

/// The largest expansion we accept from stored to raw bytes. Values that compress better than
/// this (long runs of one byte) are stored raw instead, so that a corrupted length can never
/// make the reader allocate more than `MAX_RATIO` times the bytes it read from disk.
pub const MAX_RATIO: usize = 1024;

/// The version of liblz4, the C library that decodes `lz4` values (for example "1.9.4").
pub fn liblz4_version() -> String {
    liblz4::version()
}

impl fmt::Display for CodecKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A ready codec: the algorithm, its dictionary if any, and pooled compression contexts so
/// that hot paths do not allocate a context per record.
pub struct Codec {
    kind: CodecKind,
    /// Holds the dictionary too (`dictionary()`): one copy, not one here and one there.
    algorithm: Box<dyn Algorithm>,
}

impl fmt::Debug for Codec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Codec").field("kind", &self.kind).field("dictionary_len", &self.dictionary().len()).finish()
    }
}

impl Codec {
    /// A codec of `kind` for a file; `dictionary` is used by `ZstdDict` only and may be empty.
    pub fn new(kind: CodecKind, dictionary: Vec<u8>) -> Result<Codec> {
        Codec::with_residence(kind, dictionary, Residence::File)
    }

    /// A codec of `kind` for frames kept in `residence` (only zstd's differ, see
    /// `residence.rs`).
    pub fn with_residence(kind: CodecKind, dictionary: Vec<u8>, residence: Residence) -> Result<Codec> {
        if !kind.spec().uses_dictionary && !dictionary.is_empty() {
            return Err(Error::invalid(format!("codec {kind} takes no dictionary")));
        }
        let algorithm = kind.spec().make(dictionary, residence)?;
        Ok(Codec { kind, algorithm })
    }

    /// The algorithm.
    pub fn kind(&self) -> CodecKind {
        self.kind
    }

    /// The zstd dictionary (empty unless the codec uses one).
    pub fn dictionary(&self) -> &[u8] {
        self.algorithm.dictionary()
    }

    /// Whether the codec uses a dictionary and has none yet (a database created empty): the
    /// engine trains one when it has records enough.
    pub fn awaits_dictionary(&self) -> bool {
        self.kind.uses_dictionary() && self.dictionary().is_empty()
    }

    /// Whether values are stored uncompressed.
    pub fn is_none(&self) -> bool {
        self.kind == CodecKind::None
    }

    /// Encodes `raw` for storage into `out` (cleared first), at `effort`. Returns true when
    /// `out` holds the compressed frame (`varint(raw_len) ++ codec bytes`), false when it
    /// holds `raw` itself because compression did not make it smaller or would exceed
    /// `MAX_RATIO`.
    pub fn encode(&self, raw: &[u8], effort: Effort, out: &mut Vec<u8>) -> Result<bool> {
        out.clear();
        if self.kind != CodecKind::None && !raw.is_empty() {
            let mut header = [0u8; MAX_VARINT_LEN];
            let header_len = encode_varint(raw.len() as u64, &mut header);
            let header = header.get(..header_len).unwrap_or_default();
            out.extend_from_slice(header);
            self.algorithm.compress(raw, effort, out)?;
            if out.len() < raw.len() && raw.len() <= out.len().saturating_mul(MAX_RATIO) {
                return Ok(true);
            }
            out.clear();
        }
        out.extend_from_slice(raw);
        Ok(false)
    }

    /// The bytes to store for `raw` and whether they are compressed: `raw` itself when the
    /// codec is none or compression does not pay, else its encoding in `scratch`. Saves the
    /// copy `encode` makes of an uncompressed value.
    pub fn stored<'a>(&self, raw: &'a [u8], effort: Effort, scratch: &'a mut Vec<u8>) -> Result<(&'a [u8], bool)> {
        if self.kind == CodecKind::None || raw.is_empty() || !self.encode(raw, effort, scratch)? {
            return Ok((raw, false));
        }
        Ok((scratch.as_slice(), true))
    }

    /// Frees the compression contexts kept between records (a level-12 `zstd-dict` context
    /// with its digested dictionary holds about 5 MiB). For after a bulk write: the next
    /// `encode` makes a context again.
    pub fn release_compressors(&self) {
        self.algorithm.release_compressors();
    }

    /// Decodes what `encode` produced into `out` (cleared first). `compressed` is the flag
    /// `encode` returned, as stored beside the bytes.
    pub fn decode(&self, stored: &[u8], compressed: bool, out: &mut Vec<u8>) -> Result<()> {
        out.clear();
        if !compressed {
            out.extend_from_slice(stored);
            return Ok(());
        }
        if self.kind == CodecKind::None {
            return Err(Error::broken("a record is marked compressed in a database without a codec"));
        }
        let (raw_len, header_len) =
            decode_varint(stored).ok_or_else(|| Error::broken("truncated compressed frame header"))?;
        let body = stored.get(header_len..).unwrap_or_default();
        let raw_len = usize::try_from(raw_len).map_err(|_| Error::broken("impossible raw length"))?;
        if raw_len == 0 || raw_len > stored.len().saturating_mul(MAX_RATIO) {
            return Err(Error::broken(format!(
                "compressed frame claims {raw_len} raw bytes from {} stored bytes",
                stored.len()
            )));
        }
        out.reserve_exact(raw_len);
        self.algorithm.decompress(body, raw_len, out)?;
        if out.len() != raw_len {
            return Err(Error::broken(format!(
                "{} frame decoded to {} bytes instead of {raw_len}",
                self.kind,
                out.len()
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![expect(clippy::unwrap_used, reason = "a test fails loudly on the first broken expectation")]
    use super::*;

    #[test]
    fn stored_bytes_decode_to_the_value_and_borrow_it_when_not_compressed() {
        // Runs of a byte in a repeating pattern: every codec shrinks it, run-length ones too.
        let compressible: Vec<u8> =
            (0..4000u32).flat_map(|i| std::iter::repeat_n(b'a' + (i % 26) as u8, 1 + i as usize % 9)).collect();
        let mut rng = crate::split_mix::SplitMix64::new(1);
        let noise: Vec<u8> = (0..300).map(|_| rng.next_u64() as u8).collect();
        for kind in CodecKind::ALL {
            let codec = Codec::new(kind, Vec::new()).unwrap();
            for raw in [&compressible[..], &noise[..], &[][..]] {
                let mut scratch = Vec::new();
                let (stored, compressed) = codec.stored(raw, Effort::Dense, &mut scratch).unwrap();
                if !compressed {
                    assert_eq!(stored.as_ptr(), raw.as_ptr(), "{kind}: an uncompressed value is not copied");
                }
                let mut out = Vec::new();
                codec.decode(stored, compressed, &mut out).unwrap();
                assert_eq!(out, raw, "{kind}");
            }
            let mut scratch = Vec::new();
            let compressed = codec.stored(&compressible, Effort::Quick, &mut scratch).unwrap().1;
            assert_eq!(compressed, kind != CodecKind::None, "{kind}");
        }
    }
}
