//! Opening a HashDbm file for `kura restore` whatever state its header is in (issue 43).
//!
//! The header is the one place whose damage used to cost every record: its checksum fails,
//! the file does not open, and the salvage that would have copied every intact record never
//! ran. A salvage therefore takes the header in three steps, each only when the one before
//! fails:
//!
//! 1. as it is, when its checksum holds, or its copy (format version 4) when the header at 0
//!    fails and the copy's checksum holds (a file cut short keeps its layout: it is read to
//!    its end, without the free list a clean close saved after its records);
//! 2. with one byte put back, in the header at 0 or else in the copy: the 64-bit header
//!    checksum locates a single damaged byte (a flip, a zeroed byte), which covers every
//!    single-byte damage of a header;
//! 3. rebuilt from the file itself. The bucket array starts at a fixed offset whatever the
//!    header says (1,024 from version 4, 128 before; each is tried when the version is lost,
//!    and the one more records agree with is taken), so its entries can be read without
//!    knowing their number; each entry
//!    that points at an intact record (its checksum holds) says which bucket count puts that
//!    record's key in that entry's bucket, an interval of counts, and the count most entries
//!    agree on is the file's. The dictionary is taken when the old header's length and
//!    checksum fields still describe bytes that match; the codec is the one every sampled
//!    compressed record decodes with (to its stated length), and several codecs count only
//!    when they decode every sample to the same bytes; the update mode is the one the
//!    chains show (tombstones or a key twice in a chain: appending; a pointer forward:
//!    in place), else the old header's. What cannot be established this way is given up,
//!    never guessed: without a proven dictionary and codec, compressed records are dropped
//!    (and reported), and without a bucket count nothing is salvaged (an error says why).
//!
//! Every record the salvage then copies passed its own checksum, as always (restore.rs).

use std::fs::File;
use std::path::Path;

use xxhash_rust::xxh3::xxh3_64;

use super::chain_lock::WholeFile;
use super::header::{buckets_start_of, COPIES_BYTES, COPY_OFFSET, HEADER_BYTES, HEADER_SIZE};
use super::header::{repair_one_byte, Header, Hints, UpdateMode, BUCKET_WIDTH, FORMAT_VERSION};
use super::header::{
    FORMAT_VERSION_HEADER_COPY, FORMAT_VERSION_SHARED_CHECKS, FORMAT_VERSION_UNCHECKED, FORMAT_VERSION_WIDE_CHECKS,
    MAX_ADDRESSABLE,
};
use super::header_copies::read_copies;
use super::record::{Block, RecordHeader, KIND_FREE, KIND_TOMBSTONE};
use super::space::Space;
use super::storage::{hash_key, DamagedDictionary, Storage};
use crate::codec::{Codec, CodecKind, CODECS};
use crate::error::{Error, Result};
use crate::file::{open_regular_file, FileLock, LockMode};

/// Bucket entries read while rebuilding a header: 2^27 (640 MiB of buckets) is more than
/// any file made with a sane `num_buckets` has; a larger array is located by its first ones.
const MAX_ENTRIES_READ: u64 = 1 << 27;
/// Records followed down one chain from its bucket while rebuilding a header.
const MAX_CHAIN_STEPS: usize = 64;
/// Compressed values the codec is tried on.
const MAX_SAMPLES: usize = 64;
/// Bytes of a sampled compressed value kept (a sample larger than this is not kept).
const MAX_SAMPLE_BYTES: usize = 1 << 20;

/// A file opened for a salvage, and what its header needed, one sentence each for the report.
pub struct Opened {
    pub storage: Storage,
    pub notes: Vec<String>,
    /// Compressed records are refused because the codec or dictionary could not be proven.
    pub compressed_refused: bool,
    /// The file ends before the data end its (clean) header states.
    pub cut_short: bool,
}

/// Opens `path` read-only for a salvage (see the module comment).
pub fn open_for_salvage(path: &Path) -> Result<Opened> {
    let file = open_regular_file(path, false, false)?;
    let lock = FileLock::acquire(&file, path, LockMode::Shared)?;
    let file_len = file.metadata().map_err(|e| Error::io(format!("stat {}", path.display()), e))?.len();
    let mut head = vec![0u8; usize::try_from(file_len.min(COPIES_BYTES as u64)).unwrap_or(0)];
    std::os::unix::fs::FileExt::read_exact_at(&file, &mut head, 0)
        .map_err(|e| Error::io(format!("read {}", path.display()), e))?;
    if file_len < HEADER_SIZE {
        return Err(Error::broken(format!(
            "{}: {file_len} bytes, fewer than the {HEADER_SIZE}-byte header: no records to salvage",
            path.display()
        )));
    }
    let mut notes = Vec::new();
    let header = match read_copies(&head) {
        Ok((header, copies)) => {
            notes.extend(copies.describe());
            header
        }
        Err(why) => match repaired(&head) {
            Some((header, at, byte)) => {
                notes.push(format!(
                    "the header failed its check ({}); byte {byte} of the header at {at} was damaged and was put \
                     back (located by the header checksum)",
                    why.message()
                ));
                header
            }
            None => return rebuild(file, lock, path, &head, file_len, why.message()),
        },
    };
    let fitted = fit_to_file(header.clone(), file_len, &mut notes);
    let cut_short = fitted != header;
    let storage = Storage::with_header(file, lock, path, fitted, false, DamagedDictionary::Skip)?;
    Ok(Opened { storage, notes, compressed_refused: false, cut_short })
}

/// The header at 0 with one byte put back, else the copy at `COPY_OFFSET` (format version 4)
/// with one byte put back: the header, where it lies and which byte of it was damaged.
fn repaired(head: &[u8]) -> Option<(Header, u64, usize)> {
    if let Some((header, byte)) = repair_one_byte(head) {
        return Some((header, 0, byte));
    }
    let copy = head.get(COPY_OFFSET as usize..COPY_OFFSET as usize + HEADER_BYTES)?;
    repair_one_byte(copy).filter(|(header, _)| header.has_copy()).map(|(header, byte)| (header, COPY_OFFSET, byte))
}

/// A sound header of a file cut short past its data end: the records are read to the end of
/// the file, and the free list saved after them (gone or cut) is not used.
fn fit_to_file(header: Header, file_len: u64, notes: &mut Vec<String>) -> Header {
    if header.validate(file_len).is_ok() || !header.closed_cleanly {
        return header;
    }
    notes.push(format!(
        "the file ends at {file_len}, before the data end its header states ({}): cut short; read to its end",
        header.data_end
    ));
    Header { closed_cleanly: false, free_list_offset: 0, free_list_len: 0, free_list_checksum: 0, ..header }
}

/// What the bucket array and the chains from it show about a file whose header is lost.
#[derive(Default)]
struct Evidence {
    /// Bucket counts that put a record in the bucket that reaches it, one interval per record.
    intervals: Vec<(u64, u64)>,
    /// The lowest offset of an intact record reached: the record area starts at or before it.
    lowest_record: Option<u64>,
    /// Stored values of compressed records, to find the codec by.
    samples: Vec<Vec<u8>>,
    appending_signs: u64,
    in_place_signs: u64,
}

/// The record at `offset` if it parses, lies in the file and its checksum holds.
fn intact_record(s: &Storage, whole: &WholeFile<'_>, offset: u64) -> Option<(RecordHeader, u64)> {
    let Ok(Block::Record(header)) = s.scan_block(whole, offset) else { return None };
    if header.kind() == KIND_FREE || offset.saturating_add(header.total_len()) > s.file_len() {
        return None;
    }
    let hash = hash_key(s.key_of(whole.chain(0), offset, &header).ok()?);
    s.checksum_matches(whole, offset, &header, hash, header.is_compressed()).then_some((header, hash))
}

/// The bucket counts `n` for which a key of hash `hash` falls in bucket `bucket`:
/// `bucket * 2^64 <= hash * n < (bucket + 1) * 2^64` (storage.rs, `bucket_of`), and more
/// buckets than `bucket`.
fn counts_placing(hash: u64, bucket: u64) -> Option<(u64, u64)> {
    let max = MAX_ADDRESSABLE / BUCKET_WIDTH;
    let (low, high) = if hash == 0 {
        (if bucket == 0 { 1 } else { return None }, max)
    } else {
        let h = u128::from(hash);
        let low = (u128::from(bucket) << 64).div_ceil(h);
        let high = ((u128::from(bucket) + 1) << 64).div_ceil(h).saturating_sub(1);
        (u64::try_from(low).ok()?, u64::try_from(high.min(u128::from(max))).ok()?)
    };
    let low = low.max(bucket.saturating_add(1));
    (low <= high).then_some((low, high))
}

/// Reads the bucket array from where the storage's provisional header places it (1,024 or
/// 128), as far as the file goes, and follows each entry that points at an intact record
/// down its chain.
fn gather(s: &Storage, whole: &WholeFile<'_>) -> Evidence {
    let file_len = s.file_len();
    let entries = (file_len.saturating_sub(s.header.buckets_start()) / BUCKET_WIDTH).min(MAX_ENTRIES_READ);
    let mut evidence = Evidence::default();
    for bucket in 0..entries {
        let at = s.header.bucket_offset(bucket);
        let Ok(bytes) = s.raw_bytes(whole, at, BUCKET_WIDTH as usize) else { break };
        let mut entry = [0u8; 8];
        let Some(low) = entry.get_mut(..bytes.len()) else { break };
        low.copy_from_slice(bytes);
        let mut offset = u64::from_le_bytes(entry);
        if offset < at + BUCKET_WIDTH || offset >= file_len {
            continue;
        }
        let mut keys = Vec::new();
        for _ in 0..MAX_CHAIN_STEPS {
            let Some((record, hash)) = intact_record(s, whole, offset) else { break };
            let Some(interval) = counts_placing(hash, bucket) else { break };
            evidence.intervals.push(interval);
            evidence.lowest_record = Some(evidence.lowest_record.map_or(offset, |low| low.min(offset)));
            if record.kind() == KIND_TOMBSTONE || keys.contains(&hash) {
                evidence.appending_signs += 1;
            }
            keys.push(hash);
            if record.is_compressed() && evidence.samples.len() < MAX_SAMPLES && record.value_len <= MAX_SAMPLE_BYTES {
                let at = offset.saturating_add((record.header_len + record.key_len) as u64);
                if let Ok(stored) = s.raw_bytes(whole, at, record.value_len) {
                    evidence.samples.push(stored.to_vec());
                }
            }
            if record.next > offset {
                evidence.in_place_signs += 1;
            }
            if record.next <= at {
                break;
            }
            offset = record.next;
        }
    }
    evidence
}

/// The bucket count most intervals agree on, preferring `hint` among equals: the first count
/// of the best-covered range otherwise. None without any interval.
fn agreed_count(intervals: &[(u64, u64)], hint: u64) -> Option<(u64, usize)> {
    let mut events: Vec<(u64, i64)> = Vec::with_capacity(intervals.len() * 2);
    for &(low, high) in intervals {
        events.push((low, 1));
        events.push((high.saturating_add(1), -1));
    }
    events.sort_unstable();
    let mut best: Option<(u64, u64, usize)> = None;
    let mut covered: i64 = 0;
    let mut index = 0;
    while let Some(&(at, _)) = events.get(index) {
        while let Some(&(same, delta)) = events.get(index).filter(|(same, _)| *same == at) {
            debug_assert_eq!(same, at);
            covered += delta;
            index += 1;
        }
        let end = events.get(index).map_or(u64::MAX, |&(next, _)| next.saturating_sub(1));
        let count = usize::try_from(covered).unwrap_or(0);
        let better = match best {
            None => count > 0,
            Some((_, _, best_count)) => count > best_count || (count == best_count && (at..=end).contains(&hint)),
        };
        if better {
            best = Some((at, end, count));
        }
    }
    best.map(|(low, high, count)| (if (low..=high).contains(&hint) { hint } else { low }, count))
}

/// The codec every sample decodes with (the hint's first, then the registry's order), when
/// all codecs that decode every sample agree on the bytes; None when none does or they
/// disagree.
fn agreed_codec(samples: &[Vec<u8>], hint: Option<CodecKind>, dictionary: &[u8]) -> Option<CodecKind> {
    let mut order: Vec<CodecKind> = hint.into_iter().collect();
    order.extend(CODECS.iter().map(|c| c.kind).filter(|&k| Some(k) != hint));
    let mut chosen: Option<(CodecKind, Vec<Vec<u8>>)> = None;
    for kind in order {
        let spec = CODECS.iter().find(|c| c.kind == kind)?;
        let Ok(codec) = Codec::new(kind, if spec.uses_dictionary { dictionary.to_vec() } else { Vec::new() }) else {
            continue;
        };
        let decoded: Option<Vec<Vec<u8>>> = samples
            .iter()
            .map(|stored| {
                let mut out = Vec::new();
                codec.decode(stored, true, &mut out).ok().map(|()| out)
            })
            .collect();
        match (decoded, &chosen) {
            (None, _) => {}
            (Some(values), None) => chosen = Some((kind, values)),
            (Some(values), Some((_, first))) if &values == first => {}
            (Some(_), Some(_)) => return None,
        }
    }
    chosen.map(|(kind, _)| kind)
}

/// A header of the constants every file shares, to read a file whose header is lost.
fn provisional(version: u16, file_len: u64) -> Header {
    Header {
        codec: CodecKind::None,
        update_mode: UpdateMode::InPlace,
        closed_cleanly: false,
        num_buckets: 1,
        record_count: 0,
        data_end: file_len,
        max_file_size: MAX_ADDRESSABLE,
        dictionary_len: 0,
        free_list_offset: 0,
        free_list_len: 0,
        dictionary_checksum: xxh3_64(&[]),
        free_list_checksum: 0,
        rebuilt_records: 0,
        version,
    }
}

/// The evidence read under the record layout of `version`.
fn gather_as(file: &File, path: &Path, version: u16, file_len: u64) -> Result<Evidence> {
    let copy = file.try_clone().map_err(|e| Error::io(format!("reopen {}", path.display()), e))?;
    // The lock is the one `file` holds already (flock locks belong to the shared description).
    let lock = FileLock::acquire(&copy, path, LockMode::Shared)?;
    let mut storage =
        Storage::with_header(copy, lock, path, provisional(version, file_len), false, DamagedDictionary::Skip)?;
    let (s, whole) = WholeFile::unshared(&mut storage);
    Ok(gather(s, &whole))
}

/// Step 3 of the module comment: the header rebuilt from the file.
fn rebuild(file: File, lock: FileLock, path: &Path, head: &[u8], file_len: u64, why: &str) -> Result<Opened> {
    let hints = Hints::read_either(head);
    let mut notes =
        vec![format!("the header is damaged beyond one byte ({why}); its layout was rebuilt from the file:")];
    let hinted_version = (FORMAT_VERSION_UNCHECKED..=FORMAT_VERSION).contains(&hints.version);
    // The version decides where the buckets start and whether records have wide checks: a
    // hinted one is taken, else each layout is tried and the one more records agree with is
    // taken, the first of a tie (the newest: the widest record check), a layout the file is
    // too short for giving no evidence.
    let versions = if hinted_version {
        vec![hints.version]
    } else {
        vec![FORMAT_VERSION, FORMAT_VERSION_HEADER_COPY, FORMAT_VERSION_WIDE_CHECKS, FORMAT_VERSION_SHARED_CHECKS]
    };
    let mut best: Option<(u16, Evidence)> = None;
    for candidate in versions {
        let Ok(found) = gather_as(&file, path, candidate, file_len) else { continue };
        if best.as_ref().is_none_or(|(_, evidence)| found.intervals.len() > evidence.intervals.len()) {
            best = Some((candidate, found));
        }
    }
    let (version, evidence) =
        best.unwrap_or((if hinted_version { hints.version } else { FORMAT_VERSION }, Evidence::default()));
    let Some((mut num_buckets, agreeing)) = agreed_count(&evidence.intervals, hints.num_buckets) else {
        return Err(Error::broken(format!(
            "{}: the header is damaged ({why}) and no bucket points at an intact record: the bucket count, and so \
             where the records start, cannot be established",
            path.display()
        )));
    };
    if let Some(lowest) = evidence.lowest_record {
        num_buckets = num_buckets.min((lowest.saturating_sub(buckets_start_of(version)) / BUCKET_WIDTH).max(1));
    }
    notes.push(format!(
        "  num_buckets={num_buckets} ({agreeing} of {} records reached from buckets agree)",
        evidence.intervals.len()
    ));
    let dictionary_offset = buckets_start_of(version) + num_buckets * BUCKET_WIDTH;
    let hinted_dictionary = || -> Option<Vec<u8>> {
        let len = u64::from(hints.dictionary_len);
        if dictionary_offset.checked_add(len)? > file_len || hints.version < FORMAT_VERSION_SHARED_CHECKS {
            return None;
        }
        let mut bytes = vec![0u8; usize::try_from(len).ok()?];
        std::os::unix::fs::FileExt::read_exact_at(&file, &mut bytes, dictionary_offset).ok()?;
        (xxh3_64(&bytes) == hints.dictionary_checksum).then_some(bytes)
    };
    let dictionary = hinted_dictionary();
    let hinted_codec = CodecKind::from_id(hints.codec_id).ok();
    let codec = if evidence.samples.is_empty() {
        None
    } else {
        agreed_codec(&evidence.samples, hinted_codec, dictionary.as_deref().unwrap_or_default())
    };
    let uses_dictionary = |kind: CodecKind| CODECS.iter().any(|c| c.kind == kind && c.uses_dictionary);
    let codec_kind = codec.or(hinted_codec).unwrap_or(CodecKind::None);
    let (dictionary_len, dictionary_checksum) = match (&dictionary, uses_dictionary(codec_kind)) {
        (Some(bytes), true) => (bytes.len(), hints.dictionary_checksum),
        (_, false) => (0, xxh3_64(&[])),
        // Unproven: the bytes up to the lowest record are taken as the dictionary and, with a
        // checksum they cannot match, refused (compressed records are dropped).
        (None, true) => {
            let gap = evidence.lowest_record.map_or(0, |low| low.saturating_sub(dictionary_offset));
            (usize::try_from(gap).unwrap_or(0), !0)
        }
    };
    let update_mode = match (evidence.appending_signs > 0, evidence.in_place_signs > 0) {
        (true, false) => UpdateMode::Appending,
        (false, true) => UpdateMode::InPlace,
        _ => hints.update_mode().unwrap_or(UpdateMode::InPlace),
    };
    notes.push(format!(
        "  version={version} update_mode={} codec={}{}",
        update_mode.name(),
        codec_kind,
        match (codec, evidence.samples.is_empty()) {
            (Some(_), _) => format!(" (all {} sampled compressed records decode with it)", evidence.samples.len()),
            (None, true) => " (no compressed record sampled)".to_string(),
            (None, false) => " (no codec decodes every sample alike: compressed records are dropped)".to_string(),
        }
    ));
    if uses_dictionary(codec_kind) {
        notes.push(match dictionary {
            Some(_) => format!("  the dictionary ({dictionary_len} bytes) matches the checksum the header kept"),
            None => "  the dictionary cannot be proven intact: compressed records are dropped".to_string(),
        });
    }
    let max_file_size =
        if (file_len..=MAX_ADDRESSABLE).contains(&hints.max_file_size) { hints.max_file_size } else { MAX_ADDRESSABLE };
    let header = Header {
        codec: codec_kind,
        update_mode,
        num_buckets,
        max_file_size,
        dictionary_len: u32::try_from(dictionary_len).unwrap_or(0),
        dictionary_checksum,
        ..provisional(version, file_len)
    };
    let mut storage = Storage::with_header(file, lock, path, header, false, DamagedDictionary::Skip)?;
    if codec.is_none() && !evidence.samples.is_empty() {
        storage.refuse_compressed();
    }
    let compressed_refused = storage.dictionary_damaged();
    // A clean close saved the free list after the records; where the old header's fields
    // still describe it (its checksum holds), the records end where it starts.
    let free_start = hints.free_list_offset;
    let free_end = free_start.saturating_add(u64::from(hints.free_list_len));
    if hints.closed_cleanly == 1
        && hints.free_list_len > 0
        && free_start == hints.data_end
        && free_start >= storage.header.data_start()
        && free_end <= file_len
    {
        let (s, whole) = WholeFile::unshared(&mut storage);
        let list = s.raw_bytes(&whole, free_start, hints.free_list_len as usize).unwrap_or_default();
        if list.len() == hints.free_list_len as usize && xxh3_64(list) == hints.free_list_checksum {
            storage.space = Space::new(free_start);
        }
    }
    Ok(Opened { storage, notes, compressed_refused, cut_short: false })
}

#[cfg(test)]
mod tests {
    #![expect(clippy::unwrap_used, reason = "a test fails loudly on the first broken expectation")]
    use super::*;
    use crate::hash_dbm::storage::bucket_of;

    #[test]
    fn the_interval_of_counts_holds_exactly_the_counts_that_place_the_key() {
        for hash in [1u64, 12345, u64::MAX / 3, u64::MAX - 5, 0x8000_0000_0000_0000] {
            for n in [1u64, 2, 7, 1000, 1 << 20] {
                let bucket = bucket_of(hash, n);
                let (low, high) = counts_placing(hash, bucket).unwrap();
                assert!((low..=high).contains(&n), "hash {hash} n {n}: {low}..={high}");
                for m in [low, high] {
                    assert_eq!(bucket_of(hash, m), bucket, "hash {hash} count {m}");
                }
                if low > bucket + 1 {
                    assert_ne!(bucket_of(hash, low - 1), bucket);
                }
            }
        }
    }

    #[test]
    fn the_count_most_intervals_agree_on_wins() {
        assert_eq!(agreed_count(&[(1, 10), (5, 20), (8, 9)], 0), Some((8, 3)));
        assert_eq!(agreed_count(&[(1, 10), (5, 20), (8, 9)], 9), Some((9, 3)));
        assert_eq!(agreed_count(&[(1, 10), (30, 40), (35, 50), (5, 6)], 0), Some((5, 2)));
        assert_eq!(agreed_count(&[], 3), None);
    }
}
