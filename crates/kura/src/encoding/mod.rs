//! The building blocks of every byte format Kura writes, in one place: varints
//! (`varint.rs`), a bounds-checked reader that turns every short or impossible length into
//! BrokenData (`reader.rs`), and fixed-size header layouts whose field offsets are derived
//! from the field before and whose types keep every field within its header (`layout.rs`),
//! and the search that puts back one damaged byte of such a header by its checksum
//! (`byte_repair.rs`).
//! Every engine's encoders and decoders use these, so a length is checked the same way
//! everywhere and a header's offsets are written once.

mod byte_repair;
mod layout;
mod reader;
mod varint;

pub use byte_repair::repair_one_byte;
#[cfg(any(test, feature = "internals"))]
pub use byte_repair::Repaired;
#[cfg(test)]
pub use layout::{documented_codec_ids, documented_layout};
pub use layout::{Field, HeaderBytes};
pub use reader::ByteReader;
pub use varint::{decode_varint, encode_varint, encode_varint_padded, put_varint, varint_len, MAX_VARINT_LEN};
