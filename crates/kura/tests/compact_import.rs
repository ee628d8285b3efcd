//! The bulk path of CompactDbm: `kura import` into a `.kumz` hands the engine the whole input
//! as one write batch (`Dbm::prefers_whole_batches`), so each bucket is encoded once. Checked
//! against a BTreeMap of the input (a repeated key: the later line wins), with a malformed
//! line (exactly the lines before it are imported), and with `zstd-dict` (the dictionary is
//! trained before the buckets are encoded). The timing is printed, never asserted.
#![expect(clippy::unwrap_used, reason = "a test fails loudly on the first broken expectation")]

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::time::Instant;

use kura::import::{import_file, ImportOptions};
use kura::split_mix::SplitMix64;
use kura::{CompactDbm, Dbm, DbmExt, ErrorKind, OpenMode, Params};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// Writes `lines` TSV records with repeated keys (more than one import chunk) and returns the
/// model of what the first `good_lines` of them leave in a database.
fn write_input(path: &Path, lines: usize, bad_at: Option<usize>) -> Model {
    let mut rng = SplitMix64::new(lines as u64);
    let mut out = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    let mut model = Model::new();
    for line in 0..lines {
        if bad_at == Some(line) {
            out.write_all(b"a line without a tab\n").unwrap();
            continue;
        }
        let key = format!("id:{:07}", rng.below(lines as u64 * 3 / 4)).into_bytes();
        let value: Vec<u8> = (0..1 + rng.below(60)).map(|_| b'a' + rng.below(26) as u8).collect();
        out.write_all(&key).unwrap();
        out.write_all(b"\t").unwrap();
        out.write_all(&value).unwrap();
        out.write_all(b"\n").unwrap();
        if bad_at.is_none_or(|bad| line < bad) {
            model.insert(key, value);
        }
    }
    out.flush().unwrap();
    model
}

fn content(path: &Path) -> Model {
    let dbm = CompactDbm::open(path, OpenMode::ReadOnly, &Params::new()).unwrap();
    let found: Model = dbm.records().unwrap().map(|r| r.unwrap()).collect();
    assert_eq!(dbm.count().unwrap(), found.len() as u64);
    found
}

#[test]
fn import_into_kumz_equals_the_input_with_every_bucket_built_once() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("records.tsv");
    let model = write_input(&input, 60_000, None);
    for codec in ["lz4", "zstd", "zstd-dict"] {
        let path = dir.path().join(format!("{codec}.kumz"));
        let params = Params::new().with("bucket_comp", codec);
        let started = Instant::now();
        let summary =
            import_file(&path, &input, &params, &ImportOptions { threads: Some(2), ..Default::default() }, &|_| {})
                .unwrap();
        println!("{codec}: {} records imported in {:.3} s", summary.stored, started.elapsed().as_secs_f64());
        assert_eq!(summary.stored, 60_000);
        assert_eq!(summary.count, model.len() as u64);
        assert!(content(&path) == model, "{codec}: the database differs from the input");
        if codec == "zstd-dict" {
            let dbm = CompactDbm::open(&path, OpenMode::ReadOnly, &Params::new()).unwrap();
            let properties = dbm.inspect().unwrap().properties();
            let dict = properties.iter().find(|(n, _)| n == "dict_size").map(|(_, v)| v.clone()).unwrap();
            assert_ne!(dict, "0", "the dictionary was trained");
        }
    }
}

#[test]
fn a_malformed_line_leaves_exactly_the_lines_before_it() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("records.tsv");
    let model = write_input(&input, 50_000, Some(40_000));
    let path = dir.path().join("prefix.kumz");
    let error =
        import_file(&path, &input, &Params::new(), &ImportOptions { threads: Some(2), ..Default::default() }, &|_| {})
            .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::BrokenData);
    assert!(content(&path) == model, "the database is not exactly the lines before the bad one");
}
