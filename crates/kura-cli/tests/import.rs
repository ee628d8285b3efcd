//! End-to-end tests of `kura import`'s parallel loader: the same records whatever the shard
//! count, thread count and batch size, and whether they come from a file or a stream (stdin,
//! `/dev/stdin`); keyless JSON rows; malformed and empty inputs; and a SIGKILLed import that
//! leaves every shard openable with only records of the input.
#![expect(clippy::unwrap_used, reason = "a test fails loudly on the first broken expectation")]

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use kura::split_mix::SplitMix64;
use kura::{DbmExt, OpenMode, Params};

fn kura(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kura")).args(args).output().unwrap()
}

/// Runs `kura` with `input` written to its standard input (from a thread of its own, so that a
/// child that has not read yet cannot block the writer against a full pipe).
fn kura_reading(args: &[&str], input: &[u8]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_kura"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let input = input.to_vec();
    let writer = std::thread::spawn(move || {
        // A child that stops reading early (an error) closes the pipe: not the test's failure.
        let _ = stdin.write_all(&input);
    });
    let output = child.wait_with_output().unwrap();
    writer.join().unwrap();
    output
}

#[track_caller]
fn ok(args: &[&str]) -> String {
    let output = kura(args);
    assert!(output.status.success(), "kura {args:?}: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout).unwrap()
}

#[track_caller]
fn fails(args: &[&str], code: i32, needles: &[&str]) {
    expect_failure(args, &kura(args), code, needles);
}

/// As `fails`, with `input` on the standard input.
#[track_caller]
fn fails_reading(args: &[&str], input: &[u8], code: i32, needles: &[&str]) {
    expect_failure(args, &kura_reading(args, input), code, needles);
}

#[track_caller]
fn expect_failure(args: &[&str], output: &Output, code: i32, needles: &[&str]) {
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(code), "kura {args:?}: {stderr}");
    for needle in needles {
        assert!(stderr.contains(needle), "kura {args:?}: {stderr:?} lacks {needle:?}");
    }
}

fn text(path: &Path) -> String {
    path.display().to_string()
}

/// Every record of the database (or set) at `path`, read through the library.
fn records(path: &Path) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let db = kura::open(path, OpenMode::ReadOnly, &Params::new()).unwrap();
    let all: BTreeMap<_, _> = db.records().unwrap().map(|r| r.unwrap()).collect();
    assert_eq!(db.count().unwrap(), all.len() as u64);
    db.close().unwrap();
    all
}

/// Creates the database at `path` holding `model`, through the library.
fn write_records(path: &Path, model: &BTreeMap<Vec<u8>, Vec<u8>>) {
    let db = kura::open(path, OpenMode::Create, &Params::new()).unwrap();
    for (key, value) in model {
        db.set(key, value, true).unwrap();
    }
    db.close().unwrap();
}

/// TSV lines with repeated keys (the last one wins) and values of varied sizes.
fn sample_tsv(dir: &Path, lines: u32) -> (PathBuf, BTreeMap<Vec<u8>, Vec<u8>>) {
    let mut random = SplitMix64::new(15);
    let mut body = String::new();
    let mut expected = BTreeMap::new();
    for i in 0..lines {
        let key = format!("k{:05}", random.next_u64() % u64::from(lines / 2));
        let value = format!("{i}:{}", "v".repeat((random.next_u64() % 200) as usize));
        body.push_str(&format!("{key}\t{value}\n"));
        expected.insert(key.into_bytes(), value.into_bytes());
    }
    let path = dir.join("in.tsv");
    std::fs::write(&path, body).unwrap();
    (path, expected)
}

#[test]
fn any_shard_thread_and_batch_count_loads_the_same_records() {
    let dir = tempfile::tempdir().unwrap();
    let (tsv, expected) = sample_tsv(dir.path(), 6000);
    let mut run = 0;
    for (extension, codec) in [("kuh", "zstd-dict"), ("kut", "lz4")] {
        for shards in [None, Some(1), Some(2), Some(4)] {
            for threads in [1, 2] {
                run += 1;
                let db = dir.path().join(format!("db{run}.{extension}"));
                let mut args = vec!["import".to_string(), text(&db), text(&tsv)];
                args.extend(["--threads".into(), threads.to_string(), "--record-comp".into(), codec.into()]);
                args.extend(["--batch".into(), [1, 64, 1024].into_iter().cycle().nth(run).unwrap().to_string()]);
                if let Some(shards) = shards {
                    args.extend(["--shards".into(), shards.to_string()]);
                }
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                let summary = ok(&args);
                assert!(summary.contains("records=6000"), "{summary}");
                assert_eq!(records(&db), expected, "{args:?}");
                if let Some(shards) = shards {
                    assert_eq!(kura::shard_dbm::find_set(&db).unwrap(), Some(shards));
                    // Export through the CLI, found by path alone, compared as a set.
                    let exported: BTreeSet<String> = ok(&["export", &text(&db)]).lines().map(String::from).collect();
                    let wanted: BTreeSet<String> = expected
                        .iter()
                        .map(|(k, v)| format!("{}\t{}", String::from_utf8_lossy(k), String::from_utf8_lossy(v)))
                        .collect();
                    assert_eq!(exported, wanted);
                }
            }
        }
    }
}

#[test]
fn keyless_json_rows_all_arrive_with_distinct_keys() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("rows.jsonl");
    let mut body = String::new();
    for i in 0..3000 {
        match i % 3 {
            0 => body.push_str(&format!("{{\"value\": \"row {i}\"}}\n")),
            1 => body.push_str(&format!("{{\"key\": null, \"value\": {{\"n\": {i}, \"list\": [1, 2]}}}}\n")),
            _ => body.push_str(&format!("{{\"key\": \"named{i}\", \"value\": \"named row {i}\"}}\n")),
        }
    }
    std::fs::write(&input, body).unwrap();
    for (shards, threads) in [("1", "1"), ("4", "2")] {
        let db = dir.path().join(format!("rows{shards}.kuh"));
        let summary = ok(&["import", &text(&db), &text(&input), "--shards", shards, "--threads", threads]);
        assert!(summary.contains("keyless=2000"), "{summary}");
        let all = records(&db);
        assert_eq!(all.len(), 3000, "every keyless row arrived under its own key");
        let values: BTreeSet<String> = all.values().map(|v| String::from_utf8(v.clone()).unwrap()).collect();
        assert!(values.contains("row 0"));
        assert!(values.contains(r#"{"n":1,"list":[1,2]}"#), "non-string JSON is stored as compact text");
        assert_eq!(all.get(b"named2".as_slice()).map(Vec::as_slice), Some(b"named row 2".as_slice()));
    }
}

#[test]
fn malformed_and_empty_inputs_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let good: String = (0..500).map(|i| format!("{{\"key\":\"k{i}\",\"value\":\"v{i}\"}}\n")).collect();

    let truncated = dir.path().join("truncated.jsonl");
    std::fs::write(&truncated, format!("{good}{{\"key\":\"k500\",\"val")).unwrap();
    let db = dir.path().join("t.kuh");
    fails(
        &["import", &text(&db), &text(&truncated), "--shards", "2", "--threads", "2"],
        3,
        &["line 501", "500 records"],
    );
    assert_eq!(records(&db).len(), 500, "the lines before the bad one were imported, and nothing else");

    let bad_utf8 = dir.path().join("utf8.jsonl");
    let mut bytes = good.clone().into_bytes();
    bytes.extend_from_slice(b"{\"key\":\"\xff\xfe\",\"value\":\"v\"}\n");
    bytes.extend_from_slice(good.as_bytes());
    std::fs::write(&bad_utf8, &bytes).unwrap();
    let db = dir.path().join("u.kut");
    fails(&["import", &text(&db), &text(&bad_utf8), "--threads", "2"], 3, &["line 501"]);
    assert_eq!(records(&db).len(), 500);
    let db = dir.path().join("u2.kut");
    let summary = ok(&["import", &text(&db), &text(&bad_utf8), "--skip-bad", "--shards", "3"]);
    assert!(summary.contains("skipped=1"), "{summary}");
    assert_eq!(records(&db).len(), 500);

    let empty = dir.path().join("empty.tsv");
    std::fs::write(&empty, "").unwrap();
    let db = dir.path().join("e.kuh");
    fails(&["import", &text(&db), &text(&empty), "--shards", "2"], 2, &["empty"]);
    assert!(!db.exists() && kura::shard_dbm::find_set(&db).unwrap().is_none(), "nothing is left behind");

    let plain = dir.path().join("plain.kuh");
    ok(&["create", &text(&plain)]);
    fails(&["import", &text(&plain), &text(&truncated), "--shards", "2"], 2, &["single database"]);
    fails(&["import", &text(&plain), &text(&truncated), "--format", "xml"], 2, &["tsv, tsv-escaped or jsonl"]);
}

#[test]
fn a_stream_loads_the_same_records_as_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let (tsv, expected) = sample_tsv(dir.path(), 6000);
    let body = std::fs::read(&tsv).unwrap();
    let streams: [&[&str]; 3] = [&["-"], &[], &["/dev/stdin"]];
    let mut run = 0;
    for (extension, extra) in
        [("kuh", &[][..]), ("kut", &["--shards", "2"][..]), ("kuh", &["--record-comp", "zstd"][..])]
    {
        for stream in streams {
            run += 1;
            let db = dir.path().join(format!("stream{run}.{extension}"));
            let db_text = text(&db);
            let args: Vec<&str> = ["import", db_text.as_str()].iter().chain(stream).chain(extra).copied().collect();
            let output = kura_reading(&args, &body);
            let stderr = String::from_utf8_lossy(&output.stderr);
            assert!(output.status.success(), "kura {args:?}: {stderr}");
            assert!(String::from_utf8_lossy(&output.stdout).contains("records=6000"), "kura {args:?}");
            assert_eq!(records(&db), expected, "kura {args:?}");
        }
    }

    // Read once, a stream cannot size the buckets: a database it overfills is rebuilt for them.
    let db = dir.path().join("overfilled.kuh");
    let output = kura_reading(&["import", &text(&db), "-", "--buckets", "64"], &body);
    assert!(String::from_utf8_lossy(&output.stdout).contains("rebuilt=yes"), "{output:?}");
    assert_eq!(records(&db), expected);
    // Packed three records a bucket (HashDbm's rebuild), and no longer asking to be rebuilt.
    let buckets = num_buckets(&db);
    let records = expected.len() as u64;
    assert!(buckets >= records.div_ceil(3), "rebuilt with {buckets} buckets for {records} records");
    let rebuilt = kura::open(&db, OpenMode::ReadOnly, &Params::new()).unwrap();
    assert_eq!(rebuilt.inspect().unwrap().number("rebuilt_records"), Some(records));
    assert!(!rebuilt.should_be_rebuilt().unwrap());
}

/// The `num_buckets` a database reports.
fn num_buckets(db: &Path) -> u64 {
    num_buckets_of(db, &Params::new())
}

fn num_buckets_of(db: &Path, params: &Params) -> u64 {
    kura::open(db, OpenMode::ReadOnly, params).unwrap().inspect().unwrap().number("num_buckets").unwrap()
}

#[test]
fn a_new_database_from_a_stream_is_sized_as_from_the_file() {
    let dir = tempfile::tempdir().unwrap();
    for lines in [10, 6000] {
        let (sample, expected) = sample_tsv(dir.path(), lines);
        // One line a record, so that the file (sized for its lines) and the stream (sized for
        // the records it gave) must come out alike.
        let tsv = dir.path().join(format!("records{lines}.tsv"));
        let one_line_each: String = expected
            .iter()
            .map(|(key, value)| format!("{}\t{}\n", String::from_utf8_lossy(key), String::from_utf8_lossy(value)))
            .collect();
        std::fs::write(&tsv, one_line_each).unwrap();
        let body = std::fs::read(&tsv).unwrap();
        for extension in ["kuh", "kumz"] {
            let from_file = dir.path().join(format!("file{lines}.{extension}"));
            ok(&["import", &text(&from_file), &text(&tsv)]);
            let from_stream = dir.path().join(format!("stream{lines}.{extension}"));
            let output = kura_reading(&["import", &text(&from_stream), "-"], &body);
            assert!(String::from_utf8_lossy(&output.stdout).contains("rebuilt=yes"), "{output:?}");
            assert_eq!(records(&from_stream), expected);
            assert_eq!(num_buckets(&from_stream), num_buckets(&from_file), "{lines} lines into .{extension}");
            let (stream_size, file_size) = (file_len(&from_stream), file_len(&from_file));
            assert!(
                stream_size <= file_size + file_size / 10,
                "{lines} lines: {stream_size} bytes against {file_size}"
            );
        }
        // Each shard of a new set, too.
        let set = dir.path().join(format!("set{lines}.kuh"));
        ok(&["import", &text(&set), &text(&tsv), "--shards", "3"]);
        let stream_set = dir.path().join(format!("stream_set{lines}.kuh"));
        let output = kura_reading(&["import", &text(&stream_set), "-", "--shards", "3"], &body);
        assert!(output.status.success(), "{output:?}");
        assert_eq!(records(&stream_set), expected);
        let shards = |base: &Path| {
            let count = kura::shard_dbm::find_set(base).unwrap().unwrap();
            let hash = Params::new().with("engine", "hash");
            (0..count)
                .map(|index| num_buckets_of(&kura::shard_dbm::shard_path(base, index, count), &hash))
                .collect::<Vec<_>>()
        };
        assert_eq!(shards(&stream_set), shards(&set), "{lines} lines");

        // Lines with repeated keys: the stream sizes for the records they leave, as the file
        // of one line a record did (a file with the repeats sizes for all its lines).
        let from_stream = dir.path().join(format!("repeated_stream{lines}.kuh"));
        let output = kura_reading(&["import", &text(&from_stream), "-"], &std::fs::read(&sample).unwrap());
        assert!(output.status.success(), "{output:?}");
        assert_eq!(num_buckets(&from_stream), num_buckets(&dir.path().join(format!("file{lines}.kuh"))));
    }

    // A size given, or a database that exists, is the user's: the stream keeps it.
    let (tsv, _) = sample_tsv(dir.path(), 600);
    let body = std::fs::read(&tsv).unwrap();
    // (A compact map's `num_buckets` given without `expected_records`, which the import sizes:
    // the given one wins, from a stream as from the file.)
    let compact_file = dir.path().join("given_file.kumz");
    ok(&["--params", "num_buckets=4096", "import", &text(&compact_file), &text(&tsv)]);
    let compact_stream = dir.path().join("given_stream.kumz");
    let output = kura_reading(&["--params", "num_buckets=4096", "import", &text(&compact_stream), "-"], &body);
    assert!(String::from_utf8_lossy(&output.stdout).contains("rebuilt=no"), "{output:?}");
    assert_eq!(num_buckets(&compact_stream), num_buckets(&compact_file));
    assert!(num_buckets(&compact_stream) >= 4096 / 2, "{}", num_buckets(&compact_stream));
    let given = dir.path().join("given.kuh");
    let output = kura_reading(&["import", &text(&given), "-", "--buckets", "50000"], &body);
    assert!(String::from_utf8_lossy(&output.stdout).contains("rebuilt=no"), "{output:?}");
    assert_eq!(num_buckets(&given), 50000);
    let existing = dir.path().join("existing.kuh");
    ok(&["create", &text(&existing), "--params", "num_buckets=40000"]);
    let output = kura_reading(&["import", &text(&existing), "-"], &body);
    assert!(String::from_utf8_lossy(&output.stdout).contains("rebuilt=no"), "{output:?}");
    assert_eq!(num_buckets(&existing), 40000);
}

fn file_len(path: &Path) -> u64 {
    std::fs::metadata(path).unwrap().len()
}

/// Random records of any bytes: tabs, line breaks, backslashes and control bytes included.
fn awkward_records(count: usize, seed: u64) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut random = SplitMix64::new(seed);
    let alphabet = b"ab\t\n\r\\x\x00\x01\x7f\xc3\xa9\xff ";
    let mut field = |max: u64| -> Vec<u8> {
        let len = random.next_u64() % max;
        (0..len).map(|_| alphabet.get((random.next_u64() % alphabet.len() as u64) as usize).copied().unwrap()).collect()
    };
    (0..count).map(|_| (field(12), field(40))).collect()
}

#[test]
fn an_escaped_export_imports_back_to_the_same_records() {
    let dir = tempfile::tempdir().unwrap();
    let model = awkward_records(3000, 77);
    let source = dir.path().join("source.kut");
    write_records(&source, &model);
    // Plain TSV cannot hold these records: the export says so rather than write lines that
    // would import as other records.
    fails(&["export", &text(&source)], 2, &["--escape"]);

    let exported = kura(&["export", &text(&source), "--escape"]);
    assert!(exported.status.success(), "{exported:?}");
    assert_eq!(kura(&["export", &text(&source), "-", "--escape"]).stdout, exported.stdout, "- is stdout");
    let lines = exported.stdout.iter().filter(|&&b| b == b'\n').count();
    assert_eq!(lines, model.len(), "one line a record");
    for (extension, extra) in [("kuh", &[][..]), ("kut", &["--shards", "3"][..])] {
        let target = dir.path().join(format!("copy.{extension}"));
        let target_text = text(&target);
        let args: Vec<&str> = ["import", target_text.as_str(), "-", "--escape"].iter().chain(extra).copied().collect();
        let output = kura_reading(&args, &exported.stdout);
        assert!(output.status.success(), "kura {args:?}: {output:?}");
        assert_eq!(records(&target), model, "kura {args:?}");
    }
    // The same lines as a file, by the format's name.
    let file = dir.path().join("dump.tsv");
    std::fs::write(&file, &exported.stdout).unwrap();
    let target = dir.path().join("by-name.kuh");
    ok(&["import", &text(&target), &text(&file), "--format", "tsv-escaped"]);
    assert_eq!(records(&target), model);
    fails(&["import", &text(&target), &text(&file), "--escape", "--format", "jsonl"], 2, &["escaped TSV"]);

    // Records plain TSV holds export plain, as before, and import back as they were.
    let plain: BTreeMap<Vec<u8>, Vec<u8>> =
        model.into_iter().filter(|(k, v)| !k.contains(&b'\t') && !k.contains(&b'\n') && !v.contains(&b'\n')).collect();
    let plain_source = dir.path().join("plain.kuh");
    write_records(&plain_source, &plain);
    let exported = kura(&["export", &text(&plain_source)]);
    assert!(exported.status.success(), "{exported:?}");
    let target = dir.path().join("plain-copy.kut");
    assert!(kura_reading(&["import", &text(&target)], &exported.stdout).status.success());
    assert_eq!(records(&target), plain);
}

#[test]
fn a_damaged_escape_is_a_malformed_line() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("damaged.kuh");
    let input = b"a\\tb\tv\\n\nc\t\\q\nd\tv\n";
    fails_reading(&["import", &text(&target), "--escape"], input, 3, &["standard input line 2", "\\q"]);
    assert_eq!(records(&target), BTreeMap::from([(b"a\tb".to_vec(), b"v\n".to_vec())]));
}

#[test]
fn a_stream_that_is_empty_malformed_or_unsized_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("empty.kuh");
    fails_reading(&["import", &text(&db), "-"], b"", 2, &["standard input is empty"]);
    assert!(!db.exists(), "nothing is left behind");

    let db = dir.path().join("bad.kut");
    fails_reading(&["import", &text(&db)], b"a\t1\nb\t2\nno tab here\nc\t3\n", 3, &["standard input line 3"]);
    assert_eq!(records(&db).len(), 2, "the lines before the bad one were imported, and nothing else");

    // A cache's record cap is sized from a file's line count; a stream has none to give.
    let db = dir.path().join("cache.kumc");
    fails_reading(&["import", &text(&db), "-"], b"a\t1\n", 2, &["cap_rec_num"]);
    let output = kura_reading(&["import", &text(&db), "-", "--params", "cap_rec_num=10"], b"a\t1\n");
    assert!(output.status.success(), "{output:?}");
    // The cache file keeps its cap: it reopens without one.
    let cache = kura::open(&db, OpenMode::ReadOnly, &Params::new()).unwrap();
    assert_eq!(cache.get(b"a").unwrap(), b"1");
}

#[test]
fn a_killed_import_leaves_every_shard_openable_with_only_input_records() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("big.tsv");
    let mut body = String::new();
    for i in 0..400_000u32 {
        body.push_str(&format!("key{i:07}\tvalue-{i}-{}\n", "x".repeat((i % 50) as usize)));
    }
    std::fs::write(&input, body).unwrap();
    let db = dir.path().join("killed.kut");
    let mut child = Command::new(env!("CARGO_BIN_EXE_kura"))
        .args(["import", &text(&db), &text(&input), "--shards", "4", "--threads", "2", "--batch", "64"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Kill once every shard file exists (bounded wait), so that records are being written.
    for _ in 0..2000 {
        if kura::shard_dbm::find_set(&db).ok().flatten() == Some(4) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    std::thread::sleep(std::time::Duration::from_millis(150));
    child.kill().unwrap();
    child.wait().unwrap();
    for index in 0..4 {
        let shard = kura::shard_dbm::shard_path(&db, index, 4);
        let opened = kura::open(&shard, OpenMode::ReadOnly, &Params::new().with("engine", "tree")).unwrap();
        opened.close().unwrap();
    }
    for (key, value) in records(&db) {
        let key = String::from_utf8(key).unwrap();
        let i: u32 = key.strip_prefix("key").unwrap().parse().unwrap();
        assert_eq!(value, format!("value-{i}-{}", "x".repeat((i % 50) as usize)).into_bytes());
    }
}

#[test]
fn maintenance_commands_work_on_a_set_by_its_base_path() {
    let dir = tempfile::tempdir().unwrap();
    let (tsv, expected) = sample_tsv(dir.path(), 800);
    let db = dir.path().join("set.kut");
    ok(&["import", &text(&db), &text(&tsv), "--shards", "3"]);
    let inspected = ok(&["inspect", &text(&db)]);
    assert!(inspected.contains("class=ShardDbm") && inspected.contains("num_shards=3"), "{inspected}");
    assert!(inspected.contains(&format!("count={}", expected.len())), "{inspected}");
    ok(&["rebuild", &text(&db), "--record-comp", "zstd"]);
    assert!(ok(&["inspect", &text(&db)]).contains("record_comp=zstd"));
    let restored = dir.path().join("restored.kut");
    ok(&["restore", &text(&db), &text(&restored)]);
    assert_eq!(records(&restored), expected);
    let listed = ok(&["list", &text(&db), "--keys", "--reverse", "--limit", "3"]);
    let last: Vec<String> = expected.keys().rev().take(3).map(|k| String::from_utf8(k.clone()).unwrap()).collect();
    assert_eq!(listed.lines().collect::<Vec<_>>(), last);
}

/// JSON lines piped in without `--format jsonl` are read as TSV: the error says which format
/// reads them, and how many records went in, in words that agree with the count.
#[test]
fn json_lines_on_stdin_without_format_hint_at_jsonl() {
    let dir = tempfile::tempdir().unwrap();
    for (lines, imported) in [
        (&b"{\"key\": \"a\", \"value\": \"1\"}\n"[..], "no record of the lines before it was imported"),
        (&b"a\t1\n {\"key\": \"b\", \"value\": \"2\"}\n"[..], "the 1 record of the lines before it was imported"),
        (&b"a\t1\nb\t2\n{\"key\": \"c\"}\n"[..], "the 2 records of the lines before it were imported"),
    ] {
        let db = dir.path().join(format!("{}.kuh", imported.len()));
        let output = kura_reading(&["import", db.to_str().unwrap(), "-"], lines);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(3), "{stderr}");
        assert!(stderr.contains("--format jsonl"), "{stderr}");
        assert!(stderr.contains(imported), "{stderr}");
    }
    // A line that is not JSON either gets no such hint.
    let db = dir.path().join("plain.kuh");
    let output = kura_reading(&["import", db.to_str().unwrap(), "-"], b"no tab here\n");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("no tab between key and value") && !stderr.contains("jsonl"), "{stderr}");
}
