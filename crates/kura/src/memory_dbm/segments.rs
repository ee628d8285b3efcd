//! SegCacheDbm's record storage of one slot: records appended end to end into large segments
//! (one allocation per segment, none per record), kept in the order they filled up so that
//! eviction can take the oldest segment first.
//!
//! A record in a segment is `head:varint value_len:varint [expiry:u32le] key value`, where
//! `head` is the key length shifted left by one, its low bit set when the record carries the
//! Unix second it expires at (`Dbm::process_expiring`): a record without expiry costs nothing
//! more than before for keys under 64 bytes, one with it 4 bytes. A segment's `used`
//! bytes are records, some of them dead (overwritten or removed: the index no longer points
//! at them); `live` counts the bytes of the live ones, and a segment other than an active
//! one whose live bytes fall to zero is freed at once. A segment also keeps the second by
//! which every record written to it since its last compaction has expired (`expired_by`),
//! so that a segment holding only expired records is found without reading them, and
//! reclaimed before any segment holding a live one (`take_expired`). There are two active
//! segments, one for records that never expire and one for records that do, so that the
//! latter fill segments of their own that expire as a whole (a coarse form of Segcache's
//! segments grouped by TTL). Compaction rewrites one segment in place, keeping the records its caller keeps, moved towards the start (offsets only
//! decrease, so the move never overwrites a record not yet read).
//!
//! Standard segments are `segment_bytes` long; a record longer than that gets a segment of
//! its own, exactly its size, so every segment is at least `segment_bytes` long and a slot
//! of `cap` bytes has at most `cap / segment_bytes` of them.

use std::collections::VecDeque;

use super::segment_index::{Location, MAX_SEGMENTS};
use crate::encoding::{decode_varint, encode_varint, varint_len, MAX_VARINT_LEN};
use crate::error::{Error, ErrorKind};
use crate::expiry::Expiry;

/// The bytes of a record's expiry, when it has one.
const EXPIRY_BYTES: usize = size_of::<u32>();

/// The bytes a record of these lengths takes in a segment, with or without an expiry.
pub fn record_len(key_len: usize, value_len: usize, expiring: bool) -> usize {
    let head = (key_len as u64) << 1;
    varint_len(head) + varint_len(value_len as u64) + if expiring { EXPIRY_BYTES } else { 0 } + key_len + value_len
}

/// `Segment::expired_by` of a segment holding a record that never expires.
const NEVER: u64 = u64::MAX;

/// The second by which a record with this expiry has expired (`NEVER` without one).
fn expired_by(expiry: Option<Expiry>) -> u64 {
    expiry.map_or(NEVER, |expiry| u64::from(expiry.unix_seconds()))
}

/// Invariants: `used <= bytes.len()`; `bytes[..used]` is a sequence of whole records; `live
/// <= used` is the length of those the index points at; every record in `bytes[..used]` has
/// expired by the second `expired_by` (0 when there is none).
struct Segment {
    bytes: Box<[u8]>,
    used: usize,
    live: usize,
    expired_by: u64,
}

impl Segment {
    /// Whether it holds records and all of them have expired at `now`.
    fn all_expired(&self, now: u64) -> bool {
        self.used > 0 && self.expired_by != NEVER && self.expired_by <= now
    }
}

/// A record read from a segment.
pub struct StoredRecord<'a> {
    pub key: &'a [u8],
    pub value: &'a [u8],
    /// The second it expires at, if it does.
    pub expiry: Option<Expiry>,
    /// Its length in the segment (`record_len`).
    pub len: usize,
}

impl StoredRecord<'_> {
    /// Whether the record has expired at `now` (Unix seconds).
    pub fn has_expired(&self, now: u64) -> bool {
        self.expiry.is_some_and(|expiry| expiry.has_passed(now))
    }
}

/// Parses the record at the start of `bytes` (the used part of a segment from an offset on).
fn parse(bytes: &[u8]) -> Option<StoredRecord<'_>> {
    let (head, first) = decode_varint(bytes)?;
    let (value_len, second) = decode_varint(bytes.get(first..)?)?;
    let mut key_start = first + second;
    let mut expiry = None;
    if head & 1 != 0 {
        let seconds = bytes.get(key_start..key_start + EXPIRY_BYTES)?.try_into().ok().map(u32::from_le_bytes)?;
        // Appends write no expiry of 0 (`Expiry` cannot be 0): a zero is no record of ours.
        expiry = Some(Expiry::at_unix_seconds(u64::from(seconds))?);
        key_start += EXPIRY_BYTES;
    }
    let key_end = key_start.checked_add(usize::try_from(head >> 1).ok()?)?;
    let end = key_end.checked_add(usize::try_from(value_len).ok()?)?;
    Some(StoredRecord { key: bytes.get(key_start..key_end)?, value: bytes.get(key_end..end)?, expiry, len: end })
}

/// Room a write needs in a segment: `bytes` in the active segment of its class (`expiring`).
#[derive(Clone, Copy, Debug)]
pub struct Room {
    pub bytes: usize,
    pub expiring: bool,
}

/// Invariants: every segment id is in exactly one of: `active`, `filled`, `free_ids`, or
/// `segments[id]` is None and the id is in `free_ids`; `bytes` is the sum of the segments'
/// buffer lengths.
pub struct Segments {
    /// By id; None: a free id.
    segments: Vec<Option<Segment>>,
    free_ids: Vec<u16>,
    /// Segments no longer written, oldest first.
    filled: VecDeque<u16>,
    /// The segments new records go to: records that never expire to the first, records that
    /// expire to the second, so that a segment of the second kind can expire as a whole.
    active: [Option<u16>; 2],
    segment_bytes: usize,
    bytes: usize,
}

impl Segments {
    /// Storage of standard segments of `segment_bytes` (at most 1 MiB), with room reserved for
    /// the bookkeeping of `max_segments` of them.
    pub fn new(segment_bytes: usize, max_segments: usize) -> Segments {
        let max_segments = max_segments.min(MAX_SEGMENTS);
        Segments {
            segments: Vec::with_capacity(max_segments),
            free_ids: Vec::with_capacity(max_segments),
            filled: VecDeque::with_capacity(max_segments),
            active: [None; 2],
            segment_bytes,
            bytes: 0,
        }
    }

    pub fn segment_bytes(&self) -> usize {
        self.segment_bytes
    }

    /// Bytes of the segments' buffers.
    pub fn buffer_bytes(&self) -> usize {
        self.bytes
    }

    /// Bytes of the bookkeeping: the id table, the free list and the fill order, as allocated.
    pub fn bookkeeping_bytes(&self) -> usize {
        self.segments.capacity() * size_of::<Option<Segment>>()
            + (self.free_ids.capacity() + self.filled.capacity()) * size_of::<u16>()
    }

    /// The number of segments holding a buffer.
    pub fn count(&self) -> usize {
        self.segments.len() - self.free_ids.len()
    }

    /// The record at `location`, if the location lies on a record.
    #[inline]
    pub fn read(&self, location: Location) -> Option<StoredRecord<'_>> {
        let segment = self.segments.get(location.segment())?.as_ref()?;
        parse(segment.bytes.get(location.offset()..segment.used)?)
    }

    /// Appends a record to the active segment; None if there is no active segment or no
    /// room left in it.
    pub fn append(&mut self, key: &[u8], value: &[u8], expiry: Option<Expiry>) -> Option<Location> {
        let id = (*self.active.get(usize::from(expiry.is_some()))?)?;
        let segment = self.segments.get_mut(usize::from(id))?.as_mut()?;
        let location = Location::new(usize::from(id), segment.used)?;
        let written = write_record(segment.bytes.get_mut(segment.used..)?, key, value, expiry)?;
        segment.used += written;
        segment.live += written;
        segment.expired_by = segment.expired_by.max(expired_by(expiry));
        Some(location)
    }

    /// Whether a new standard segment can get an id.
    pub fn has_free_id(&self) -> bool {
        !self.free_ids.is_empty() || self.segments.len() < MAX_SEGMENTS
    }

    fn new_id(&mut self, segment: Segment) -> Option<u16> {
        self.bytes += segment.bytes.len();
        if let Some(id) = self.free_ids.pop() {
            if let Some(free) = self.segments.get_mut(usize::from(id)) {
                *free = Some(segment);
            }
            return Some(id);
        }
        if self.segments.len() >= MAX_SEGMENTS {
            self.bytes -= segment.bytes.len();
            return None;
        }
        self.segments.push(Some(segment));
        u16::try_from(self.segments.len() - 1).ok()
    }

    fn fresh(len: usize) -> Segment {
        Segment { bytes: vec![0; len].into_boxed_slice(), used: 0, live: 0, expired_by: 0 }
    }

    /// Allocates a new standard segment and makes it the active one of records that expire
    /// (`expiring`) or of the others (the former one becomes the newest filled segment);
    /// false if no id is free.
    pub fn start_segment(&mut self, expiring: bool) -> bool {
        let Some(id) = self.new_id(Self::fresh(self.segment_bytes)) else { return false };
        self.make_active(id, expiring);
        true
    }

    /// Makes `id` the active segment of its class, retiring the former one to the filled ones
    /// (freeing it if it holds nothing live).
    fn make_active(&mut self, id: u16, expiring: bool) {
        let Some(active) = self.active.get_mut(usize::from(expiring)) else { return };
        if let Some(old) = active.replace(id) {
            self.filled.push_back(old);
            self.free_if_dead(old);
        }
    }

    /// Stores a record longer than a standard segment in a segment of its own (the newest
    /// filled one); None if no id is free.
    pub fn store_oversized(&mut self, key: &[u8], value: &[u8], expiry: Option<Expiry>) -> Option<Location> {
        let len = record_len(key.len(), value.len(), expiry.is_some());
        let mut segment = Self::fresh(len);
        let written = write_record(&mut segment.bytes, key, value, expiry)?;
        segment.used = written;
        segment.live = written;
        segment.expired_by = expired_by(expiry);
        let id = self.new_id(segment)?;
        self.filled.push_back(id);
        Location::new(usize::from(id), 0)
    }

    /// Accounts the record of `len` bytes at `location` as dead; frees its segment if that
    /// left nothing live in a segment other than the active one.
    pub fn mark_dead(&mut self, location: Location, len: usize) {
        let Ok(id) = u16::try_from(location.segment()) else { return };
        if let Some(Some(segment)) = self.segments.get_mut(location.segment()) {
            segment.live = segment.live.saturating_sub(len);
        }
        self.free_if_dead(id);
    }

    fn free_if_dead(&mut self, id: u16) {
        if self.active.contains(&Some(id)) {
            return;
        }
        let Some(entry) = self.segments.get_mut(usize::from(id)) else { return };
        if entry.as_ref().is_some_and(|segment| segment.live == 0) {
            if let Some(segment) = entry.take() {
                self.bytes -= segment.bytes.len();
            }
            self.free_ids.push(id);
            self.filled.retain(|&filled| filled != id);
        }
    }

    /// The oldest filled segment, taken out of the fill order for compaction; an active
    /// segment if none is filled.
    pub fn take_oldest(&mut self) -> Option<u16> {
        match self.filled.pop_front() {
            Some(id) => Some(id),
            None => self.active.iter_mut().find_map(Option::take),
        }
    }

    /// The segment whose records have all expired at `now` (by `expired_by`), oldest first,
    /// taken out of the fill order for compaction as `take_oldest` does; None if no segment
    /// holding records is such.
    pub fn take_expired(&mut self, now: u64) -> Option<u16> {
        let expired = |segments: &[Option<Segment>], id: u16| {
            segments.get(usize::from(id)).and_then(Option::as_ref).is_some_and(|segment| segment.all_expired(now))
        };
        if let Some(at) = self.filled.iter().position(|&id| expired(&self.segments, id)) {
            return self.filled.remove(at);
        }
        let segments = &self.segments;
        self.active.iter_mut().find(|active| active.is_some_and(|id| expired(segments, id))).and_then(Option::take)
    }

    /// Whether a segment holds a record that expires (else no clock need be read: nothing
    /// can have expired).
    pub fn any_expiring(&self) -> bool {
        self.eviction_order()
            .filter_map(|id| self.segments.get(usize::from(id)).and_then(Option::as_ref))
            .any(|segment| segment.used > 0 && segment.expired_by != NEVER)
    }

    /// The segments whose records have all expired at `now` (what `take_expired` would take
    /// one of).
    pub fn expired_count(&self, now: u64) -> usize {
        self.eviction_order()
            .filter_map(|id| self.segments.get(usize::from(id)).and_then(Option::as_ref))
            .filter(|segment| segment.all_expired(now))
            .count()
    }

    /// Rewrites segment `id` (taken by `take_oldest` or `take_expired`) in place: `keep` is
    /// called on each record with its location and the location it gets if kept, and says
    /// whether it stays; kept records move towards the start. Then the segment becomes the
    /// active one of `room`'s class if it is a standard segment with room for `room`'s bytes
    /// (the former active one is retired);
    /// else it is freed if empty, or goes back as the newest filled segment.
    pub fn compact(
        &mut self,
        id: u16,
        room: Option<Room>,
        mut keep: impl FnMut(Location, &StoredRecord<'_>, Location) -> bool,
    ) {
        let Some(Some(segment)) = self.segments.get_mut(usize::from(id)) else { return };
        let (mut read, mut write, mut kept_expired_by) = (0, 0, 0);
        while read < segment.used {
            let Some(record) = segment.bytes.get(read..segment.used).and_then(parse) else {
                // Unreachable by the invariant: appends write whole records.
                debug_assert!(false, "a segment holds a partial record");
                break;
            };
            let len = record.len;
            let (Some(old), Some(new)) = (Location::new(usize::from(id), read), Location::new(usize::from(id), write))
            else {
                break;
            };
            if keep(old, &record, new) {
                kept_expired_by = kept_expired_by.max(expired_by(record.expiry));
                segment.bytes.copy_within(read..read + len, write);
                write += len;
            }
            read += len;
        }
        segment.used = write;
        segment.live = write;
        segment.expired_by = kept_expired_by;
        let standard = segment.bytes.len() == self.segment_bytes;
        match room {
            Some(room) if standard && segment.bytes.len() - write >= room.bytes => self.make_active(id, room.expiring),
            _ => {
                self.filled.push_back(id);
                self.free_if_dead(id);
            }
        }
    }

    /// The records of every segment in id order, each with its location (dead ones too).
    pub fn records(&self) -> impl Iterator<Item = (Location, StoredRecord<'_>)> {
        (0..self.segments.len()).filter_map(|id| u16::try_from(id).ok()).flat_map(|id| self.segment_records(id))
    }

    /// The ids in the order eviction takes them: filled oldest first, then the active ones.
    pub fn eviction_order(&self) -> impl Iterator<Item = u16> + '_ {
        self.filled.iter().copied().chain(self.active.iter().flatten().copied())
    }

    /// The records of segment `id` (dead ones too), in offset order.
    pub fn segment_records(&self, id: u16) -> impl Iterator<Item = (Location, StoredRecord<'_>)> {
        let segment = self.segments.get(usize::from(id)).and_then(Option::as_ref);
        let used = segment.map_or(&[][..], |s| s.bytes.get(..s.used).unwrap_or_default());
        let mut offset = 0;
        std::iter::from_fn(move || {
            let record = parse(used.get(offset..)?)?;
            let location = Location::new(usize::from(id), offset)?;
            offset += record.len;
            Some((location, record))
        })
    }

    /// Frees every segment.
    pub fn clear(&mut self) {
        self.segments.clear();
        self.free_ids.clear();
        self.filled.clear();
        self.active = [None; 2];
        self.bytes = 0;
    }
}

/// Writes a record at the start of `out`; its length, or None if it does not fit.
fn write_record(out: &mut [u8], key: &[u8], value: &[u8], expiry: Option<Expiry>) -> Option<usize> {
    let mut at = 0;
    let head = ((key.len() as u64) << 1) | u64::from(expiry.is_some());
    for len in [head, value.len() as u64] {
        let mut buffer = [0u8; MAX_VARINT_LEN];
        let used = encode_varint(len, &mut buffer);
        out.get_mut(at..at + used)?.copy_from_slice(buffer.get(..used)?);
        at += used;
    }
    if let Some(expiry) = expiry {
        out.get_mut(at..at + EXPIRY_BYTES)?.copy_from_slice(&expiry.unix_seconds().to_le_bytes());
        at += EXPIRY_BYTES;
    }
    for part in [key, value] {
        out.get_mut(at..at + part.len())?.copy_from_slice(part);
        at += part.len();
    }
    Some(at)
}

/// The Limit error of a record that cannot fit in a slot at all.
pub fn too_large(len: usize, cap_bytes: usize) -> Error {
    Error::new(
        ErrorKind::Limit,
        format!("a record of {len} bytes does not fit in the slot's memory share ({cap_bytes} bytes)"),
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use super::*;

    #[test]
    fn records_read_back_and_compaction_keeps_what_it_is_told() {
        let mut segments = Segments::new(256, 16);
        assert!(segments.append(b"k", b"v", None).is_none(), "no active segment yet");
        assert!(segments.start_segment(false));
        let mut written = Vec::new();
        for i in 0..40u8 {
            let (key, value) = (vec![i; 3], vec![i; usize::from(i % 9)]);
            // Every third record expires, at a second of its own.
            let expiry = (i % 3 == 0).then(|| Expiry::at_unix_seconds(1_000 + u64::from(i)).unwrap());
            let location = match segments.append(&key, &value, expiry) {
                Some(location) => location,
                None => {
                    assert!(segments.start_segment(expiry.is_some()));
                    segments.append(&key, &value, expiry).unwrap()
                }
            };
            written.push((location, key, value, expiry));
        }
        for (location, key, value, expiry) in &written {
            let record = segments.read(*location).unwrap();
            assert_eq!((record.key, record.value, record.expiry), (&key[..], &value[..], *expiry));
            assert_eq!(record.len, record_len(key.len(), value.len(), expiry.is_some()));
        }
        assert_eq!(segments.take_expired(999), None, "nothing has expired yet");
        assert!(segments.take_expired(2_000).is_some(), "records that expire fill segments of their own");
        let oldest = segments.take_oldest().unwrap();
        let mut moved = Vec::new();
        segments.compact(oldest, None, |old, record, new| {
            let kept = record.key[0] % 2 == 0;
            if kept {
                moved.push((old, new, record.key.to_vec()));
            }
            kept
        });
        for (_, new, key) in moved {
            assert_eq!(segments.read(new).unwrap().key, &key[..]);
        }
        let big = vec![7u8; 1000];
        let location = segments.store_oversized(b"big", &big, None).unwrap();
        assert_eq!(segments.read(location).unwrap().value, &big[..]);
        let before = segments.buffer_bytes();
        segments.mark_dead(location, record_len(3, 1000, false));
        assert_eq!(segments.buffer_bytes(), before - record_len(3, 1000, false), "a dead oversized segment is freed");
    }

    /// Records that expire fill segments of their own; such a segment is taken as expired once
    /// the latest expiry of its records has passed, and not before; one holding a record that
    /// never expires never is.
    #[test]
    fn a_segment_expires_with_its_latest_record() {
        let at = |seconds| Expiry::at_unix_seconds(seconds);
        let mut segments = Segments::new(256, 16);
        assert!(segments.start_segment(false));
        segments.append(b"k", b"forever", None).unwrap();
        assert!(segments.append(b"s", b"short", at(10)).is_none(), "no segment of records that expire yet");
        assert!(!segments.any_expiring(), "no record expires: no clock to read");
        assert!(segments.start_segment(true));
        for (i, seconds) in [10u64, 30, 20].into_iter().enumerate() {
            segments.append(&[i as u8], b"short", at(seconds)).unwrap();
        }
        let forever = segments.append(b"j", b"forever", None).unwrap();
        assert!(segments.any_expiring());
        assert_eq!(segments.expired_count(29), 0);
        assert_eq!(segments.take_expired(29), None, "one record lives until 30");
        assert_eq!(segments.expired_count(30), 1);
        let expiring = segments.take_expired(30).unwrap();
        assert_ne!(usize::from(expiring), forever.segment());
        assert_eq!(segments.segment_records(expiring).count(), 3);
        let mut expired = 0;
        segments.compact(expiring, Some(Room { bytes: 10, expiring: true }), |_, record, _| {
            expired += usize::from(record.has_expired(30));
            !record.has_expired(30)
        });
        assert_eq!(expired, 3);
        assert_eq!(segments.take_expired(u64::from(u32::MAX)), None, "the other segment holds records forever");
        let oversized = segments.store_oversized(b"big", &[1; 300], at(50)).unwrap();
        assert_eq!(segments.take_expired(49), None);
        assert_eq!(segments.take_expired(50), Some(u16::try_from(oversized.segment()).unwrap()));
    }
}
