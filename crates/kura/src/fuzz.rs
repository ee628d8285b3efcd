//! Entry points that take arbitrary bytes: what the `cargo fuzz` targets in `fuzz/` call, and
//! what `tests/fuzz_corpus.rs` replays their committed corpus through on the stable toolchain.
//!
//! Each function drives one reader of untrusted bytes (a database file of any engine, a codec
//! frame) as far as it goes and returns normally on any typed error. A panic, a hang or an
//! allocation sized by an unchecked length is the bug the fuzzer looks for; the functions also
//! panic themselves where the library broke a promise that holds on any input (a value read
//! back that differs from the one the same handle just showed, a codec that does not round
//! trip), so that the fuzzer reports it. The input layouts are documented in docs/fuzzing.md.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

use xxhash_rust::xxh3::xxh3_64;

use crate::codec::{Codec, CodecKind, Effort, Residence};
use crate::dbm::{DbmExt, OpenMode, Params};
use crate::hash_dbm::header::MAGIC as HASH_MAGIC;
use crate::hash_dbm::header::{
    Header as HashHeader, COPY_OFFSET as HASH_COPY_OFFSET, HEADER_BYTES as HASH_HEADER_SIZE,
};
use crate::hash_dbm::record::{
    append_wide_check, checksum as record_checksum, encode_record_header, parse_block, Block, RecordHeader, KIND_FREE,
    MAX_HEADER_SIZE,
};
use crate::hash_dbm::storage::hash_key;
use crate::memory_dbm::snapshot::MAGIC as SNAPSHOT_MAGIC;
use crate::registry::{engines, Engine};
use crate::tree_dbm::format::{
    SlotHeader, DATA_START as TREE_DATA_START, HEADER_SIZE as TREE_HEADER_SIZE, MAGIC as TREE_MAGIC,
    SLOT_HEADER_SIZE as TREE_SLOT_HEADER_SIZE,
};

/// Selector bit of `open_file`: open for writing (a writer restores a crashed file).
const OPEN_WRITABLE: u8 = 0x10;
/// Selector bit of `open_file`: make the checksums right that a file's writer would have
/// written (a memory snapshot's header, blocks and trailer; a HashDbm header, its dictionary, free list and
/// records; both TreeDbm header copies and the tree's page slots), so that the code behind
/// them sees the mutated bytes rather than stopping at a checksum (see `fix_checksums`).
const FIX_CHECKSUMS: u8 = 0x20;
/// Selector bit of `open_file`: salvage the file first (`kura restore`, for the engines that
/// have it) and read the salvaged copy.
const RESTORE_FIRST: u8 = 0x40;
/// Selector bit of `codec_decode`: the bytes are a compressed frame (else stored raw).
const DECODE_COMPRESSED: u8 = 0x08;
/// Selector bit of `codec_decode`: a zstd-dict input starts with a dictionary (2-byte length).
const DECODE_WITH_DICTIONARY: u8 = 0x10;
/// Selector bit of `codec_decode`: the codec is one for memory (CompactDbm's, see
/// `codec/residence.rs`), which decodes magicless zstd frames besides standard ones.
const DECODE_IN_MEMORY: u8 = 0x20;
/// The whole-file and header checksums `fix_checksums` rewrites are each an xxh3-64 in the
/// last 8 bytes of what they cover: a memory snapshot of version 1 or 2 (docs/memory.md), the HashDbm
/// header's bytes 120..128 (docs/format.md) and each TreeDbm header copy's (docs/tree.md).
const CHECKSUM_LEN: usize = 8;

/// The engine a selector byte picks, by its position in the registry.
pub fn engine_of_selector(selector: u8) -> &'static Engine {
    let all = engines();
    let index = usize::from(selector & 0x0f) % all.len();
    all.get(index).expect("the index is taken modulo the engine count")
}

/// Opens `data[1..]` as a database file of the engine `data[0]` selects (see the selector bits
/// above), reads every record with a cursor, gets each key again and closes. Any error is a
/// fine outcome; a panic is not. A key whose `get` succeeds must give the value the cursor
/// showed, unless the cursor showed that key more than once; so must a value `get_many` gives.
pub fn open_file(data: &[u8]) {
    let Some((&selector, file_bytes)) = data.split_first() else { return };
    let engine = engine_of_selector(selector);
    let mut bytes = file_bytes.to_vec();
    if selector & FIX_CHECKSUMS != 0 {
        fix_checksums(&mut bytes);
    }
    let dir = scratch_dir();
    let path = dir.join(format!("input.{}", engine.extension));
    if std::fs::create_dir_all(&dir).and_then(|()| std::fs::write(&path, &bytes)).is_err() {
        return;
    }
    let mode = if selector & OPEN_WRITABLE != 0 { OpenMode::Write } else { OpenMode::ReadOnly };
    if selector & RESTORE_FIRST != 0 {
        let salvaged = dir.join(format!("salvaged.{}", engine.extension));
        if engine.restore(&path, &salvaged).is_ok() {
            read_everything(engine, &salvaged, mode);
        }
    } else {
        read_everything(engine, &path, mode);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The engines that keep a journal, which `journal_replay` chooses among: the registry's
/// single-file engines, in its order (named nowhere here).
fn journaled_engines() -> Vec<&'static Engine> {
    engines().iter().filter(|e| e.storage == crate::registry::Storage::File && !e.shard_set).collect()
}

/// Selector bit of `journal_replay`: the database is of the second journaled engine (the
/// registry's single-file engines in its order: TreeDbm), else of the first (HashDbm).
const JOURNAL_TREE: u8 = 0x01;
/// Selector bit of `journal_replay`: rewrite the journal's header and frame checksums to match
/// the mutated bytes (`journal::fix_checksums`), so that entries are decoded and replayed.
const JOURNAL_FIX_CHECKSUMS: u8 = 0x02;
/// Selector bit of `journal_replay`: salvage the database first (`kura restore`, which replays
/// the journal into the copy) and read the copy.
const JOURNAL_RESTORE_FIRST: u8 = 0x04;
/// Records of the database beside the fuzzed journal.
const JOURNAL_BASE_RECORDS: u32 = 40;

/// Writes `data[1..]` as the journal beside a small, cleanly closed database of the engine
/// `data[0]` selects (TreeDbm or HashDbm, see the selector bits above) and opens it for writing,
/// which replays the journal's whole frames (or salvages it first). Any typed error is a fine
/// outcome; a panic is not. After an open that succeeded, every key the cursor shows must `get`
/// the value it showed, the count must be the cursor's, and the database must take a write and
/// close.
pub fn journal_replay(data: &[u8]) {
    let Some((&selector, journal)) = data.split_first() else { return };
    let mut journal = journal.to_vec();
    if selector & JOURNAL_FIX_CHECKSUMS != 0 {
        crate::journal::fix_checksums(&mut journal);
    }
    let Some(&engine) = journaled_engines().get(usize::from(selector & JOURNAL_TREE != 0)) else { return };
    let dir = scratch_dir();
    let path = dir.join(format!("input.{}", engine.extension));
    let made = std::fs::create_dir_all(&dir).is_ok() && {
        match engine.open(&path, OpenMode::Truncate, &small_params(engine)) {
            Ok(db) => {
                for i in 0..JOURNAL_BASE_RECORDS {
                    let _ = db.set(format!("key{i}").as_bytes(), format!("value{i}").as_bytes(), true);
                }
                db.close().is_ok()
            }
            Err(_) => false,
        }
    };
    if made && std::fs::write(crate::journal::journal_path(&path), &journal).is_ok() {
        if selector & JOURNAL_RESTORE_FIRST != 0 {
            let salvaged = dir.join(format!("salvaged.{}", engine.extension));
            if engine.restore(&path, &salvaged).is_ok() {
                check_replayed(engine, &salvaged);
            }
        } else {
            check_replayed(engine, &path);
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Opens a database whose journal was replayed for writing and checks that it agrees with
/// itself (see `journal_replay`).
fn check_replayed(engine: &Engine, path: &std::path::Path) {
    let Ok(db) = engine.open(path, OpenMode::Write, &small_params(engine)) else { return };
    let mut shown = 0u64;
    if let Ok(records) = db.records() {
        for record in records {
            let Ok((key, value)) = record else { return };
            shown += 1;
            match db.get(&key) {
                Ok(got) => {
                    assert_eq!(got, value, "{}: a replayed key reads back unlike the cursor showed it", engine.name)
                }
                Err(e) => assert!(!e.is_not_found(), "{}: a key the cursor showed is missing: {e}", engine.name),
            }
        }
        if let Ok(count) = db.count() {
            assert_eq!(count, shown, "{}: count() after a replay is not the cursor's", engine.name);
        }
    }
    let _ = db.set(b"after the replay", b"written", true);
    let _ = db.close();
}

/// Selector bits of `import_lines`: JSON lines (else TSV), skip malformed lines (else stop
/// at the first), two writer lanes (else one); bits 3-4 are the batch size minus one; bit 5
/// makes TSV escaped TSV.
const IMPORT_JSONL: u8 = 0x01;
const IMPORT_SKIP_BAD: u8 = 0x02;
const IMPORT_TWO_LANES: u8 = 0x04;
const IMPORT_BATCH_SHIFT: u8 = 3;
const IMPORT_ESCAPED: u8 = 0x20;
/// The generated keys' prefix in `import_lines`: fixed, so that the model can predict them.
const IMPORT_KEYLESS_PREFIX: &str = "keyless-";
/// The initial cell count of `import_lines`' TinyDbm (over all its slots).
const IMPORT_NUM_BUCKETS: u64 = 256;

/// Imports `data[1..]` (TSV, escaped TSV or JSON lines, as `data[0]` selects) through the import pipeline
/// (reader, parsers, writer lanes, batches) into a TinyDbm, and checks the outcome against a
/// model that parses the same lines one by one: the same records, the last line of a key
/// winning, nothing after the first malformed line unless malformed lines are skipped, the
/// same counts. Any typed error from the pipeline is a fine outcome only where the model
/// found a malformed line.
pub fn import_lines(data: &[u8]) {
    use std::collections::BTreeMap;

    use crate::import::chunks::ChunkReader;
    use crate::import::parse::{parse_line, Format, Row};
    use crate::import::pipeline::{run, Settings};

    let Some((&selector, input)) = data.split_first() else { return };
    let format = match (selector & IMPORT_JSONL != 0, selector & IMPORT_ESCAPED != 0) {
        (true, _) => Format::Jsonl,
        (false, true) => Format::EscapedTsv,
        (false, false) => Format::Tsv,
    };
    let skip_bad = selector & IMPORT_SKIP_BAD != 0;
    let lanes = if selector & IMPORT_TWO_LANES != 0 { 2 } else { 1 };
    let batch = usize::from((selector >> IMPORT_BATCH_SHIFT) & 0x03) + 1;
    let settings = Settings {
        format,
        batch,
        skip_bad,
        parsers: 1,
        writing: lanes,
        keyless_prefix: IMPORT_KEYLESS_PREFIX.to_string(),
    };
    // Few cells to start with (the table grows as records come): the default 65,536 cells
    // cost more to create, walk and drop than a short input costs to import.
    let Ok(db) = crate::memory_dbm::TinyDbm::new(&Params::new().with("num_buckets", IMPORT_NUM_BUCKETS)) else {
        return;
    };
    let mut reader = ChunkReader::new(input, "fuzz input".to_string());
    let outcome = run(&mut reader, &[&db], lanes, &settings, &|_| {});

    // The model: every line of the input in order (inputs here are one chunk).
    let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    let (mut stored, mut skipped, mut keyless, mut bad_line) = (0u64, 0u64, 0u64, None);
    if !input.is_empty() {
        let body = input.strip_suffix(b"\n").unwrap_or(input);
        for (line, number) in body.split(|&b| b == b'\n').zip(1u64..) {
            match parse_line(format, line) {
                Ok(Row::Keyed { key, value }) => {
                    model.insert(key.into_owned(), value.into_owned());
                }
                Ok(Row::Keyless { value }) => {
                    keyless += 1;
                    let key = format!("{IMPORT_KEYLESS_PREFIX}{number:012}").into_bytes();
                    model.insert(key, value.into_owned());
                }
                Err(_) if skip_bad => {
                    skipped += 1;
                    continue;
                }
                Err(_) => {
                    bad_line = Some(number);
                    break;
                }
            }
            stored += 1;
        }
    }
    let outcome = outcome.expect("an in-memory import of a small input fails only on a bad line, which it reports");
    assert_eq!(outcome.bad_line.as_ref().map(|bad| bad.line), bad_line, "the first malformed line");
    assert_eq!((outcome.stored, outcome.skipped, outcome.keyless), (stored, skipped, keyless), "the counts");
    let mut imported: Vec<(Vec<u8>, Vec<u8>)> =
        db.records().expect("a TinyDbm cursor").map(|record| record.expect("a TinyDbm record")).collect();
    imported.sort();
    let expected: Vec<(Vec<u8>, Vec<u8>)> = model.into_iter().collect();
    assert!(imported == expected, "the imported records differ from the lines' records");
}

fn read_everything(engine: &Engine, path: &std::path::Path, mode: OpenMode) {
    let Ok(db) = engine.open(path, mode, &small_params(engine)) else { return };
    let mut seen: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
    if let Ok(records) = db.records() {
        for record in records {
            match record {
                Ok(record) => seen.push(record),
                Err(_) => break,
            }
        }
    }
    seen.sort();
    // The batched read walks its own paths (pipelined chains, leaf runs): it must agree too.
    let keys: Vec<&[u8]> = seen.iter().map(|(key, _)| key.as_slice()).collect();
    let batch = db.get_many(&keys).ok();
    if let Some(values) = &batch {
        assert_eq!(values.len(), keys.len(), "{}: get_many gave another number of results", engine.name);
    }
    for (i, (key, value)) in seen.iter().enumerate() {
        let repeated = seen.get(i + 1).is_some_and(|(next, _)| next == key)
            || i.checked_sub(1).and_then(|p| seen.get(p)).is_some_and(|(previous, _)| previous == key);
        if let Ok(got) = db.get(key) {
            assert!(repeated || &got == value, "{}: get and the cursor disagree on a key's value", engine.name);
        }
        if let Some(Some(got)) = batch.as_ref().and_then(|values| values.get(i)) {
            assert!(repeated || got == value, "{}: get_many and the cursor disagree on a key's value", engine.name);
        }
    }
    let _ = db.count();
    let _ = db.inspect().map(|stats| stats.properties());
    let _ = db.close();
}

/// Parameters that keep an open cheap: few buckets where the engine has them, and the
/// registry's sizing for engines that cannot open without a parameter.
fn small_params(engine: &Engine) -> Params {
    let params = engine.bench_params(1000);
    if engine.params.contains(&"num_buckets") {
        params.with("num_buckets", 64)
    } else {
        params
    }
}

/// Rewrites the checksums the file's magic announces, as its writer would have: a snapshot's
/// (`snapshot::fix_checksums`); a HashDbm header's bytes 120..128 and what `fix_hash_checksums` adds; each
/// TreeDbm header copy's bytes 120..128 and the checksum of each of the tree's page slots.
fn fix_checksums(bytes: &mut [u8]) {
    if bytes.starts_with(HASH_MAGIC) {
        fix_hash_checksums(bytes);
        return;
    }
    if bytes.starts_with(TREE_MAGIC) {
        bytes.chunks_exact_mut(TREE_HEADER_SIZE).take(2).for_each(fix_trailing_checksum);
        fix_tree_slot_checksums(bytes);
        return;
    }
    if bytes.starts_with(SNAPSHOT_MAGIC) {
        crate::memory_dbm::snapshot::fix_checksums(bytes);
    }
}

/// Writes the xxh3-64 of all but the last 8 bytes of `covered` into those 8 bytes.
fn fix_trailing_checksum(covered: &mut [u8]) {
    let Some(body_len) = covered.len().checked_sub(CHECKSUM_LEN) else { return };
    let (body, checksum) = covered.split_at_mut(body_len);
    checksum.copy_from_slice(&xxh3_64(body).to_le_bytes());
}

/// Rewrites a HashDbm file's checksums (docs/format.md): the header's, so that the header
/// decodes; then each record's, tombstone's and dead record's, walking the record area block
/// by block up to the data end (the end of the file after a crash) or the first block that
/// does not parse; then, from version 2 on, the dictionary's and the free list's, and the
/// header's again. So the value decoders, the codec frames and the dictionary see mutated
/// bytes instead of stopping at a 13-bit check. A mutated length puts the walk out of step
/// with the blocks: it may then take bytes inside later records for headers and rewrite
/// them, which to the fuzzer is one more mutation.
fn fix_hash_checksums(bytes: &mut [u8]) {
    // And the copy at 512 (format version 4), where one starts with the magic.
    for at in [0, HASH_COPY_OFFSET as usize] {
        if let Some(header) = bytes.get_mut(at..at + HASH_HEADER_SIZE).filter(|h| at == 0 || h.starts_with(HASH_MAGIC))
        {
            fix_trailing_checksum(header);
        }
    }
    let file_len = bytes.len() as u64;
    let Ok(mut header) = HashHeader::decode(bytes, file_len) else { return };
    let end = if header.closed_cleanly { header.data_end } else { file_len };
    let layout = header.check_layout();
    let mut offset = header.data_start();
    while offset < end {
        let Ok(start) = usize::try_from(offset) else { break };
        let Some(block_bytes) = bytes.get(start..) else { break };
        let block_len = match parse_block(block_bytes, offset, layout) {
            Ok(Block::Filler) => 1,
            Ok(Block::FreeSpan { len }) => len,
            Ok(Block::Record(record)) => {
                if !fix_record_checksum(bytes, start, &record) {
                    break;
                }
                record.total_len()
            }
            Err(_) => break,
        };
        offset = offset.saturating_add(block_len);
    }
    if !header.has_shared_checksums() {
        return;
    }
    let checksum_of = |offset: u64, len: u32| {
        let start = usize::try_from(offset).ok()?;
        bytes.get(start..start.checked_add(len as usize)?).map(xxh3_64)
    };
    // Without a dictionary or a free list, the field is left as it is: a writer stores the
    // checksum of nothing there, or 0 while the file is open.
    if header.dictionary_len > 0 {
        header.dictionary_checksum = checksum_of(header.dictionary_offset(), header.dictionary_len).unwrap_or(0);
    }
    if header.free_list_len > 0 {
        header.free_list_checksum = checksum_of(header.free_list_offset, header.free_list_len).unwrap_or(0);
    }
    let copies = header.encode_copies();
    if let Some(target) = bytes.get_mut(..copies.len()) {
        target.copy_from_slice(&copies);
    }
}

/// Rewrites the check bits of the record, tombstone or dead record at `start` to match its
/// key and stored value, by encoding its header again with the new check. A dead record's
/// tag has lost the compressed flag its check was computed with (a restore tries both), so
/// one that verifies with either flag is left alone and another gets the check without it.
/// A header its writer would not have written (a size field padded with continuation bytes)
/// is left alone. False if the record runs past the end of the file.
fn fix_record_checksum(bytes: &mut [u8], start: usize, record: &RecordHeader) -> bool {
    let key_start = start + record.header_len;
    let value_start = key_start + record.key_len;
    let (Some(key), Some(value)) =
        (bytes.get(key_start..value_start), bytes.get(value_start..value_start.saturating_add(record.value_len)))
    else {
        return false;
    };
    let key_hash = hash_key(key);
    let dead = record.kind() == KIND_FREE;
    if dead && [false, true].iter().any(|&compressed| record.verifies(record_checksum(key_hash, compressed, value))) {
        return true;
    }
    let check = record_checksum(key_hash, record.is_compressed(), value);
    let mut encoded = [0u8; MAX_HEADER_SIZE];
    let (kind, compressed, width) = (record.kind(), record.is_compressed(), usize::from(record.next_width));
    let mut len =
        encode_record_header(&mut encoded, kind, compressed, check, record.next, width, key.len(), value.len());
    if record.check_wide.is_some() {
        len = append_wide_check(&mut encoded, len, check);
    }
    if len == record.header_len {
        if let (Some(target), Some(source)) = (bytes.get_mut(start..key_start), encoded.get(..len)) {
            target.copy_from_slice(source);
        }
    }
    true
}

/// Rewrites the checksum of each TreeDbm slot (docs/tree.md), walking them from the first
/// by their lengths up to the first header that does not parse, so that the page decoders
/// (leaves, branches, their compressed forms) see mutated pages rather than stopping at the
/// slot's checksum.
fn fix_tree_slot_checksums(bytes: &mut [u8]) {
    let file_end = bytes.len() as u64;
    let mut offset = TREE_DATA_START;
    while let Ok(start) = usize::try_from(offset) {
        let Some(slot_bytes) = bytes.get(start..) else { break };
        let Ok(mut slot) = SlotHeader::decode(slot_bytes, offset, file_end) else { break };
        let body_start = start + TREE_SLOT_HEADER_SIZE;
        let Some(body) = bytes.get(body_start..body_start + slot.stored_len as usize) else { break };
        slot.checksum = slot.checksum_of(offset, body);
        if let Some(header) = bytes.get_mut(start..body_start) {
            header.copy_from_slice(&slot.encode());
        }
        // `decode` checked that the slot ends within the file.
        offset += slot.slot_len;
    }
}

/// A directory of its own for each call (the fuzzer may run several processes at once);
/// under /dev/shm when there is one, so that the file system costs little.
fn scratch_dir() -> PathBuf {
    static CALLS: AtomicU64 = AtomicU64::new(0);
    let shm = PathBuf::from("/dev/shm");
    let base = if shm.is_dir() { shm } else { std::env::temp_dir() };
    let call = CALLS.fetch_add(1, Ordering::Relaxed);
    base.join(format!("kura-fuzz-{}-{call}", std::process::id()))
}

/// Decodes `data` with the codec and residence `data[0]` selects (kind by the low 3 bits, the
/// selector bits above): any error is fine, a panic is not. Then encodes the same bytes with
/// that codec and checks that they decode to themselves.
pub fn codec_decode(data: &[u8]) {
    let Some((&selector, rest)) = data.split_first() else { return };
    let Some(&kind) = CodecKind::ALL.get(usize::from(selector & 0x07) % CodecKind::ALL.len()) else { return };
    let (dictionary, stored) = match rest {
        [high, low, tail @ ..] if kind == CodecKind::ZstdDict && selector & DECODE_WITH_DICTIONARY != 0 => {
            let length = usize::from(u16::from_be_bytes([*high, *low])).min(tail.len());
            let (dictionary, stored) = tail.split_at(length);
            (dictionary.to_vec(), stored)
        }
        _ => (Vec::new(), rest),
    };
    let residence = if selector & DECODE_IN_MEMORY != 0 { Residence::Memory } else { Residence::File };
    let Ok(codec) = Codec::with_residence(kind, dictionary, residence) else { return };
    let mut decoded = Vec::new();
    let _ = codec.decode(stored, selector & DECODE_COMPRESSED != 0, &mut decoded);

    let mut encoded = Vec::new();
    let Ok(compressed) = codec.encode(stored, Effort::Dense, &mut encoded) else { return };
    let mut round_trip = Vec::new();
    assert!(codec.decode(&encoded, compressed, &mut round_trip).is_ok(), "{kind}: its own frame does not decode");
    assert!(round_trip == stored, "{kind}: a frame decodes to other bytes than were encoded");
}

#[cfg(test)]
mod tests {
    #![expect(
        clippy::unwrap_used,
        clippy::indexing_slicing,
        reason = "a test fails loudly on the first broken expectation"
    )]
    use super::*;

    /// The fuzz corpus's selector bit means TreeDbm as it always did: the journaled engines are
    /// HashDbm then TreeDbm.
    #[test]
    fn the_journaled_engines_are_hash_then_tree() {
        let names: Vec<&str> = journaled_engines().iter().map(|e| e.name).collect();
        assert_eq!(names, ["hash", "tree"]);
    }
    use crate::hash_dbm::record::KIND_TOMBSTONE;

    /// The checksum fix-up writes what the engines write: a cleanly closed file of each
    /// engine comes out of it unchanged (else the fuzzer would only see broken checksums).
    #[test]
    fn fixing_the_checksums_of_a_real_file_changes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        for engine in engines() {
            let path = dir.path().join(format!("db.{}", engine.extension));
            let db = engine.open(&path, OpenMode::Create, &small_params(engine)).unwrap();
            db.set(b"key", b"value", true).unwrap();
            db.close().unwrap();
            if !path.exists() {
                // A shard set's files are its shards', each of which is an engine of its own.
                continue;
            }
            let written = std::fs::read(&path).unwrap();
            let mut fixed = written.clone();
            fix_checksums(&mut fixed);
            assert!(fixed == written, "{}: the fix-up rewrote a correct checksum", engine.name);
        }
    }

    /// The blocks of a HashDbm file's record area, in order, with their offsets, up to the
    /// data end (the end of the file after a crash) or the first that does not parse.
    fn hash_blocks(file: &[u8]) -> Vec<(usize, Block)> {
        let header = HashHeader::decode(file, file.len() as u64).unwrap();
        let end = if header.closed_cleanly { header.data_end } else { file.len() as u64 };
        let mut blocks = Vec::new();
        let mut offset = header.data_start();
        while offset < end {
            let start = usize::try_from(offset).unwrap();
            let Ok(block) = parse_block(&file[start..], offset, header.check_layout()) else { break };
            offset += match block {
                Block::Filler => 1,
                Block::FreeSpan { len } => len,
                Block::Record(record) => record.total_len(),
            };
            blocks.push((start, block));
        }
        blocks
    }

    /// A HashDbm file with every kind of block and checksum comes out of the fix-up
    /// unchanged, in both update modes, closed cleanly or copied while its writer had it open.
    #[test]
    fn fixing_the_checksums_of_a_used_hash_file_changes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let engine = engines().iter().find(|engine| engine.extension == "kuh").unwrap();
        let mut kinds_seen = std::collections::BTreeSet::new();
        for (codec, mode) in [("none", "in_place"), ("zstd", "appending"), ("zstd-dict", "in_place")] {
            let path = dir.path().join(format!("{codec}-{mode}.kuh"));
            let params = small_params(engine).with("record_comp", codec).with("update_mode", mode);
            let db = engine.open(&path, OpenMode::Create, &params).unwrap();
            for i in 0..600u32 {
                let value = format!("value {i} {}", "x".repeat(i as usize % 90));
                db.set(format!("key{i:04}").as_bytes(), value.as_bytes(), true).unwrap();
            }
            if codec == "zstd-dict" {
                db.rebuild(&Params::new()).unwrap();
            }
            for i in (0..600u32).step_by(3) {
                db.remove(format!("key{i:04}").as_bytes()).unwrap();
            }
            for i in (1..600u32).step_by(7) {
                db.set(format!("key{i:04}").as_bytes(), b"short", true).unwrap();
            }
            db.synchronize(false).unwrap();
            let while_open = std::fs::read(&path).unwrap();
            db.close().unwrap();
            let closed = std::fs::read(&path).unwrap();
            let header = HashHeader::decode(&closed, closed.len() as u64).unwrap();
            assert_eq!(header.dictionary_len > 0, codec == "zstd-dict", "{codec}: no dictionary to check");
            assert_eq!(header.free_list_len > 0, mode == "in_place", "{codec}, {mode}: no free list to check");
            for (name, written) in [("closed", closed), ("open", while_open)] {
                for (_, block) in hash_blocks(&written) {
                    // Every block of a version 5 file has the wide check: counted beside its kind.
                    if matches!(&block, Block::Record(record) if record.check_wide.is_some()) {
                        kinds_seen.insert("wide check");
                    }
                    kinds_seen.insert(match block {
                        Block::Filler => "filler",
                        Block::FreeSpan { .. } => "free span",
                        Block::Record(record) if record.kind() == KIND_FREE => "dead record",
                        Block::Record(record) if record.kind() == KIND_TOMBSTONE => "tombstone",
                        Block::Record(record) if record.is_compressed() => "compressed record",
                        Block::Record(_) => "record",
                    });
                }
                let mut fixed = written.clone();
                fix_checksums(&mut fixed);
                assert!(fixed == written, "{codec}, {mode}, {name}: the fix-up rewrote a correct checksum");
            }
        }
        let expected = ["compressed record", "dead record", "free span", "record", "tombstone", "wide check"];
        assert!(expected.iter().all(|kind| kinds_seen.contains(kind)), "only {kinds_seen:?} were checked");
    }

    /// The errors met reading every record of the file `bytes`, as text.
    fn read_errors(engine: &Engine, path: &std::path::Path, bytes: &[u8]) -> Vec<String> {
        std::fs::write(path, bytes).unwrap();
        let db = match engine.open(path, OpenMode::ReadOnly, &small_params(engine)) {
            Ok(db) => db,
            Err(e) => return vec![e.to_string()],
        };
        let errors = match db.records() {
            Ok(records) => records.filter_map(|record| record.err().map(|e| e.to_string())).take(1).collect(),
            Err(e) => vec![e.to_string()],
        };
        let _ = db.close();
        errors
    }

    /// Changes one byte at each place `positions` picks in a file of the engine of
    /// `extension` holding 3,000 records, and counts the reads of every record that stopped
    /// at a checksum: without the fix-up, then with it.
    fn reads_stopped_by_a_checksum(extension: &str, positions: impl Fn(&[u8]) -> Vec<usize>) -> (usize, usize) {
        let dir = tempfile::tempdir().unwrap();
        let engine = engines().iter().find(|engine| engine.extension == extension).unwrap();
        let path = dir.path().join(format!("db.{extension}"));
        let db = engine.open(&path, OpenMode::Create, &small_params(engine)).unwrap();
        for i in 0..3000u32 {
            db.set(format!("key{i:06}").as_bytes(), &i.to_le_bytes(), true).unwrap();
        }
        db.close().unwrap();
        let written = std::fs::read(&path).unwrap();
        let (mut stopped_unfixed, mut stopped_fixed) = (0, 0);
        for position in positions(&written) {
            let mut changed = written.clone();
            changed[position] ^= 0x5a;
            let unfixed = read_errors(engine, &path, &changed);
            stopped_unfixed += usize::from(unfixed.iter().any(|e| e.contains("checksum mismatch")));
            fix_checksums(&mut changed);
            let fixed = read_errors(engine, &path, &changed);
            stopped_fixed += usize::from(fixed.iter().any(|e| e.contains("checksum mismatch")));
        }
        (stopped_unfixed, stopped_fixed)
    }

    /// With the slot checksums fixed, a changed byte inside a tree page reaches the page
    /// decoders instead of stopping at the slot's checksum, as it does unfixed.
    #[test]
    fn fixed_tree_slots_let_a_changed_page_through() {
        let forty_places = |file: &[u8]| {
            let start = usize::try_from(TREE_DATA_START).unwrap();
            (start..file.len()).step_by((file.len() - start) / 40).collect()
        };
        let (unfixed, fixed) = reads_stopped_by_a_checksum("kut", forty_places);
        assert!(unfixed > 10, "only {unfixed} changed pages met their checksum");
        assert_eq!(fixed, 0, "fixed slots still stopped at their checksum");
    }

    /// With the record checksums fixed, a changed byte in a HashDbm record's value is read as
    /// it is instead of stopping at the record's check, as it almost always does unfixed
    /// (13 bits: one change in 8,192 keeps it).
    #[test]
    fn fixed_hash_records_let_a_changed_value_through() {
        let every_75th_value = |file: &[u8]| {
            let values = hash_blocks(file).into_iter().filter_map(|(start, block)| match block {
                Block::Record(record) if record.value_len > 0 => Some(start + record.header_len + record.key_len),
                _ => None,
            });
            values.step_by(75).collect::<Vec<_>>()
        };
        let (unfixed, fixed) = reads_stopped_by_a_checksum("kuh", every_75th_value);
        assert!(unfixed >= 39, "only {unfixed} of 40 changed values met their checksum");
        assert_eq!(fixed, 0, "fixed records still stopped at their checksum");
    }
}
