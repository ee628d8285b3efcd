//! `kura restore` of the memory engines' snapshots (TinyDbm, BabyDbm, CacheDbm, CompactDbm, SegCacheDbm):
//! every record of every intact block comes back, and nothing else (docs/memory.md,
//! "Salvage").
//!
//! Each engine writes a snapshot with history (values replaced, keys removed) and the model
//! of what it holds. Damaging each block alone (its checksum field) gives the records that
//! block holds, which must partition the model; then the file is damaged a sampled way at a
//! time (every third byte of the header and of the trailer flipped; 40 bytes spread over the file
//! flipped; 8 runs of 1 to 64 bytes zeroed; 6 cuts), restored, and the restored database must
//! hold exactly the model less the records of the blocks the damage touched (a CompactDbm file
//! cut inside its first block has lost both copies of its layout, and is refused). A snapshot of
//! format version 2 (one checksum over the whole file) restores whole or is refused.
#![expect(clippy::unwrap_used, reason = "a test fails loudly on the first broken expectation")]
#![expect(clippy::indexing_slicing, reason = "offsets come from the snapshot just parsed")]

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;
use std::path::{Path, PathBuf};

use kura::encoding::decode_varint;
use kura::split_mix::SplitMix64;
use kura::{DbmExt, ErrorKind, OpenMode, Params, RestoreReport, WriteBatch};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// Engine, extension and the parameters of a new database.
const ENGINES: &[(&str, &str, &str)] = &[
    ("tiny", "kumt", ""),
    ("baby", "kumb", ""),
    ("cache", "kumc", "cap_rec_num=100000"),
    ("compact", "kumz", "bucket_comp=none,num_buckets=512"),
    ("segcache", "kums", "cap_rec_num=100000"),
];

const HEADER_LEN: usize = 16;

/// Writes 400 records of 1 to 300 bytes, replaces a third and removes a tenth.
fn snapshot_with_history(dir: &Path, engine: &str, extension: &str, params: &str) -> (PathBuf, Model) {
    let path = dir.join(format!("source.{extension}"));
    let params =
        Params::parse(&format!("engine={engine}{}{params}", if params.is_empty() { "" } else { "," })).unwrap();
    let db = kura::open(&path, OpenMode::Truncate, &params).unwrap();
    let mut random = SplitMix64::new(43);
    let mut model = Model::new();
    for round in 0..3 {
        let mut batch = WriteBatch::new();
        for i in 0..400u64 {
            if round > 0 && !random.next_u64().is_multiple_of(3) {
                continue;
            }
            let key = format!("key{i:05}").into_bytes();
            let value: Vec<u8> =
                (0..1 + random.next_u64() % 300).map(|j| b'a' + ((j + i + round) % 26) as u8).collect();
            if round == 2 && i.is_multiple_of(10) {
                batch.remove(&key);
                model.remove(&key);
            } else {
                batch.set(&key, &value);
                model.insert(key, value);
            }
        }
        db.write_batch(&batch).unwrap();
    }
    db.close().unwrap();
    (path, model)
}

/// The byte ranges of a version 3 snapshot's header (with its checksum), blocks and trailer.
fn layout(bytes: &[u8]) -> (Range<usize>, Vec<Range<usize>>, Range<usize>) {
    assert_eq!(bytes[8], 3, "a version 3 snapshot");
    let (params_len, used) = decode_varint(&bytes[HEADER_LEN..]).unwrap();
    let header_end = HEADER_LEN + used + params_len as usize + 8;
    let mut blocks = Vec::new();
    let mut at = header_end;
    while &bytes[at..at + 4] == b"KBLK" {
        let len = u32::from_le_bytes(bytes[at + 4..at + 8].try_into().unwrap()) as usize;
        blocks.push(at..at + 20 + len);
        at += 20 + len;
    }
    assert_eq!(&bytes[at..at + 4], b"KEND");
    (0..header_end, blocks, at..bytes.len())
}

/// Restores `damaged` (as the file of `extension`) into a new file and reads it back whole.
fn restore(dir: &Path, extension: &str, damaged: &[u8]) -> kura::Result<(Model, RestoreReport)> {
    let source = dir.join(format!("damaged.{extension}"));
    let dest = dir.join(format!("restored.{extension}"));
    std::fs::write(&source, damaged).unwrap();
    let _ = std::fs::remove_file(&dest);
    let engine = kura::registry::engine_of_path(&source).unwrap();
    let report = engine.restore(&source, &dest)?;
    let db = kura::open(&dest, OpenMode::ReadOnly, &Params::new()).unwrap();
    let restored: Model = db.records().unwrap().map(Result::unwrap).collect();
    assert_eq!(db.count().unwrap(), restored.len() as u64);
    assert_eq!(report.records, restored.len() as u64, "the report counts the records restored");
    Ok((restored, report))
}

/// The records each block holds, found by damaging its checksum alone (the restore must
/// return no wrong value and report the records it lost).
fn records_of_each_block(
    dir: &Path,
    engine: &str,
    extension: &str,
    bytes: &[u8],
    blocks: &[Range<usize>],
    model: &Model,
) -> Vec<BTreeSet<Vec<u8>>> {
    blocks
        .iter()
        .map(|block| {
            let mut damaged = bytes.to_vec();
            damaged[block.start + 12] ^= 0x01;
            let (restored, report) = restore(dir, extension, &damaged).unwrap();
            assert!(restored.iter().all(|(k, v)| model.get(k) == Some(v)), "{engine}: a wrong value");
            let lost: BTreeSet<Vec<u8>> = model.keys().filter(|k| !restored.contains_key(*k)).cloned().collect();
            assert_eq!(report.dropped_records, lost.len() as u64, "{engine}: the report counts the records lost");
            lost
        })
        .collect()
}

/// The model less the records of the blocks `touched` says were damaged.
fn expected(model: &Model, lost_by_block: &[BTreeSet<Vec<u8>>], touched: impl Fn(usize) -> bool) -> Model {
    let lost: BTreeSet<&Vec<u8>> =
        (0..lost_by_block.len()).filter(|b| touched(*b)).flat_map(|b| &lost_by_block[b]).collect();
    model.iter().filter(|(key, _)| !lost.contains(key)).map(|(k, v)| (k.clone(), v.clone())).collect()
}

#[test]
fn every_record_of_every_intact_block_comes_back_and_nothing_else() {
    for &(engine, extension, params) in ENGINES {
        let dir = tempfile::tempdir().unwrap();
        let (path, model) = snapshot_with_history(dir.path(), engine, extension, params);
        let bytes = std::fs::read(&path).unwrap();
        let (header, blocks, trailer) = layout(&bytes);
        assert!(blocks.len() >= 8, "{engine}: {} blocks", blocks.len());
        let (restored, report) = restore(dir.path(), extension, &bytes).unwrap();
        assert_eq!((restored, report.dropped_records, report.dropped.len()), (model.clone(), 0, 0), "{engine}");

        // Each block's records, found by damaging its checksum alone: they partition the model.
        let lost_by_block = records_of_each_block(dir.path(), engine, extension, &bytes, &blocks, &model);
        let lost_total: usize = lost_by_block.iter().map(BTreeSet::len).sum();
        let lost_union: BTreeSet<&Vec<u8>> = lost_by_block.iter().flatten().collect();
        assert_eq!((lost_total, lost_union.len()), (model.len(), model.len()), "{engine}: blocks partition records");

        let overlapping = |damage: &Range<usize>| {
            let blocks = blocks.clone();
            let damage = damage.clone();
            move |b: usize| blocks[b].start < damage.end && damage.start < blocks[b].end
        };
        let mut random = kura::split_mix::SplitMix64::new(7);
        let mut damages: Vec<Range<usize>> =
            header.clone().chain(trailer.clone()).step_by(3).map(|at| at..at + 1).collect();
        damages.extend((0..40).map(|i| {
            let at = bytes.len() * i / 40 + (random.next_u64() % 97) as usize;
            at.min(bytes.len() - 1)..(at + 1).min(bytes.len())
        }));
        for damage in &damages {
            let mut damaged = bytes.clone();
            damaged[damage.start] ^= 1 << (damage.start % 8);
            let (restored, _) = restore(dir.path(), extension, &damaged).unwrap();
            let want = expected(&model, &lost_by_block, overlapping(damage));
            assert!(
                restored == want,
                "{engine}: flip at {}: {} records, {} expected",
                damage.start,
                restored.len(),
                want.len()
            );
        }
        for i in 0..8 {
            let at = (random.next_u64() as usize) % bytes.len();
            let run = at..(at + 1 + i * 9).min(bytes.len());
            let mut damaged = bytes.clone();
            damaged[run.clone()].fill(0);
            let (restored, _) = restore(dir.path(), extension, &damaged).unwrap();
            let want = expected(&model, &lost_by_block, overlapping(&run));
            assert!(restored == want, "{engine}: zeroed {run:?}: {} records, {} expected", restored.len(), want.len());
        }
        for cut in [
            header.end + 1,
            blocks[2].start,
            blocks[3].start + 30,
            blocks[blocks.len() / 2].end - 1,
            trailer.start,
            bytes.len() - 1,
        ] {
            if engine == "compact" && cut < blocks[0].end {
                // Both copies of the layout (codec, bucket count) are gone: nothing decodes.
                let error = restore(dir.path(), extension, &bytes[..cut]).err().unwrap();
                assert!(error.message().contains("both copies of the layout"), "{error}");
                continue;
            }
            let (restored, report) = restore(dir.path(), extension, &bytes[..cut]).unwrap();
            let want = expected(&model, &lost_by_block, overlapping(&(cut..bytes.len())));
            assert!(restored == want, "{engine}: cut at {cut}: {} records, {} expected", restored.len(), want.len());
            assert!(report.dropped.iter().any(|why| why.contains("cut short")), "{engine}: {:?}", report.dropped);
        }
    }
}

#[test]
fn a_snapshot_of_version_2_restores_whole_or_is_refused() {
    for fixture in ["tiny-v2.kumt", "cache-v2.kumc", "compact-v2-zstd.kumz"] {
        let dir = tempfile::tempdir().unwrap();
        let bytes = std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(fixture)).unwrap();
        assert_eq!(bytes[8], 2, "{fixture} is a version 2 snapshot");
        let extension = fixture.rsplit('.').next().unwrap();
        let (restored, report) = restore(dir.path(), extension, &bytes).unwrap();
        assert_eq!((restored.len(), report.dropped.len()), (400, 0), "{fixture}");
        let mut damaged = bytes.clone();
        damaged[bytes.len() / 2] ^= 0x20;
        let error = restore(dir.path(), extension, &damaged).err().unwrap();
        assert_eq!(error.kind(), ErrorKind::BrokenData, "{fixture}: {error}");
        assert!(error.message().contains("damaged.") && error.message().contains("version 3"), "{error}");
    }
}

/// `make salvage-soak-snapshots`: every byte of each engine's snapshot, one bit flipped
/// (`1 << (offset % 8)`), restored and checked (release build; the sampled test above runs in
/// `make test`). A restore must hold exactly the records of the blocks the flip missed, and
/// `kura check` must flag every flipped file (every byte of a snapshot is under a checksum).
#[test]
#[ignore = "25 minutes of CPU in a release build, mostly the kernel writing and syncing files: make salvage-soak-snapshots"]
fn every_flipped_byte_snapshot_salvage_soak() {
    let mut failures = Vec::new();
    for &(engine, extension, params) in ENGINES {
        let dir = tempfile::tempdir().unwrap();
        let (path, model) = snapshot_with_history(dir.path(), engine, extension, params);
        let bytes = std::fs::read(&path).unwrap();
        let (_, blocks, _) = layout(&bytes);
        let lost_by_block = records_of_each_block(dir.path(), engine, extension, &bytes, &blocks, &model);
        let (mut wrong, mut missed, mut extra, mut refused, mut unflagged) = (0u64, 0u64, 0u64, 0u64, 0u64);
        for at in 0..bytes.len() {
            let mut damaged = bytes.clone();
            damaged[at] ^= 1 << (at % 8);
            let checked = dir.path().join(format!("checked.{extension}"));
            std::fs::write(&checked, &damaged).unwrap();
            if kura::registry::check(&checked, &Params::new()).is_ok_and(|report| report.is_clean()) {
                unflagged += 1;
            }
            let Ok((restored, _)) = restore(dir.path(), extension, &damaged) else {
                refused += 1;
                continue;
            };
            let want = expected(&model, &lost_by_block, |b| blocks[b].contains(&at));
            wrong += restored.iter().filter(|(k, v)| model.get(*k).is_some_and(|m| m != *v)).count() as u64;
            extra += restored.keys().filter(|k| !model.contains_key(*k)).count() as u64;
            missed += want.keys().filter(|k| !restored.contains_key(*k)).count() as u64;
        }
        eprintln!(
            "{engine}: {} bytes = trials, {} blocks; intact records missed {missed}, wrong values {wrong}, \
             records never written {extra}, restores refused {refused}, damaged files check passed {unflagged}",
            bytes.len(),
            blocks.len()
        );
        if wrong + missed + extra + refused + unflagged > 0 {
            failures.push(engine);
        }
    }
    assert!(failures.is_empty(), "engines with a failed trial: {failures:?}");
}
