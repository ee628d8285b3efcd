//! Salvaging the records of a crashed or damaged HashDbm file into a fresh one.
//!
//! First every chain is walked from its bucket: after a process crash the chains are
//! intact (see the crash contract in storage.rs), and the first record of a key in its
//! chain is its current state. Then the record area is scanned from start to end, and every
//! intact record (checksum verified) whose key was not yet recovered is added too, so that
//! damage, or pages lost to a power loss, lose only the records they hit. The scan runs in
//! appending mode always; in place, after any crash (a file not closed cleanly), when a chain
//! is broken (a pointer out of the file, a bad header, a loop), and when the chains hold
//! fewer records than a cleanly closed file states.
//!
//! A record is copied only once its value is proven intact (checksum, and for a compressed
//! value a dictionary that passed its own checksum); the keys whose value could not be are
//! counted, so that the caller can say what was dropped.

use std::collections::{HashMap, HashSet};

use super::chain_lock::WholeFile;
use super::damaged_owner;
use super::header::UpdateMode;
use super::record::{Block, RecordHeader, KIND_FREE, KIND_RECORD, KIND_TOMBSTONE};
use super::storage::{bucket_of, hash_key, Storage};
use crate::error::{Error, Result};

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Salvage {
    pub from_chains: u64,
    pub from_scan: u64,
    pub broken_chains: u64,
    /// Chains that walked to their end past a record that failed its checksum (or, in
    /// place, a tombstone): they may have lost the rest of their records.
    pub suspect_chains: u64,
    /// Keys met with a value that could not be proven intact and not recovered otherwise.
    pub dropped: u64,
    /// How many fewer records the chains gave than a cleanly closed file states.
    pub short_of_count: u64,
    /// Appending mode: keys whose last intact version is older than a damaged record of
    /// their bucket, which may be their newest version; dropped rather than revived.
    pub shadowed: u64,
}

/// A storage with the proof that the caller has all of it.
type Whole<'a> = (&'a Storage, WholeFile<'a>);

/// Inserts a record known to be absent from `sink`.
fn insert((sink, whole): &Whole<'_>, key: &[u8], hash: u64, value: &[u8]) -> Result<()> {
    let bucket = bucket_of(hash, sink.header.num_buckets);
    debug_assert!(
        sink.find(whole.chain(bucket), key, hash).is_ok_and(|found| found.is_none()),
        "a key salvaged twice: {key:?}"
    );
    let chain = whole.chain_mut(bucket);
    let head = sink.head(chain.read())?;
    let offset = sink.write_record(&chain, key, hash, Some(value), head)?;
    sink.link_new_head(&chain, offset, hash)?;
    sink.add_count(bucket, 1);
    Ok(())
}

/// Whether `sink` has a record (or tombstone) of `key`.
fn has((sink, whole): &Whole<'_>, key: &[u8], hash: u64) -> Result<bool> {
    Ok(sink.find(whole.chain(bucket_of(hash, sink.header.num_buckets)), key, hash)?.is_some())
}

/// Copies what can be recovered from `source` into the empty `sink`; the caller has both
/// to itself (opened at restore, under their file locks).
///
/// `damaged`: whether a record that fails its check is damage (`Shadows`) rather than a
/// write a crash cut: true for a file closed cleanly, cut short or with a damaged header
/// (`kura restore`); false after a crash, where a torn record is one written since the last
/// synchronization and the version before it is the key's synchronized state (the power-loss
/// contract). `cut_short`: the file is known to end before its records did (a clean close
/// recorded a longer data end), so a pointer past its end leads to records that were lost.
pub fn salvage(source: &mut Storage, sink: &mut Storage, damaged: bool, cut_short: bool) -> Result<Salvage> {
    let source = WholeFile::unshared(source);
    let sink = WholeFile::unshared(sink);
    let (from, whole) = &source;
    let mut report = Salvage::default();
    let mut value = Vec::new();
    let mut unreadable: HashSet<Vec<u8>> = HashSet::new();
    let in_place = from.header.update_mode == UpdateMode::InPlace;
    let shadowing = !in_place && damaged;
    // In place, in a file closed cleanly and damaged since: the buckets whose chain met a
    // record failing its check. The scan takes none of their records: that record was the
    // key's current version (its key bytes may be the damaged ones), and the older versions
    // a synchronization freed stay intact inside the free spans over them, which a scan
    // resynchronizing byte by byte after the damage can step into.
    let mut refuse_scanned = HashSet::new();
    // An error of the sink (a full disk) ends the salvage; it must not pass for a broken
    // chain of the source, which the walk's error would otherwise be taken for.
    let mut sink_error = None;
    // Appending mode: where each bucket's chain met a damaged record (or a pointer that led
    // to bytes which are no intact record), for `Shadows` once the scan knows the damage.
    let mut damage = Shadows { active: shadowing, ..Shadows::default() };
    if cut_short {
        damage.regions.push((from.file_len(), u64::MAX));
    }
    for bucket in 0..from.header.num_buckets {
        let mut decided: HashSet<Vec<u8>> = HashSet::new();
        // In place: keys decided by a record that failed its check (or read as no record).
        // A key has one record in its chain in place (an update that moves a record unlinks
        // the old one), so an intact record of such a key further down the chain is the
        // key's own, and the failing one had its key bytes damaged: a flipped byte can read
        // as another key of the same bucket (`key:01883` as `key:00883`). The intact one is
        // taken; without this, that intact record was lost with the damaged one. (After a
        // crash, a record that moved can still be linked after its torn new version: the
        // version before it is then the key's synchronized state, which the power-loss
        // contract restores.) In appending mode every version of a key is in its chain, and
        // `Shadows` decides instead.
        let mut decided_by_damage: HashSet<Vec<u8>> = HashSet::new();
        // A chain that walks to its end can still have lost records: after a power loss a
        // pointer can lead to bytes that were never written there (see below).
        let mut suspect = false;
        // Appending mode: the newest record of the chain that failed its check. Every record
        // behind it is older, and it may have been a newer version of any of their keys.
        let mut damaged_at: Option<u64> = None;
        // Where the walk stands, to say where it broke: the record it refused, or the
        // pointer it could not follow.
        let (mut current, mut following, mut refused) = (0, from.head(chain_of(whole, bucket)).unwrap_or(0), false);
        let chain = whole.chain(bucket);
        let walked = from.walk(chain, |offset, header, _, key| {
            (current, following) = (offset, header.next);
            let hash = hash_key(key);
            // Reached through a wrong pointer (or bytes read as one), this is another chain's
            // record, or none's: its version may be stale for its key (an unlinked, held
            // record), and its `next` leads on into that other chain. Nothing from here on
            // belongs to this chain, so the walk ends as at a broken pointer, and the scan
            // that a broken chain starts finds the records this chain lost. (Skipping just
            // the record would still follow its foreign `next`.) After a power loss in place
            // this happens when a bucket's new pointer reached the disk and the record it was
            // written for did not: the older bytes there were a stale record of another key,
            // live tag and all, inside a free span (the ShardDbm power-loss run, round 225).
            if bucket_of(hash, from.header.num_buckets) != bucket {
                refused = true;
                return Err(Error::broken(format!("bucket {bucket} links to a record of another bucket at {offset}")));
            }
            // A tombstone's value is empty (docs/format.md): one with a value is the inside of
            // a record read as one, and its `next` is not a pointer (see `scan`).
            if header.kind() == KIND_TOMBSTONE && header.value_len != 0 {
                refused = true;
                return Err(Error::broken(format!("bucket {bucket} links to a tombstone with a value at {offset}")));
            }
            let first_record_of_key = decided.insert(key.to_vec());
            let retaken = in_place && decided_by_damage.contains(key);
            if !first_record_of_key && !retaken {
                return Ok(true);
            }
            if damaged_at.is_some() {
                // Possibly shadowed by the damaged record: left to the scan, which decides.
                decided.remove(key);
                return Ok(true);
            }
            if header.kind() != KIND_RECORD {
                // In place, no tombstone is ever written: one here is bytes read as one.
                suspect |= in_place;
                if in_place {
                    decided_by_damage.insert(key.to_vec());
                }
                if shadowing {
                    // Appending mode: an intact tombstone removed its key, which the scan must
                    // not bring back from an older record; a tombstone failing its check, or a
                    // dead record (never written in this mode: a tag a flip made dead), may
                    // have been the newest version of any key behind it.
                    let intact = header.kind() == KIND_TOMBSTONE
                        && from.checksum_matches(whole, offset, header, hash, header.is_compressed());
                    if intact {
                        damage.tombstoned.insert(key.to_vec());
                    } else {
                        damaged_at = Some(offset);
                    }
                }
                return Ok(true);
            }
            // A record failing its checksum is skipped, not fatal: the rest of the chain may
            // still be fine (its pointer is validated when followed).
            if from.read_value(chain, offset, header, hash, &mut value).is_ok() {
                if let Err(e) = insert(&sink, key, hash, &value) {
                    sink_error = Some(e);
                    return Ok(false);
                }
                report.from_chains += 1;
                if retaken {
                    decided_by_damage.remove(key);
                }
            } else {
                if in_place {
                    decided_by_damage.insert(key.to_vec());
                }
                unreadable.insert(key.to_vec());
                suspect = true;
                if shadowing {
                    damaged_at = Some(offset);
                }
                if in_place && damaged && from.header.closed_cleanly {
                    refuse_scanned.insert(bucket);
                }
            }
            Ok(true)
        });
        if let Some(e) = sink_error.take() {
            return Err(e);
        }
        if let Some(offset) = damaged_at {
            damage.failed.push((bucket, offset));
        }
        if walked.is_err() {
            if !refused && current != 0 {
                damage.vouched.insert(current);
            }
            report.broken_chains += 1;
            if shadowing && damaged_at.is_none() {
                damage.broken.push((bucket, if refused { current } else { following }));
            }
        } else if suspect {
            report.suspect_chains += 1;
        }
    }
    // In appending mode the scan runs even when every chain walked cleanly: after a power
    // loss a chain can be whole yet short (a head pointer whose update was lost), and as
    // nothing is ever overwritten there, the newest intact version of a key in file order is
    // its state. In place the scan runs after every crash (below), and in a file closed
    // cleanly when a chain is broken or holds a record that fails its checksum: after a power
    // loss, a pointer can reach the disk before the record it points to, and the bytes found
    // there (a free block, or a torn record whose `next` may read as anything, even 0) cut
    // the chain short. Every record of the last synchronized state is still intact in the
    // record area (records freed since were not reused nor marked dead: freed.rs), so the
    // scan finds those the chains lost.
    //
    // A chain can also walk cleanly and still be short when its bucket entry is damaged: a
    // flipped bit that makes it 0 empties the chain, one that points it at an older record of
    // the same bucket skips the newer ones. A file closed cleanly states how many records it
    // holds, and holds no stale record with a live tag (the close's hard synchronization
    // marked every unlinked one dead), so finding fewer than it states starts the scan too.
    //
    // After a crash in place, chains can walk cleanly and still be short: a power loss keeps
    // any subset of the pages written since the last synchronization, so a bucket's old head
    // can lead past a record whose unlinking pointer reached the disk while the new record
    // its new head pointed to never did. Both versions of that key are then out of every
    // chain, with no chain broken (the power-loss test that cuts checkpoints, 20,000 images,
    // operation 9,752, a key of a batch that bypassed the journal). So a file not closed
    // cleanly is always scanned, as in appending mode; the records of keys the chains gave
    // are skipped. The scan also finds the records removed since the last checkpoint (their
    // tags are marked dead only then: freed.rs), which the journal's replay removes again:
    // every removal since the checkpoint has an entry, a batch that bypassed the journal
    // included (journaled.rs, `write_batch_bypassing`).
    let found = report.from_chains + unreadable.len() as u64;
    if from.header.closed_cleanly && found < from.header.record_count {
        report.short_of_count = from.header.record_count - found;
    }
    let crashed = !from.header.closed_cleanly;
    if report.broken_chains > 0 || report.suspect_chains > 0 || report.short_of_count > 0 || !in_place || crashed {
        scan(&source, &sink, &mut report, &mut unreadable, &mut damage, &refuse_scanned)?;
    }
    for key in &unreadable {
        if !has(&sink, key, hash_key(key))? {
            report.dropped += 1;
        }
    }
    Ok(report)
}

/// The chain of `bucket`, to read its head.
fn chain_of<'a>(whole: &'a WholeFile<'a>, bucket: u64) -> super::chain_lock::Chain<'a> {
    whole.chain(bucket)
}

/// Appending mode: the damage that may hide a key's newest version. Every version of a key
/// is in its bucket's chain, newest first, and file order is age; so a record of bucket `b`
/// that fails its check at offset `d` may be the newest version of any key of `b` whose
/// intact versions all lie before `d` (its own key bytes may be the damaged ones, and a
/// flipped key byte can even read as another written key). Such keys are dropped, never
/// revived with an older value. A chain broken by a pointer counts the same when the
/// pointer leads into a region the scan found damaged; a pointer that leads into intact
/// records is itself the damage, and hides nothing.
#[derive(Debug, Default)]
struct Shadows {
    /// (bucket, offset) of records whose check failed in a chain walk.
    failed: Vec<(u64, u64)>,
    /// (bucket, target) of the pointers a chain walk could not follow.
    broken: Vec<(u64, u64)>,
    /// [start, end) of the stretches the scan could not read as intact blocks.
    regions: Vec<(u64, u64)>,
    /// Whether failed records count as damage at all (see `salvage`).
    active: bool,
    /// Keys an intact tombstone removed, met by a chain walk before any damage.
    tombstoned: HashSet<Vec<u8>>,
    /// Records a chain walk took whose own chain pointer it could not follow: whole records
    /// (their checks passed where their bucket's chain led), whatever that pointer says.
    vouched: HashSet<u64>,
}

impl Shadows {
    /// The damaged blocks of each bucket, which may hide a newer version of its keys.
    /// `latest`: each key's last intact version (the scan's).
    fn damaged_blocks(
        &self,
        source: &Storage,
        whole: &WholeFile<'_>,
        latest: &HashMap<Vec<u8>, (u64, Option<Vec<u8>>)>,
    ) -> HashMap<u64, Vec<DamagedBlock>> {
        if !self.active {
            return HashMap::new();
        }
        // A pointer to a record whose tag a flip turned into a filler byte leads to that byte,
        // which the scan steps over as a filler: its damaged stretch starts one byte after
        // the pointer's target. No writer points at a filler, so that pointer counts too.
        let in_region =
            |at: u64| self.regions.iter().any(|&(start, end)| (start..end).contains(&at) || stretch_is_of(start, at));
        let attributed = self.broken.iter().filter(|&&(_, at)| in_region(at));
        let damaged: Vec<(u64, u64)> = self.failed.iter().chain(attributed).copied().collect();
        // Owners are asked for only where every stretch the scan could not read starts at a
        // damaged block a chain met, so that each block's stretch is its own bytes and no
        // damage lies where no chain looked (which may be another newer version of a key).
        // (And only for a file with a few damaged blocks: naming an owner tries thousands of
        // readings of a block, and a file damaged all over is restored as before.)
        let owned = damaged.len() <= MAX_OWNED_BLOCKS
            && self.regions.iter().all(|&(start, _)| damaged.iter().any(|&(_, at)| stretch_is_of(start, at)));
        let buckets = source.header.num_buckets;
        let mut candidates: HashMap<u64, Vec<(&[u8], u64)>> = HashMap::new();
        if owned {
            for &(bucket, _) in &damaged {
                candidates.entry(bucket).or_default();
            }
            for (key, &(at, _)) in latest {
                if let Some(keys) = candidates.get_mut(&bucket_of(hash_key(key), buckets)) {
                    keys.push((key.as_slice(), at));
                }
            }
        }
        let mut blocks: HashMap<u64, Vec<DamagedBlock>> = HashMap::new();
        for (bucket, at) in damaged {
            let owner = owned
                .then(|| {
                    let stretch =
                        self.regions.iter().find(|&&(start, _)| stretch_is_of(start, at)).map(|&(_, end)| end - at);
                    let older: Vec<&[u8]> = candidates
                        .get(&bucket)
                        .map(|keys| keys.iter().filter(|&&(_, version)| version < at).map(|&(key, _)| key).collect())
                        .unwrap_or_default();
                    damaged_owner::owner(source, whole, bucket, at, stretch, &older)
                })
                .flatten();
            blocks.entry(bucket).or_default().push(DamagedBlock { offset: at, owner });
        }
        blocks
    }
}

/// Whether a stretch the scan could not read, starting at `start`, is the block at `at`'s:
/// it starts there, or one byte further when the block's tag was zeroed (a filler byte the
/// scan steps over).
fn stretch_is_of(start: u64, at: u64) -> bool {
    start == at || start == at.saturating_add(1)
}

/// The most damaged blocks whose owners a restore asks for (`Shadows::damaged_blocks`).
const MAX_OWNED_BLOCKS: usize = 1024;

/// Appending mode: a block of a bucket's chain that failed its check (or that a pointer of
/// the chain led to and no intact record starts at).
#[derive(Debug)]
struct DamagedBlock {
    offset: u64,
    /// The key whose version it was, where its bytes tell (damaged_owner.rs); None where it
    /// may have been any key's.
    owner: Option<Vec<u8>>,
}

impl DamagedBlock {
    /// Whether this block may be a newer version of `key`, whose last intact version is at
    /// `at`: file order is age in appending mode.
    fn may_hide(&self, key: &[u8], at: u64) -> bool {
        at < self.offset && self.owner.as_deref().is_none_or(|owner| owner == key)
    }
}

/// Blocks `starts_block` follows past fillers and free spans before it gives up (and the
/// span that asked is not believed).
const MAX_BLOCKS_FOLLOWED: usize = 16;

/// Whether `at` can start a block: the end of the area, or a record or dead record whose
/// checksum matches, reached through any fillers and free spans that start there (each
/// followed to its end). A zero byte alone proves nothing: zeros lie inside records (a
/// `next` of 0, a value) and inside a span's unused bytes. A span's tag torn from its length
/// at a page boundary (the tag new, the length an old byte) once ended on such a zero and
/// was believed, skipping a live record (the ShardDbm power-loss run, in place, round 62).
fn starts_block(source: &Storage, whole: &WholeFile<'_>, mut at: u64, end: u64) -> bool {
    for _ in 0..MAX_BLOCKS_FOLLOWED {
        if at >= end {
            return at == end;
        }
        match source.scan_block(whole, at) {
            Ok(Block::Filler) => at = at.saturating_add(source.zero_run(whole, at).max(1)),
            Ok(Block::FreeSpan { len }) if span_in_area(source, at, len) => at = at.saturating_add(len),
            Ok(Block::FreeSpan { .. }) => return false,
            Ok(Block::Record(header)) if !points_into_records(source, &header) => return false,
            Ok(Block::Record(header)) => {
                return source.key_of(whole.chain(0), at, &header).is_ok_and(|key| {
                    let hash = hash_key(key);
                    let flags: &[bool] =
                        if header.kind() == KIND_FREE { &[false, true] } else { &[header.is_compressed()] };
                    flags.iter().any(|&compressed| source.checksum_matches(whole, at, &header, hash, compressed))
                })
            }
            Err(_) => return false,
        }
    }
    false
}

/// Whether a record's chain pointer is 0 or points into the record area, as every pointer a
/// writer makes does: bytes read as a record while resynchronizing often point elsewhere.
fn points_into_records(source: &Storage, header: &RecordHeader) -> bool {
    header.next == 0 || header.next >= source.header.data_start()
}

/// Whether the record at `offset` of an appending file (key hash `hash`) points where every
/// record of such a file points: to nothing (0), or back to an older record of its own
/// bucket, the head of the bucket when it was written. Appending mode writes each pointer
/// once, with its record, and never overwrites a byte, so a synchronized record's successor
/// was synchronized too and is intact after a power loss: a record this drops was written
/// since, and its key keeps its older version. Bytes read as a record while the scan
/// resynchronizes (a torn block, the inside of a value) point at such a record by chance
/// only, and otherwise pass with their 13-bit check once in 8,192 (the appending ShardDbm
/// set's power-loss run, round 148, read a key never written out of a record's text).
fn links_back_in_its_chain(
    source: &Storage,
    whole: &WholeFile<'_>,
    offset: u64,
    header: &RecordHeader,
    hash: u64,
    damaged: &[(u64, u64)],
    damage_open_since: Option<u64>,
) -> bool {
    if header.next == 0 {
        return true;
    }
    if header.next >= offset || !points_into_records(source, header) {
        return false;
    }
    // An older record that is damaged itself (the scan could not read a block starting
    // there, in a stretch it closed or in the one it is still in) no longer reads as a
    // record of this bucket, and its successor is still whole: taken for bytes read as a
    // record, it was lost with it, and its stretch hid whose the damaged record was
    // (damaged_owner.rs). A record whose tag was zeroed reads as a filler byte, and its
    // stretch starts one byte further.
    let starts = |start: u64| stretch_is_of(start, header.next);
    if damaged.iter().any(|&(start, _)| starts(start)) || damage_open_since.is_some_and(starts) {
        return true;
    }
    let buckets = source.header.num_buckets;
    match source.scan_block(whole, header.next) {
        Ok(Block::Record(older)) => source.key_of(whole.chain(0), header.next, &older).is_ok_and(|key| {
            let older_hash = hash_key(key);
            // Appending mode writes no dead record: one here is a record whose tag a flip
            // made dead, believed only with its check intact (see `scan`).
            bucket_of(older_hash, buckets) == bucket_of(hash, buckets)
                && (older.kind() != KIND_FREE
                    || source.checksum_matches_either_way(whole, header.next, &older, older_hash))
        }),
        _ => false,
    }
}

/// Whether a free span at `offset` of `len` bytes ends within the record area as the file's
/// header last recorded it. Spans are written by a hard synchronization over the records it
/// frees, and since then only inside blocks that were free then, so every span ends at or
/// before the data end that synchronization wrote (and the end only grows until a clear or
/// a close). A torn span's length can reach far past it, into the growth margin's zeros,
/// which read as the end of the area (the ShardDbm power-loss run, in place, round 149: a
/// tag and its first length byte new, the second an old byte, 7,310 bytes that skipped a
/// live record).
fn span_in_area(source: &Storage, offset: u64, len: u64) -> bool {
    offset.saturating_add(len) <= source.header.data_end
}

/// Whether the record read at `offset` is the shadow of an intact dead record starting one
/// byte further and ending where it ends: read from the byte before it (the last byte of
/// the previous block), with the dead tag as the first byte of a one byte longer `next`.
///
/// A dead tag (`11 0 sssss`) has its top bit set, so read as a varint byte it continues
/// into the record's own `next` bytes, and the key, value and check byte that follow are
/// the dead record's. If the byte before the dead tag equals the record's tag when it was
/// live (`01 C sssss`: an ASCII `a` to `f` is one), that byte and the dead record read as an
/// intact live record, and a scan resynchronizing byte by byte meets it first: a removed
/// record came back after a power loss (`KURA_POWERLOSS_IMAGES=10000`, round 125).
///
/// The reverse reading drops a real record: one whose `next` field is two bytes or more and
/// starts with `110sssss`, its own checksum bits (1 in 128 pointers: 2 bits fixed, 5 bits
/// equal), reads one byte further as an intact dead record with the same key, value and
/// check byte. That dead record's `next` is the real pointer shifted right by 7 bits, and a
/// dead record's `next` was written by a writer: 0 or a record offset, never inside the
/// header and bucket area. So a dead record whose `next` points there is no dead record, and
/// the rule holds only for a real pointer of at least 128 times `data_start` (640 MiB with
/// the default million buckets): docs/durability.md says what remains.
fn shadows_dead_record(source: &Storage, whole: &WholeFile<'_>, offset: u64, header: &RecordHeader) -> bool {
    let next = offset.saturating_add(1);
    match source.scan_block(whole, next) {
        Ok(Block::Record(dead))
            if dead.kind() == KIND_FREE
                && next + dead.total_len() == offset + header.total_len()
                && points_into_records(source, &dead) =>
        {
            source
                .key_of(whole.chain(0), next, &dead)
                .is_ok_and(|key| source.checksum_matches_either_way(whole, next, &dead, hash_key(key)))
        }
        _ => false,
    }
}

/// Whether the record read at `offset` is the dead record that a free span starting one byte
/// before covers, read with the span's length byte as its tag.
///
/// A hard synchronization writes a free span over each run of records it frees: its tag over
/// the first record's tag, its length (one varint byte below 128) over the first byte of
/// that record's `next` field, which is padded to two bytes or more whenever it points
/// anywhere. Read from the length byte, the rest of the `next` field is a shorter valid one,
/// and the dead record's key, value and check bytes follow. A length of 64 to 127 reads as a
/// live tag, and when its low bits equal the record's check bits, as an intact record: a
/// scan resynchronizing byte by byte after a torn block met it and brought a removed record
/// back (the power-loss test that cuts checkpoints, in place, 20,000 images, operation 3,684).
///
/// The reverse reading would drop a real record only if the byte before it (the last byte
/// of the block before) is 0xE0 and the record is shorter than its own tag's value, and only
/// where the chains did not reach it.
fn lies_under_free_span(source: &Storage, whole: &WholeFile<'_>, offset: u64, header: &RecordHeader) -> bool {
    let Some(span_start) = offset.checked_sub(1) else { return false };
    match source.scan_block(whole, span_start) {
        Ok(Block::FreeSpan { len }) => {
            span_in_area(source, span_start, len)
                && offset.saturating_add(header.total_len()) <= span_start.saturating_add(len)
        }
        _ => false,
    }
}

/// Adds every intact record of the record area whose key `sink` does not have yet.
///
/// In appending mode nothing written is ever overwritten, so a later block of a key is a
/// newer version: the last intact version of each key in file order wins (a tombstone:
/// absent). Taking the first would resurrect a value replaced long ago when a power loss
/// broke the chain in front of the newer ones. In place, space is reused and file order
/// says nothing about age; there only live records exist besides dead (freed) ones, and the
/// first intact record of a key is taken.
///
/// The walk steps from block to block by their lengths while it is sure to stand at the
/// start of a block: at the start of the area, and after an intact record or dead record
/// (its checksum matched), a free span or a single filler byte. Elsewhere (after a block
/// that failed its checksum or did not parse, or a run of zeros, which a power loss leaves
/// where pages were not written) it may stand inside a block, and then only an intact record
/// or dead record resynchronizes it: it moves one byte at a time, and a free-span tag or a
/// dead tag that fails its checksum is not believed. (A byte 0xE0 inside a value read as a
/// free span used to skip the live records after it.) Zero bytes are skipped in one step:
/// no block starts with one but a filler byte.
fn scan(
    (source, whole): &Whole<'_>,
    sink: &Whole<'_>,
    report: &mut Salvage,
    unreadable: &mut HashSet<Vec<u8>>,
    damage: &mut Shadows,
    refuse_scanned: &HashSet<u64>,
) -> Result<()> {
    let appending = source.header.update_mode == UpdateMode::Appending;
    // Appending mode: each key's last intact version in file order, and where it lies.
    let mut latest: HashMap<Vec<u8>, (u64, Option<Vec<u8>>)> = HashMap::new();
    let mut lost_since: Option<u64> = None;
    // Where chain walks met records that failed their checks, and those of them that lie
    // inside blocks the scan found whole.
    let failed_starts: std::collections::BTreeSet<u64> = damage.failed.iter().map(|&(_, at)| at).collect();
    let mut inside_blocks: HashSet<u64> = HashSet::new();
    let mut offset = source.header.data_start();
    // The end of the record area: the file's end after a crash (records may have been
    // appended after the header was last written), the header's `data_end` in a file closed
    // cleanly, whose saved free list follows it: its varints are no records, and read as
    // one with a matching 13-bit check they would give a value never written.
    let end = source.space.end().min(source.file_len());
    let mut value = Vec::new();
    // Whether `offset` is known to start a block.
    let mut aligned = true;
    while offset < end {
        let (step, at_block) = match source.scan_block(whole, offset) {
            // Filler bytes are zeros, and a crashed file often ends in a long run of them (its
            // growth margin): skip the run at once.
            Ok(Block::Filler) => {
                let run = source.zero_run(whole, offset).max(1);
                (run, aligned && run == 1)
            }
            // A span's length has no checksum: believed only if a block starts where it ends
            // (a power loss can tear the tag from its length at a sector boundary).
            Ok(Block::FreeSpan { len })
                if aligned
                    && span_in_area(source, offset, len)
                    && starts_block(source, whole, offset.saturating_add(len), end) =>
            {
                (len, true)
            }
            Ok(Block::Record(header)) => {
                let kind = header.kind();
                // The record belongs to some chain (or none): the whole file is ours either way.
                let chain = whole.chain(0);
                // No block runs past the end of the record area (in a file closed cleanly, into
                // its free list), nor points into the header and buckets (but a record a chain
                // walk took, whose own pointer may be the damaged bytes: see below).
                let vouched = appending && damage.vouched.contains(&offset);
                let inside = offset.saturating_add(header.total_len()) <= end
                    && (vouched || points_into_records(source, &header));
                let (true, Ok(key)) = (inside, source.key_of(chain, offset, &header)) else {
                    lost_since = lost_since.or(Some(offset));
                    offset = offset.saturating_add(1);
                    aligned = false;
                    continue;
                };
                let hash = hash_key(key);
                let whole_block = (header.total_len(), true);
                // Appending mode never writes a dead record: there a dead record one byte
                // further is the inside of this one, never the block. A record a chain walk
                // took, which its chain vouches for, needs no pointer back: its own pointer,
                // under no check, may be what the damage changed (refused, it was lost, and
                // its key and value read one byte further as a dead record that passed). Not
                // so any record with the wide check: bytes read one byte into a record share
                // its key, value and 32 of its 37 check bits, and a tombstone read so as a
                // record brought its removed key back with an empty value.
                if appending
                    && !vouched
                    && !links_back_in_its_chain(source, whole, offset, &header, hash, &damage.regions, lost_since)
                {
                    (1, false)
                } else if !appending
                    && !aligned
                    && kind != KIND_FREE
                    && (shadows_dead_record(source, whole, offset, &header)
                        || lies_under_free_span(source, whole, offset, &header))
                {
                    // The dead record one byte further, or the free span one byte before, is
                    // the block (see the functions).
                    (1, false)
                } else if kind == KIND_TOMBSTONE && header.value_len != 0 {
                    // A tombstone's value is empty (docs/format.md): this is the inside of a
                    // record read as one, as the last bytes of a padded `next` field (a
                    // continuation byte `10 0 sssss`, then 0) are, with the record's own key,
                    // value and check byte after them. Taken, it removed that record's key
                    // (the 10,000-image run in appending mode, round 198).
                    (1, false)
                } else if kind == KIND_FREE {
                    let intact = source.checksum_matches_either_way(whole, offset, &header, hash);
                    if intact && appending {
                        // Appending mode never writes a dead record: this is a record or a
                        // tombstone whose tag a flip made dead (its checksum bits are kept),
                        // and it may have been the newest version of its key.
                        damage.failed.push((bucket_of(hash, source.header.num_buckets), offset));
                    }
                    if intact {
                        whole_block
                    } else {
                        (1, false)
                    }
                } else if source.read_value(chain, offset, &header, hash, &mut value).is_ok() {
                    let key = key.to_vec();
                    if appending {
                        latest.insert(key, (offset, (kind == KIND_RECORD).then(|| value.clone())));
                    } else if kind == KIND_RECORD
                        && !refuse_scanned.contains(&bucket_of(hash, source.header.num_buckets))
                        && !has(sink, &key, hash)?
                    {
                        insert(sink, &key, hash, &value)?;
                        report.from_scan += 1;
                    }
                    whole_block
                } else if source.checksum_matches(whole, offset, &header, hash, header.is_compressed()) {
                    // Whole, but its dictionary failed its own checksum.
                    if kind == KIND_RECORD && source.dictionary_damaged() {
                        unreadable.insert(key.to_vec());
                    }
                    whole_block
                } else {
                    (1, false)
                }
            }
            // Not a block start that can be trusted: resynchronize one byte further.
            Ok(Block::FreeSpan { .. }) | Err(_) => (1, false),
        };
        if at_block && step > 1 {
            // A chain walk that followed a damaged pointer into the middle of this block met
            // no record there: the block is whole, and that "damaged record" hides nothing.
            inside_blocks.extend(failed_starts.range(offset.saturating_add(1)..offset.saturating_add(step)));
        }
        match (at_block, lost_since) {
            (false, None) => lost_since = Some(offset),
            (true, Some(start)) => {
                damage.regions.push((start, offset));
                lost_since = None;
            }
            _ => {}
        }
        aligned = at_block;
        offset = offset.saturating_add(step.max(1));
    }
    if let Some(start) = lost_since {
        damage.regions.push((start, end.max(start.saturating_add(1))));
    }
    damage.failed.retain(|(_, at)| !inside_blocks.contains(at));
    let damaged = damage.damaged_blocks(source, whole, &latest);
    let buckets = source.header.num_buckets;
    for (key, (at, value)) in latest {
        if damage.tombstoned.contains(&key) {
            continue;
        }
        let hash = hash_key(&key);
        let shadowed = damaged
            .get(&bucket_of(hash, buckets))
            .is_some_and(|blocks| blocks.iter().any(|block| block.may_hide(&key, at)));
        if shadowed {
            if !has(sink, &key, hash)? {
                report.shadowed += 1;
            }
            continue;
        }
        let Some(value) = value else { continue };
        if !has(sink, &key, hash)? {
            insert(sink, &key, hash, &value)?;
            report.from_scan += 1;
        }
    }
    Ok(())
}
