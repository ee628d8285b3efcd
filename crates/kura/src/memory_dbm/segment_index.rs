//! SegCacheDbm's hash index of one slot: 8 bytes a record, where the record itself lives in a
//! segment (`segments.rs`). Each entry packs 31 bits of the key's hash (a tag that settles
//! almost every mismatch without reading the record), the record's reference bit (set by a
//! hit, cleared when eviction gives the record its second chance) and the record's 32-bit
//! location in the slot's segments.
//!
//! Open addressing with linear probing; an entry's home is the multiply-shift of its tag over
//! the capacity, so the capacity needs no power of two and grows by a quarter at a time
//! (between 0.7 and 0.875 load once grown: 9.1 to 11.4 bytes a record). Removal shifts the
//! entries after it back (no tombstones), which keeps probe lengths as if nothing had ever
//! been removed.

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

const EMPTY: u64 = u64::MAX;
const REFERENCED: u64 = 1 << 32;
/// Largest load before growing: numerator and denominator.
const MAX_LOAD: (usize, usize) = (7, 8);
/// The capacity of a new index.
const MIN_CAPACITY: usize = 16;
/// Bytes an entry takes, for memory accounting.
pub const ENTRY_BYTES: usize = std::mem::size_of::<u64>();

/// The 31 bits of a key's hash the index keeps: the low half (the high half picks the slot,
/// see `key_hash.rs`), less one bit for the reference bit.
#[inline]
pub fn tag_of(hash: u64) -> u32 {
    (hash as u32) >> 1
}

#[inline]
fn entry(tag: u32, location: Location, referenced: bool) -> u64 {
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
    entries: Box<[u64]>,
    len: usize,
}

impl SegmentIndex {
    pub fn new() -> SegmentIndex {
        SegmentIndex { entries: vec![EMPTY; MIN_CAPACITY].into_boxed_slice(), len: 0 }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn bytes(&self) -> usize {
        self.entries.len() * ENTRY_BYTES
    }

    /// The bytes the index takes once grown for one more record than now (as now if it
    /// needs no growth).
    pub fn bytes_for_one_more(&self) -> usize {
        if self.has_room() {
            self.bytes()
        } else {
            grown(self.entries.len()) * ENTRY_BYTES
        }
    }

    /// Whether one more entry fits without growing.
    pub fn has_room(&self) -> bool {
        let (numerator, denominator) = MAX_LOAD;
        (self.len + 1) * denominator <= self.entries.len() * numerator
    }

    #[inline]
    fn home(&self, tag: u32) -> usize {
        ((u64::from(tag) * self.entries.len() as u64) >> 31) as usize
    }

    #[inline]
    fn next(&self, position: usize) -> usize {
        if position + 1 == self.entries.len() {
            0
        } else {
            position + 1
        }
    }

    #[inline]
    fn at(&self, position: usize) -> u64 {
        self.entries.get(position).copied().unwrap_or(EMPTY)
    }

    fn put(&mut self, position: usize, value: u64) {
        if let Some(slot) = self.entries.get_mut(position) {
            *slot = value;
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
        let capacity = self.entries.len();
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
        let larger = vec![EMPTY; grown(self.entries.len())].into_boxed_slice();
        let old = std::mem::replace(&mut self.entries, larger);
        for value in old.iter().copied().filter(|&value| value != EMPTY) {
            self.insert_unchecked(value);
        }
    }

    /// Empties the index, keeping its capacity.
    pub fn clear(&mut self) {
        self.entries.fill(EMPTY);
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
            let tag = ((r >> 20) % 50) as u32 * 0x0100_0000;
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
