//! The item format: how one memcached item is kept as a Kura value.
//!
//! The key is the record's key; the value is a header followed by the data. Items are
//! written in layout 2, whose header holds only the fields that are not zero:
//!
//! | size | field                                                                       |
//! |------|-----------------------------------------------------------------------------|
//! | 1    | bits 0-2: flags, expiry, CAS present; bits 3-5: 0b100 (layout 2); bit 6: stale; bit 7: win sent |
//! | 0-5  | client flags, varint (if present)                                           |
//! | 0-5  | expiry, varint Unix seconds (if present; absent: never; 1: expired)         |
//! | 0-10 | CAS unique, varint (if present; absent: 0, none given yet)                  |
//! | n    | the data, as the client sent it                                             |
//!
//! A plain `set` (no flags, no expiry) costs 1 byte: its CAS unique is given, and stored, only
//! when a reply first shows it (`store.rs`, CAS uniques on demand), where layout 1 took 17
//! bytes and an eager unique 3 more for the first two million writes. Layout 1, still
//! read: byte 0 bits 0-5 = 1 (stale and win bits as above), then flags (4 bytes), expiry (4)
//! and CAS (8), big-endian.
//!
//! Bit 6 marks an item invalidated by `md I` or `ms I` (stale: meta gets answer `X`), bit 7
//! one whose win token was handed out (meta gets answer `Z`, not `W`). A server older than
//! layout 2 sees a version other than 1 and treats the item as foreign (absent), as it does
//! for anything it cannot read.
//!
//! Keeping all of it inside the value makes every engine a memcached store with no change
//! to the engine, and a served file carries flags, expiry and CAS across restarts.

use kura::{decode_varint, put_varint, varint_len, Error, Result};

/// The layout-1 version byte (bits 0-5), still read.
pub const VERSION_1: u8 = 1;
/// Bits 3-5 of byte 0 in a layout-2 item.
const LAYOUT_2: u8 = 0x20;
/// Bits 3-5 of byte 0: which layout.
const LAYOUT_BITS: u8 = 0x38;
const HAS_FLAGS: u8 = 0x01;
const HAS_EXPIRY: u8 = 0x02;
const HAS_CAS: u8 = 0x04;

/// Bit of byte 0: the item is stale (invalidated, kept for the one client that wins the
/// right to recompute it).
const STALE: u8 = 0x40;
/// Bit of byte 0: a win token (`W`) was handed out for the item.
const WIN_SENT: u8 = 0x80;
/// The bits of byte 0 that hold the format version.
const VERSION_BITS: u8 = 0x3F;

/// Bytes before the data in a layout-1 item.
const HEADER_1_LEN: usize = 17;

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

impl Header {
    /// Byte 0 of the item in layout 2.
    fn first_byte(self) -> u8 {
        let bit = |set: bool, bit: u8| if set { bit } else { 0 };
        LAYOUT_2
            | bit(self.flags != 0, HAS_FLAGS)
            | bit(self.expiry != 0, HAS_EXPIRY)
            | bit(self.cas != 0, HAS_CAS)
            | bit(self.stale, STALE)
            | bit(self.win_sent, WIN_SENT)
    }

    /// The bytes the header takes in layout 2.
    pub fn encoded_len(self) -> usize {
        let varint = |present: bool, value: u64| if present { varint_len(value) } else { 0 };
        1 + varint(self.flags != 0, u64::from(self.flags))
            + varint(self.expiry != 0, u64::from(self.expiry))
            + varint(self.cas != 0, self.cas)
    }
}

/// An item's stored bytes: the header, then the data in `parts` joined (append and prepend
/// join two parts without an intermediate copy).
pub fn encode(header: Header, parts: &[&[u8]]) -> Vec<u8> {
    let data_len: usize = parts.iter().map(|p| p.len()).sum();
    let mut stored = Vec::with_capacity(header.encoded_len() + data_len);
    stored.push(header.first_byte());
    for (present, value) in [
        (header.flags != 0, u64::from(header.flags)),
        (header.expiry != 0, u64::from(header.expiry)),
        (header.cas != 0, header.cas),
    ] {
        if present {
            put_varint(&mut stored, value);
        }
    }
    for part in parts {
        stored.extend_from_slice(part);
    }
    stored
}

/// The header and data of stored bytes; a BrokenData error for bytes this format did not
/// write (too short, another version, a field out of range), which the server then treats
/// as no item.
pub fn decode(stored: &[u8]) -> Result<(Header, &[u8])> {
    let Some((&first, rest)) = stored.split_first() else {
        return Err(Error::broken("an item needs a header, the value is empty"));
    };
    let state = |header: Header| Header { stale: first & STALE != 0, win_sent: first & WIN_SENT != 0, ..header };
    if first & VERSION_BITS == VERSION_1 {
        let (head, data) = stored.split_first_chunk::<HEADER_1_LEN>().ok_or_else(|| {
            Error::broken(format!("a layout-1 item needs {HEADER_1_LEN} header bytes, the value has {}", stored.len()))
        })?;
        let [_, f0, f1, f2, f3, e0, e1, e2, e3, c0, c1, c2, c3, c4, c5, c6, c7] = *head;
        let header = Header {
            flags: u32::from_be_bytes([f0, f1, f2, f3]),
            expiry: u32::from_be_bytes([e0, e1, e2, e3]),
            cas: u64::from_be_bytes([c0, c1, c2, c3, c4, c5, c6, c7]),
            ..Header::default()
        };
        return Ok((state(header), data));
    }
    if first & LAYOUT_BITS != LAYOUT_2 {
        return Err(Error::broken(format!("item format version {} is neither 1 nor layout 2", first & VERSION_BITS)));
    }
    let mut data = rest;
    let mut field = |present: u8| -> Result<u64> {
        if first & present == 0 {
            return Ok(0);
        }
        let (value, used) = decode_varint(data).ok_or_else(|| Error::broken("an item header field is truncated"))?;
        data = data.get(used..).unwrap_or_default();
        Ok(value)
    };
    let out_of_range = |_| Error::broken("an item header field is out of range");
    let flags = u32::try_from(field(HAS_FLAGS)?).map_err(out_of_range)?;
    let expiry = u32::try_from(field(HAS_EXPIRY)?).map_err(out_of_range)?;
    let cas = field(HAS_CAS)?;
    Ok((state(Header { flags, expiry, cas, ..Header::default() }), data))
}

#[cfg(test)]
mod tests {
    #![expect(
        clippy::unwrap_used,
        clippy::indexing_slicing,
        reason = "a test fails loudly on the first broken expectation"
    )]
    use super::*;

    /// A layout-1 item as servers before layout 2 wrote it.
    fn layout_1(header: Header, data: &[u8]) -> Vec<u8> {
        let mut stored =
            vec![VERSION_1 | if header.stale { STALE } else { 0 } | if header.win_sent { WIN_SENT } else { 0 }];
        stored.extend_from_slice(&header.flags.to_be_bytes());
        stored.extend_from_slice(&header.expiry.to_be_bytes());
        stored.extend_from_slice(&header.cas.to_be_bytes());
        stored.extend_from_slice(data);
        stored
    }

    #[test]
    fn items_round_trip_and_foreign_values_are_refused() {
        let mut rng = kura::split_mix::SplitMix64::new(7);
        for _ in 0..2_000 {
            let r = rng.next_u64();
            let pick = |shift: u32, value: u64| if (r >> shift) & 3 == 0 { 0 } else { value };
            let header = Header {
                flags: pick(0, r >> 40) as u32,
                expiry: pick(2, (r >> 8) as u32 as u64) as u32,
                cas: pick(4, r.rotate_left(17)),
                stale: r & 0x100 != 0,
                win_sent: r & 0x200 != 0,
            };
            let data = vec![(r >> 3) as u8; (r % 40) as usize];
            let stored = encode(header, &[&data[..data.len() / 2], &data[data.len() / 2..]]);
            assert_eq!(stored.len(), header.encoded_len() + data.len());
            assert_eq!(decode(&stored).unwrap(), (header, &data[..]));
            assert_eq!(decode(&layout_1(header, &data)).unwrap(), (header, &data[..]), "layout 1 still reads");
            for cut in 0..header.encoded_len() {
                assert!(decode(&stored[..cut]).is_err(), "a header cut at {cut} bytes");
            }
        }
        // A plain set: no flags or expiry, a CAS of a few million: the header is 4 bytes.
        assert_eq!(Header { cas: 1_500_000, ..Header::default() }.encoded_len(), 4);
        assert!(decode(b"").is_err());
        assert!(decode(&[0x02, 1, 2]).is_err(), "neither layout");
        assert!(decode(&layout_1(Header::default(), b"")[..16]).is_err(), "a short layout-1 header");
        // An expiry wider than 32 bits is refused, not wrapped.
        let mut wide = vec![LAYOUT_2 | HAS_EXPIRY];
        put_varint(&mut wide, 1 << 33);
        assert!(decode(&wide).is_err());
    }
}
