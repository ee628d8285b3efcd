//! The item format: how one memcached item is kept as a Kura value.
//!
//! The key is the record's key; the value is a 17-byte header followed by the data:
//!
//! | offset | size | field                                                        |
//! |--------|------|--------------------------------------------------------------|
//! | 0      | 1    | bits 0-5: format version, 1; bit 6: stale; bit 7: win sent   |
//! | 1      | 4    | client flags, big-endian u32                                 |
//! | 5      | 4    | expiry, big-endian u32 Unix seconds; 0 never, 1 expired      |
//! | 9      | 8    | CAS unique, big-endian u64                                   |
//! | 17     | n    | the data, as the client sent it                              |
//!
//! Bit 6 marks an item invalidated by `md I` or `ms I` (stale: meta gets answer `X`), bit 7
//! one whose win token was handed out (meta gets answer `Z`, not `W`). Both are 0 in items
//! written before they existed, so those read unchanged; a server older than the bits
//! treats an item with either set as foreign (absent).
//!
//! Keeping all of it inside the value makes every engine a memcached store with no change
//! to the engine, and a served file carries flags, expiry and CAS across restarts.

use kura::{Error, Result};

/// The format version byte this code writes and reads.
pub const VERSION: u8 = 1;

/// Bit of byte 0: the item is stale (invalidated, kept for the one client that wins the
/// right to recompute it).
const STALE: u8 = 0x40;
/// Bit of byte 0: a win token (`W`) was handed out for the item.
const WIN_SENT: u8 = 0x80;
/// The bits of byte 0 that hold the format version.
const VERSION_BITS: u8 = 0x3F;

/// Bytes before the data.
pub const HEADER_LEN: usize = 17;

/// The metadata of one item.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Header {
    pub flags: u32,
    pub expiry: u32,
    pub cas: u64,
    /// Invalidated (`md I`, `ms I` with an older CAS): still returned, flagged `X`.
    pub stale: bool,
    /// A meta get already handed out the win token (`W`); later ones see `Z`.
    pub win_sent: bool,
}

/// An item's stored bytes: the header, then the data in `parts` joined (append and prepend
/// join two parts without an intermediate copy).
pub fn encode(header: Header, parts: &[&[u8]]) -> Vec<u8> {
    let data_len: usize = parts.iter().map(|p| p.len()).sum();
    let mut stored = Vec::with_capacity(HEADER_LEN + data_len);
    stored.push(VERSION | if header.stale { STALE } else { 0 } | if header.win_sent { WIN_SENT } else { 0 });
    stored.extend_from_slice(&header.flags.to_be_bytes());
    stored.extend_from_slice(&header.expiry.to_be_bytes());
    stored.extend_from_slice(&header.cas.to_be_bytes());
    for part in parts {
        stored.extend_from_slice(part);
    }
    stored
}

/// The header and data of stored bytes; a BrokenData error for bytes this format did not
/// write (too short or another version), which the server then treats as no item.
pub fn decode(stored: &[u8]) -> Result<(Header, &[u8])> {
    let (head, data) = stored.split_first_chunk::<HEADER_LEN>().ok_or_else(|| {
        Error::broken(format!("an item needs {HEADER_LEN} header bytes, the value has {}", stored.len()))
    })?;
    let [first, f0, f1, f2, f3, e0, e1, e2, e3, c0, c1, c2, c3, c4, c5, c6, c7] = *head;
    let version = first & VERSION_BITS;
    if version != VERSION {
        return Err(Error::broken(format!("item format version {version} is not {VERSION}")));
    }
    let header = Header {
        flags: u32::from_be_bytes([f0, f1, f2, f3]),
        expiry: u32::from_be_bytes([e0, e1, e2, e3]),
        cas: u64::from_be_bytes([c0, c1, c2, c3, c4, c5, c6, c7]),
        stale: first & STALE != 0,
        win_sent: first & WIN_SENT != 0,
    };
    Ok((header, data))
}

#[cfg(test)]
mod tests {
    #![expect(
        clippy::unwrap_used,
        clippy::indexing_slicing,
        reason = "a test fails loudly on the first broken expectation"
    )]
    use super::*;

    #[test]
    fn items_round_trip_and_foreign_values_are_refused() {
        let header = Header { flags: 0xDEAD_BEEF, expiry: 1_900_000_000, cas: u64::MAX - 3, ..Header::default() };
        let stored = encode(header, &[b"ab", b"", b"c\r\n\0"]);
        assert_eq!(stored.len(), HEADER_LEN + 6);
        assert_eq!(stored.first(), Some(&VERSION));
        assert_eq!(decode(&stored).unwrap(), (header, &b"abc\r\n\0"[..]));
        assert!(decode(&stored[..HEADER_LEN - 1]).is_err());
        let mut other = stored.clone();
        other[0] = 2;
        assert!(decode(&other).is_err());
        assert_eq!(decode(&encode(header, &[])).unwrap().1, b"");
        // The state bits round-trip, and an item of the earlier layout (byte 0 = 1) reads
        // as neither stale nor won.
        for (stale, win_sent) in [(true, false), (false, true), (true, true)] {
            let marked = Header { stale, win_sent, ..header };
            assert_eq!(decode(&encode(marked, &[b"x"])).unwrap(), (marked, &b"x"[..]));
        }
        assert_eq!(stored[0], 1);
    }
}
