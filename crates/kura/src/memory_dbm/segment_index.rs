//! SegCacheDbm's hash index of one slot: 7 bytes an entry, where the record itself lives in a
//! segment (`segments.rs`). Each entry packs 23 bits of the key's hash (a tag that settles
//! all but one mismatch in 8 million without reading the record), the record's reference bit
//! (set by a hit, cleared when eviction gives the record its second chance) and the record's
//! 32-bit location in the slot's segments: 56 bits, stored end to end in a byte array.
//!
//! Open addressing with linear probing; an entry's home is the multiply-shift of its tag over
//! the capacity, so the capacity needs no power of two and grows by a quarter at a time
//! (between 0.7 and 0.875 load once grown: 8.0 to 10.0 bytes a record), and growing needs the
//! entries only, never the records' keys. Removal shifts the entries after it back (no
//! tombstones), which keeps probe lengths as if nothing had ever been removed.
//!
//! Why 7 bytes and 23 bits: the served cache's memory per item was index 9.2 bytes of about
//! 127 (issue 42's 1M items of a 10-byte key and a 100-byte value). An entry of 6 bytes (a
//! 9-bit tag) saved twice as much, but its tag could not give an entry's home back, so every
//! growth read every live record's key from the segments, which halved the rate of sets of
//! new keys. 23 bits still place a home in a capacity of 8 million entries a slot.

/// A record's place in its slot's segments: segment id in the high bits, byte offset in the
/// low `OFFSET_BITS`. `Location::NONE`'s bits never name a record (its segment id is
/// reserved), which lets an entry of all ones mean "empty".
#[derive(Clone, Copy, PartialEq, Eq, Debug, PartialOrd, Ord)]
pub struct Location(u32);

/// Bits of a location that hold the offset in a segment: a standard segment holds at most
/// `1 << OFFSET_BITS` bytes (1 MiB).
pub const OFFSET_BITS: u32 = 20;
/// Segment ids a slot can use: all but the last, which `EMPTY` reserves.
pub const MAX_SEGMENTS: usize = (1 << (32 - OFFSET_BITS)) - 1;

impl Location {
    /// The location of `offset` in segment `segment`; None if either is out of range.
    pub fn new(segment: usize, offset: usize) -> Option<Location> {
        if segment >= MAX_SEGMENTS || offset >= 1 << OFFSET_BITS {
            return None;
        }
        Some(Location(((segment as u32) << OFFSET_BITS) | offset as u32))
    }

    pub fn segment(self) -> usize {
        (self.0 >> OFFSET_BITS) as usize
    }

    pub fn offset(self) -> usize {
        (self.0 & ((1 << OFFSET_BITS) - 1)) as usize
    }

    /// The location as the cursor's hint (`slotted.rs`).
    pub fn raw(self) -> u32 {
        self.0
    }

    /// A hint back to a location; None for bits no record can have.
    pub fn from_raw(raw: u32) -> Option<Location> {
        let location = Location(raw);
        (location.segment() < MAX_SEGMENTS).then_some(location)
    }
}

/// Bits of an entry: tag, reference bit, location.
const ENTRY_BITS: u32 = 56;
/// Bits of a key's hash an entry keeps.
const TAG_BITS: u32 = ENTRY_BITS - 33;
const ENTRY_MASK: u64 = (1 << ENTRY_BITS) - 1;
/// An entry of all ones: its location's segment id is the one `Location` reserves.
const EMPTY: u64 = ENTRY_MASK;
const REFERENCED: u64 = 1 << 32;
/// Largest load before growing: numerator and denominator.
const MAX_LOAD: (usize, usize) = (7, 8);
/// The capacity of a new index.
const MIN_CAPACITY: usize = 16;
/// Bytes an entry takes.
pub const ENTRY_BYTES: usize = (ENTRY_BITS / 8) as usize;
/// Bytes after the last entry, so that each entry is read and written as one unaligned
/// 8-byte word.
const PAD_BYTES: usize = 8 - ENTRY_BYTES;

/// The 23 bits of a key's hash the index keeps: from the low half (the high half picks the
/// slot, see `key_hash.rs`).
#[inline]
pub fn tag_of(hash: u64) -> u32 {
    (hash as u32) >> (32 - TAG_BITS)
}

#[inline]
fn entry(tag: u32, location: Location, referenced: bool) -> u64 {
    debug_assert!(tag < 1 << TAG_BITS, "a tag of {TAG_BITS} bits (tag_of)");
    (u64::from(tag) << 33) | if referenced { REFERENCED } else { 0 } | u64::from(location.0)
}

#[inline]
fn entry_tag(entry: u64) -> u32 {
    (entry >> 33) as u32
}

#[inline]
fn entry_location(entry: u64) -> Location {
    Location(entry as u32)
}

/// Invariants: `len` entries are not EMPTY; each non-empty entry is reachable from its home by
/// probing over non-empty entries only; no two entries hold the same location.
pub struct SegmentIndex {
    /// `capacity` entries of `ENTRY_BYTES` little-endian bytes each, then `PAD_BYTES`.
    entries: Box<[u8]>,
    capacity: usize,
    len: usize,
}

/// A table of `capacity` empty entries.
fn empty_table(capacity: usize) -> Box<[u8]> {
    // Every bit of an empty entry is set, and the pad's bits are never read.
    vec![0xFF; capacity * ENTRY_BYTES + PAD_BYTES].into_boxed_slice()
}

impl SegmentIndex {
    pub fn new() -> SegmentIndex {
        SegmentIndex { entries: empty_table(MIN_CAPACITY), capacity: MIN_CAPACITY, len: 0 }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    /// The bytes the table takes, pad included.
    pub fn bytes(&self) -> usize {
        self.entries.len()
    }

    /// The bytes the index takes once grown for one more record than now (as now if it
    /// needs no growth).
    pub fn bytes_for_one_more(&self) -> usize {
        if self.has_room() {
            self.bytes()
        } else {
            grown(self.capacity) * ENTRY_BYTES + PAD_BYTES
        }
    }

    /// Whether one more entry fits without growing.
    pub fn has_room(&self) -> bool {
        let (numerator, denominator) = MAX_LOAD;
        (self.len + 1) * denominator <= self.capacity * numerator
    }

    #[inline]
    fn home(&self, tag: u32) -> usize {
        ((u64::from(tag) * self.capacity as u64) >> TAG_BITS) as usize
    }

    #[inline]
    fn next(&self, position: usize) -> usize {
        if position + 1 == self.capacity {
            0
        } else {
            position + 1
        }
    }

    /// Entry `position`; EMPTY past the capacity (never asked for).
    #[inline]
    fn at(&self, position: usize) -> u64 {
        let start = position * ENTRY_BYTES;
        // Past the last entry the word runs beyond the pad: `get` refuses it.
        match self.entries.get(start..start + 8).and_then(|word| <[u8; 8]>::try_from(word).ok()) {
            Some(word) => u64::from_le_bytes(word) & ENTRY_MASK,
            None => EMPTY,
        }
    }

    /// Writes entry `position` as one 8-byte word, its last byte (the next entry's first, or
    /// the pad) written back as it was.
    fn put(&mut self, position: usize, value: u64) {
        let start = position * ENTRY_BYTES;
        if let Some(word) = self.entries.get_mut(start..start + 8) {
            let old = <[u8; 8]>::try_from(&*word).map_or(0, u64::from_le_bytes);
            word.copy_from_slice(&((old & !ENTRY_MASK) | (value & ENTRY_MASK)).to_le_bytes());
        }
    }

    /// The position of the entry whose tag is `tag` and whose record `is_key` accepts.
    #[inline]
    pub fn find(&self, tag: u32, mut is_key: impl FnMut(Location) -> bool) -> Option<Position> {
        let mut position = self.home(tag);
        loop {
            let found = self.at(position);
            if found == EMPTY {
                return None;
            }
            if entry_tag(found) == tag && is_key(entry_location(found)) {
                return Some(Position(position));
            }
            position = self.next(position);
        }
    }

    /// The position of the entry that holds `location` (whose key has `tag`).
    pub fn find_location(&self, tag: u32, location: Location) -> Option<Position> {
        self.find(tag, |at| at == location)
    }

    pub fn location(&self, position: Position) -> Location {
        entry_location(self.at(position.0))
    }

    pub fn is_referenced(&self, position: Position) -> bool {
        self.at(position.0) & REFERENCED != 0
    }

    /// Sets the reference bit, writing the entry only if it was clear: a hit on a record
    /// already referenced writes nothing.
    #[inline]
    pub fn reference(&mut self, position: Position) {
        let current = self.at(position.0);
        if current & REFERENCED == 0 {
            self.put(position.0, current | REFERENCED);
        }
    }

    /// Points the entry at `location`, with the reference bit as given.
    pub fn relocate(&mut self, position: Position, location: Location, referenced: bool) {
        let current = self.at(position.0);
        self.put(position.0, entry(entry_tag(current), location, referenced));
    }

    /// Adds an entry (the key must not be in the index). The caller checked `has_room` or
    /// grew the index.
    pub fn insert(&mut self, tag: u32, location: Location, referenced: bool) {
        if !self.has_room() {
            self.grow();
        }
        self.insert_unchecked(entry(tag, location, referenced));
        self.len += 1;
    }

    fn insert_unchecked(&mut self, value: u64) {
        let mut position = self.home(entry_tag(value));
        while self.at(position) != EMPTY {
            position = self.next(position);
        }
        self.put(position, value);
    }

    /// Takes the entry at `position` out, shifting back the entries after it that may move.
    pub fn remove(&mut self, position: Position) {
        let mut hole = position.0;
        self.put(hole, EMPTY);
        self.len -= 1;
        let capacity = self.capacity;
        let mut scan = self.next(hole);
        loop {
            let moving = self.at(scan);
            if moving == EMPTY {
                return;
            }
            let home = self.home(entry_tag(moving));
            // The entry may fill the hole if the hole lies on its probe path: between its home
            // and where it is now, cyclically.
            let from_home = (scan + capacity - home) % capacity;
            let from_hole = (scan + capacity - hole) % capacity;
            if from_home >= from_hole {
                self.put(hole, moving);
                self.put(scan, EMPTY);
                hole = scan;
            }
            scan = self.next(scan);
        }
    }

    /// Grows the table by a quarter, rehashing every entry.
    pub fn grow(&mut self) {
        let old = std::mem::replace(&mut self.entries, empty_table(grown(self.capacity)));
        self.capacity = grown(self.capacity);
        for bytes in old.chunks_exact(ENTRY_BYTES) {
            let mut word = [0; 8];
            word.get_mut(..ENTRY_BYTES).unwrap_or_default().copy_from_slice(bytes);
            let value = u64::from_le_bytes(word);
            if value != EMPTY {
                self.insert_unchecked(value);
            }
        }
    }

    /// Empties the index, keeping its capacity.
    pub fn clear(&mut self) {
        self.entries.fill(0xFF);
        self.len = 0;
    }
}

fn grown(capacity: usize) -> usize {
    capacity + capacity / 4
}

/// Where an entry is in the index, valid until the index changes.
#[derive(Clone, Copy, Debug)]
pub struct Position(usize);

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use super::*;
    use std::collections::HashMap;

    /// Random inserts, removes and relocations against a map; tags are drawn from a small
    /// range so that probe chains collide and wrap, and removals shift entries back.
    #[test]
    fn matches_a_map() {
        let mut index = SegmentIndex::new();
        let mut model: HashMap<u32, (u32, bool)> = HashMap::new(); // location -> (tag, referenced)
        let mut rng = crate::split_mix::SplitMix64::new(42);
        for step in 0..20_000u32 {
            let r = rng.next_u64();
            let location = Location::new((r % 7) as usize, ((r >> 8) % 300) as usize).unwrap();
            let tag = ((r >> 20) % 50) as u32 * ((1 << TAG_BITS) / 50);
            match (r >> 40) % 4 {
                0 | 1 if !model.contains_key(&location.raw()) => {
                    let referenced = step % 3 == 0;
                    index.insert(tag, location, referenced);
                    model.insert(location.raw(), (tag, referenced));
                }
                2 => {
                    if let Some((tag, _)) = model.remove(&location.raw()) {
                        let position = index.find_location(tag, location).unwrap();
                        index.remove(position);
                    }
                }
                _ => {
                    if let Some((tag, referenced)) = model.get_mut(&location.raw()) {
                        let position = index.find_location(*tag, location).unwrap();
                        assert_eq!(index.is_referenced(position), *referenced);
                        index.reference(position);
                        *referenced = true;
                    }
                }
            }
            assert_eq!(index.len(), model.len());
            if step % 512 == 0 {
                for (&raw, &(tag, referenced)) in &model {
                    let location = Location::from_raw(raw).unwrap();
                    let position = index.find_location(tag, location).unwrap();
                    assert_eq!(index.location(position), location);
                    assert_eq!(index.is_referenced(position), referenced);
                }
                assert!(index.len() * 8 <= index.bytes() / ENTRY_BYTES * 7);
            }
        }
    }
}
