//! A branch's hint of how long each child's slot is (format version 2), so that a read of a
//! child that misses the cache asks the disk for that slot and not for a whole page's worth.
//!
//! Before the hint, a miss in a file larger than memory read `max_page_size` plus a slot
//! header from the child's offset (8,216 bytes with the default page size), since a slot's
//! length is in its header: three 4 KiB pages of the kernel's cache for leaves of about
//! 5.3 KB, where RocksDB reads two (8M records under 512 MiB: 12 KiB a miss against 8).
//!
//! Child offsets are multiples of `SLOT_ALIGN` (16), so a branch of format version 2 keeps the
//! hint in the low 4 bits of each child reference, at no cost in bytes. 0 says nothing: every
//! reference of a version 1 file, and a slot longer than 15 units. `c` in 1..=15 says that the
//! slot's header and stored bytes take at most `c` units, a unit being a fifteenth of a full
//! page's slot (its header and `max_page_size`), rounded up to `SLOT_ALIGN`: within 560 bytes
//! for the default page size. A hint only sizes a read. A slot longer than its hint is read to
//! its end by a second read, as a slot longer than a page always was, so a wrong hint (a
//! damaged branch that still passes its checksum) costs a read, never a record.

use super::format::{SLOT_ALIGN, SLOT_HEADER_SIZE};

/// The largest hint: the 4 bits below `SLOT_ALIGN`.
const MAX_CLASS: u64 = SLOT_ALIGN - 1;

/// What a branch says of one child's slot length: nothing (`UNKNOWN`), or at most so many
/// units of its file (`HintUnit`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SlotHint(u8);

impl SlotHint {
    /// No hint: a version 1 file's child, a page not yet written, or a slot beyond 15 units.
    pub const UNKNOWN: SlotHint = SlotHint(0);

    /// The child reference stored for `offset` (a multiple of `SLOT_ALIGN`) with this hint.
    pub fn stored_with(self, offset: u64) -> u64 {
        debug_assert!(offset.is_multiple_of(SLOT_ALIGN), "child offset {offset} is not slot-aligned");
        offset | u64::from(self.0)
    }

    /// Splits a stored child reference into its offset and hint.
    pub fn split(reference: u64) -> (u64, SlotHint) {
        // `MAX_CLASS` is below 16: the cast keeps every bit.
        (reference & !MAX_CLASS, SlotHint((reference & MAX_CLASS) as u8))
    }
}

/// The unit of a file's hints, from its `max_page_size` (fixed at creation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HintUnit(u64);

impl HintUnit {
    pub fn for_page_size(max_page_size: u32) -> HintUnit {
        let full_slot = SLOT_HEADER_SIZE as u64 + u64::from(max_page_size);
        HintUnit(full_slot.div_ceil(MAX_CLASS).next_multiple_of(SLOT_ALIGN))
    }

    /// The hint for a slot whose header and stored bytes take `content_len` bytes.
    pub fn hint(self, content_len: u64) -> SlotHint {
        match content_len.div_ceil(self.0) {
            // Within 1..=15 by the guard: the cast keeps every bit.
            class @ 1..=MAX_CLASS => SlotHint(class as u8),
            _ => SlotHint::UNKNOWN,
        }
    }

    /// The bytes to read for a slot with `hint`: None when the hint says nothing.
    pub fn read_len(self, hint: SlotHint) -> Option<u64> {
        (hint != SlotHint::UNKNOWN).then(|| u64::from(hint.0) * self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// A hint covers its slot (a read of `read_len` bytes holds the header and stored
        /// bytes), over-reads by less than a unit, survives the round trip through a stored
        /// reference, and says nothing only beyond 15 units.
        #[test]
        fn a_hint_covers_its_slot_and_round_trips(page_size in 64u32..(1 << 20), content in 1u64..(2 << 20), slot in 16u64..(1 << 40)) {
            let unit = HintUnit::for_page_size(page_size);
            let offset = slot * SLOT_ALIGN;
            let hint = unit.hint(content);
            match unit.read_len(hint) {
                Some(len) => {
                    prop_assert!(len >= content && len < content + unit.0);
                }
                None => prop_assert!(content > MAX_CLASS * unit.0),
            }
            prop_assert_eq!(SlotHint::split(hint.stored_with(offset)), (offset, hint));
            // A full page's slot always has a hint.
            prop_assert!(unit.read_len(unit.hint(SLOT_HEADER_SIZE as u64 + u64::from(page_size))).is_some());
        }
    }

    #[test]
    fn the_default_page_size_reads_within_560_bytes() {
        let unit = HintUnit::for_page_size(8192);
        assert_eq!(unit.0, 560);
        assert_eq!(unit.read_len(unit.hint(5_300)), Some(5_600));
        assert_eq!(unit.read_len(SlotHint::UNKNOWN), None);
    }
}
