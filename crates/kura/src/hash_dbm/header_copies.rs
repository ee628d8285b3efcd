//! Which of a HashDbm file's two header copies an open takes, and what it found of the other.
//!
//! Format version 4 keeps the header at 0 and a copy at `COPY_OFFSET` (header.rs writes both
//! with one `pwrite`). The header at 0 is taken when it passes its check, else the copy; what
//! was found is kept (`Copies`) so that `inspect` shows it, `check` reports it and a restore
//! notes it, though the file opened: the next damage there would cost the file.

use super::header::{Header, COPIES_BYTES, COPY_AT, COPY_OFFSET, HEADER_BYTES, MAGIC};
use crate::error::{Error, Result};

/// What an open found of a file's header copies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Copies {
    /// A file before version 4: it has one header.
    One,
    /// Both copies intact and equal.
    Intact,
    /// The header at 0 failed its check (why); the copy at `COPY_OFFSET` was used.
    FirstDamaged(String),
    /// The copy at `COPY_OFFSET` failed its check (why); the header at 0 was used.
    CopyDamaged(String),
    /// Both pass their checks but differ: a write of the two cut between their sectors (a
    /// power loss); the header at 0, written first, was used.
    Differ,
}

impl Copies {
    /// Whether a copy is damaged or stale: what a check reports and a writable open repairs.
    pub fn is_damaged(&self) -> bool {
        !matches!(self, Copies::One | Copies::Intact)
    }

    /// One word for `inspect`: `none`, `first`, `copy` or `differ`.
    pub fn damage_name(&self) -> &'static str {
        match self {
            Copies::One | Copies::Intact => "none",
            Copies::FirstDamaged(_) => "first",
            Copies::CopyDamaged(_) => "copy",
            Copies::Differ => "differ",
        }
    }

    /// What was found, for people (a check's problem, a restore's note); None when nothing.
    pub fn describe(&self) -> Option<String> {
        match self {
            Copies::One | Copies::Intact => None,
            Copies::FirstDamaged(why) => {
                Some(format!("the header at 0 failed its check ({why}); its copy at {COPY_OFFSET} was used"))
            }
            Copies::CopyDamaged(why) => {
                Some(format!("the header copy at {COPY_OFFSET} failed its check ({why}); the header at 0 was used"))
            }
            Copies::Differ => Some(format!(
                "the header copy at {COPY_OFFSET} differs from the header at 0 (a header write cut short); \
                 the header at 0 was used"
            )),
        }
    }
}

/// The header of a file whose first bytes are `bytes` (up to `COPIES_BYTES` of them, fewer
/// in a short file), without checking it against the file's length: the header at 0 when it
/// passes its check, else a version 4 copy at `COPY_OFFSET` that passes its own. The error,
/// when neither does, is the header at 0's (saying that the copy failed too, for a file that
/// has one).
pub fn read_copies(bytes: &[u8]) -> Result<(Header, Copies)> {
    let copy_bytes = bytes.get(COPY_AT..COPIES_BYTES);
    let copy = || copy_bytes.ok_or_else(|| Error::broken("absent")).and_then(Header::decode_fields);
    match Header::decode_fields(bytes) {
        Ok(header) if !header.has_copy() => Ok((header, Copies::One)),
        Ok(header) => {
            let copies = match copy() {
                Ok(_) if copy_bytes == bytes.get(..HEADER_BYTES) => Copies::Intact,
                Ok(_) => Copies::Differ,
                Err(why) => Copies::CopyDamaged(why.message().to_string()),
            };
            Ok((header, copies))
        }
        Err(first) => match copy() {
            Ok(header) if header.has_copy() => Ok((header, Copies::FirstDamaged(first.message().to_string()))),
            _ if copy_bytes.is_some_and(|c| c.starts_with(MAGIC)) => {
                Err(Error::broken(format!("{} (and its copy at {COPY_OFFSET} fails its check too)", first.message())))
            }
            _ => Err(first),
        },
    }
}

#[cfg(test)]
mod tests {
    #![expect(
        clippy::unwrap_used,
        clippy::indexing_slicing,
        reason = "a test fails loudly on the first broken expectation"
    )]
    use super::*;
    use crate::hash_dbm::header::{sample, FORMAT_VERSION_WIDE_CHECKS};

    /// Both copies of `header` as a file's first bytes, up to `COPIES_BYTES`.
    fn head_of(header: &Header) -> Vec<u8> {
        header.encode_copies()[..COPIES_BYTES].to_vec()
    }

    #[test]
    fn either_copy_serves_when_the_other_fails_its_check() {
        let header = sample();
        let head = head_of(&header);
        assert_eq!(read_copies(&head).unwrap(), (header.clone(), Copies::Intact));
        for at in (0..HEADER_BYTES).chain(COPY_AT..COPIES_BYTES) {
            for damage in [0x01u8, 0x80, 0xff] {
                let mut broken = head.clone();
                broken[at] ^= damage;
                let (found, copies) = read_copies(&broken).unwrap();
                assert_eq!(found, header, "byte {at} ^ {damage:#x}");
                let expected = if at < HEADER_BYTES { "first" } else { "copy" };
                assert_eq!(copies.damage_name(), expected, "byte {at} ^ {damage:#x}");
                assert!(copies.is_damaged() && copies.describe().is_some());
            }
        }
        // Each copy zeroed whole.
        for range in [0..HEADER_BYTES, COPY_AT..COPIES_BYTES] {
            let mut zeroed = head.clone();
            zeroed[range.clone()].fill(0);
            assert_eq!(read_copies(&zeroed).unwrap().0, header, "{range:?} zeroed");
        }
        // The bytes between the copies are not read.
        let mut between = head.clone();
        between[HEADER_BYTES..COPY_AT].fill(0xa5);
        assert_eq!(read_copies(&between).unwrap(), (header.clone(), Copies::Intact));
    }

    #[test]
    fn both_copies_damaged_is_an_error_that_says_so() {
        let mut head = head_of(&sample());
        head[40] ^= 1;
        head[COPY_AT + 40] ^= 1;
        let message = read_copies(&head).unwrap_err().to_string();
        assert!(message.contains("checksum") && message.contains("copy at 512"), "{message}");
        // A file cut inside its copy has the header at 0 only.
        let short = &head_of(&sample())[..COPY_AT + 50];
        assert_eq!(read_copies(short).unwrap().1.damage_name(), "copy");
    }

    #[test]
    fn copies_that_differ_take_the_first() {
        let first = sample();
        let older = Header { closed_cleanly: false, record_count: 2, ..sample() };
        let mut head = head_of(&first);
        head[COPY_AT..].copy_from_slice(&older.encode());
        assert_eq!(read_copies(&head).unwrap(), (first, Copies::Differ));
        // With the first damaged, the copy is what there is.
        head[3] ^= 4;
        assert_eq!(read_copies(&head).unwrap().0, older);
    }

    #[test]
    fn a_file_before_version_4_has_one_header_and_no_copy_to_fall_back_on() {
        let v3 = Header { version: FORMAT_VERSION_WIDE_CHECKS, ..sample() };
        // Its bytes 512..640 are bucket entries: whatever they hold, they are no header.
        let mut head = v3.encode().to_vec();
        head.resize(COPIES_BYTES, 7);
        assert_eq!(read_copies(&head).unwrap(), (v3.clone(), Copies::One));
        head[20] ^= 1;
        assert!(read_copies(&head).is_err());
        // Nor is a version 3 header that a copy's place happens to hold.
        head[COPY_AT..].copy_from_slice(&v3.encode());
        assert!(read_copies(&head).is_err());
    }
}
