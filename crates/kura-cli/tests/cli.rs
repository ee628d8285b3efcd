//! End-to-end tests of the `kura` binary: every subcommand, its output and its exit status.

#![expect(
    clippy::unwrap_used,
    clippy::indexing_slicing,
    reason = "a test fails loudly on the first broken expectation"
)]

mod support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use support::{fails, kura, ok};
use tempfile::TempDir;

const NOT_FOUND: i32 = 1;
const USAGE: i32 = 2;
const OTHER: i32 = 3;

fn kura_path(args: &[&str], paths: &[&Path]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_kura"));
    command.args(args);
    for path in paths {
        command.arg(path);
    }
    command.output().expect("the kura binary runs")
}

/// Runs kura and checks it failed (any status) with a `kura: ` error line.
#[track_caller]
fn fails_somehow(args: &[&str]) {
    let output = kura(args);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "kura {args:?} should fail");
    assert!(stderr.starts_with("kura: "), "kura {args:?}: stderr {stderr:?}");
}

struct Scratch {
    dir: TempDir,
}

impl Scratch {
    fn new() -> Scratch {
        Scratch { dir: tempfile::tempdir().unwrap() }
    }

    fn path(&self, name: &str) -> String {
        self.dir.path().join(name).to_str().unwrap().to_string()
    }
}

/// A small dictionary-like TSV: JSON-ish values that compress, of varied sizes.
fn sample_records(count: usize) -> BTreeMap<String, String> {
    (0..count)
        .map(|i| {
            let key = format!("word{i:05}");
            let senses: Vec<String> = (0..(i % 7 + 1))
                .map(|s| format!(r#"{{"label":"wn","pos":"noun","text":"sense {s} of {key}, gloss {}"}}"#, i * 31 % 97))
                .collect();
            (key.clone(), format!(r#"[{{"word":"{key}","item":[{}]}}]"#, senses.join(",")))
        })
        .collect()
}

fn write_tsv(path: &str, records: &BTreeMap<String, String>, extra_lines: &[&str]) {
    let mut text = String::new();
    for line in extra_lines {
        text.push_str(line);
        text.push('\n');
    }
    for (key, value) in records {
        text.push_str(&format!("{key}\t{value}\n"));
    }
    std::fs::write(path, text).unwrap();
}

fn parse_tsv(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .map(|line| {
            let (key, value) = line.split_once('\t').expect("a tab in every exported line");
            (key.to_string(), value.to_string())
        })
        .collect()
}

fn properties(text: &str) -> BTreeMap<String, String> {
    text.lines().map(|l| l.split_once('=').expect("name=value")).map(|(n, v)| (n.into(), v.into())).collect()
}

#[test]
fn set_get_remove_with_exit_codes() {
    let scratch = Scratch::new();
    let db = scratch.path("casket.kuh");
    ok(&["create", &db]);
    ok(&["set", &db, "apple", "a red fruit"]);
    ok(&["set", &db, "empty", ""]);
    assert_eq!(ok(&["get", &db, "apple"]), "a red fruit\n");
    assert_eq!(ok(&["get", &db, "empty"]), "\n");

    ok(&["set", &db, "apple", "a green fruit"]);
    assert_eq!(ok(&["get", &db, "apple"]), "a green fruit\n");
    fails(&["set", &db, "apple", "other", "--no-overwrite"], NOT_FOUND, "kura: ");
    assert_eq!(ok(&["get", &db, "apple"]), "a green fruit\n");

    fails(&["get", &db, "banana"], NOT_FOUND, "not found");
    ok(&["remove", &db, "apple"]);
    fails(&["get", &db, "apple"], NOT_FOUND, "kura: ");
    fails(&["remove", &db, "apple"], NOT_FOUND, "not found");
}

#[test]
fn missing_files_and_bad_arguments() {
    let scratch = Scratch::new();
    let missing = scratch.path("missing.kuh");
    fails(&["get", &missing, "k"], NOT_FOUND, "kura: ");
    fails(&["remove", &missing, "k"], NOT_FOUND, "kura: ");
    fails(&["list", &missing], NOT_FOUND, "kura: ");
    fails(&["inspect", &missing], NOT_FOUND, "kura: ");
    assert!(!Path::new(&missing).exists(), "a failed command must not create the file");

    // Usage errors.
    assert_eq!(kura(&[]).status.code(), Some(USAGE));
    assert_eq!(kura(&["get"]).status.code(), Some(USAGE));
    assert_eq!(kura(&["frobnicate"]).status.code(), Some(USAGE));
    fails(&["create", &scratch.path("a.kuh"), "--record-comp", "gzip9"], USAGE, "zstd-dict");
    fails(&["create", &scratch.path("a.kuh"), "--buckets", "many"], USAGE, "kura: ");
    fails(&["create", &scratch.path("a.kuh"), "--params", "record_comp=brotli"], USAGE, "snappy");
    fails(&["create", &scratch.path("a.kuh"), "--params", "no_such_param=1"], USAGE, "no_such_param");
    fails(&["create", &scratch.path("a.unknown-extension")], USAGE, "engine");
    fails(&["import", &scratch.path("b.kuh"), "x.tsv", "--record-comp", "nope"], USAGE, "lz4");
    assert!(!Path::new(&scratch.path("a.kuh")).exists());

    // A directory is not a database: the same usage error from every command and engine.
    for extension in ["kuh", "kut", "kumt", "kumb", "kumc", "kumz", "kums"] {
        let directory = scratch.path(&format!("dir.{extension}"));
        std::fs::create_dir(&directory).unwrap();
        for args in [
            vec!["get", &directory, "k"],
            vec!["set", &directory, "k", "v"],
            vec!["list", &directory],
            vec!["inspect", &directory],
            vec!["create", "--truncate", &directory],
        ] {
            fails(&args, USAGE, "is not a regular file");
        }
        assert!(Path::new(&directory).is_dir(), "{directory} was replaced");
    }

    let help = ok(&["--help"]);
    assert!(help.contains("Exit status"), "{help}");
}

#[test]
fn create_refuses_to_replace_without_truncate() {
    let scratch = Scratch::new();
    let db = scratch.path("db.kuh");
    ok(&["create", &db, "--record-comp", "lz4", "--buckets", "1K"]);
    ok(&["set", &db, "k", "v"]);
    fails(&["create", &db], NOT_FOUND, "--force");
    assert_eq!(ok(&["get", &db, "k"]), "v\n");
    ok(&["create", &db, "--truncate", "--record-comp", "zstd"]);
    fails(&["get", &db, "k"], NOT_FOUND, "not found");
    let props = properties(&ok(&["inspect", &db]));
    assert_eq!(props["record_comp"], "zstd");

    // --record-comp sets the engine's codec parameter, whatever the engine calls it (the
    // registry says), and an engine that compresses nothing says so.
    let compact = scratch.path("db.kumz");
    ok(&["create", &compact, "--record-comp", "lz4"]);
    assert_eq!(properties(&ok(&["inspect", &compact]))["bucket_comp"], "lz4");
    fails(&["create", &scratch.path("db.kumt"), "--record-comp", "lz4"], USAGE, "takes no codec");

    // Any extension works with engine=.
    let plain = scratch.path("plain.db");
    ok(&["create", &plain, "--params", "engine=hash"]);
    ok(&["set", &plain, "a", "1", "--params", "engine=hash"]);
    assert_eq!(ok(&["get", &plain, "a", "--params", "engine=hash"]), "1\n");
}

#[test]
fn inspect_reports_the_promised_properties() {
    let scratch = Scratch::new();
    let db = scratch.path("db.kuh");
    ok(&["create", &db, "--record-comp", "snappy"]);
    for i in 0..25 {
        ok(&["set", &db, &format!("k{i}"), "value"]);
    }
    let props = properties(&ok(&["inspect", &db]));
    assert_eq!(props["record_comp"], "snappy");
    assert_eq!(props["count"], "25");
    assert_eq!(props["healthy"], "true");
    let size: u64 = props["file_size"].parse().unwrap();
    assert!(size > 0 && size <= std::fs::metadata(&db).unwrap().len());
}

#[test]
fn list_prints_tsv_keys_and_limits() {
    let scratch = Scratch::new();
    let db = scratch.path("db.kuh");
    ok(&["create", &db]);
    let mut expected = BTreeMap::new();
    for i in 0..30 {
        let (key, value) = (format!("key{i:02}"), format!("value {i}"));
        ok(&["set", &db, &key, &value]);
        expected.insert(key, value);
    }
    assert_eq!(parse_tsv(&ok(&["list", &db])), expected);

    let keys: Vec<String> = ok(&["list", &db, "--keys"]).lines().map(String::from).collect();
    let mut sorted = keys.clone();
    sorted.sort();
    assert_eq!(sorted, expected.keys().cloned().collect::<Vec<_>>());

    let limited = ok(&["list", &db, "--limit", "7"]);
    assert_eq!(limited.lines().count(), 7);
    assert_eq!(ok(&["list", &db, "--keys", "--limit", "0"]), "");

    // A hash database keeps no order: ranges are refused as a usage error, with a clear message.
    fails(&["list", &db, "--from", "key10"], USAGE, "need an ordered engine");
    fails(&["list", &db, "--reverse"], USAGE, "need an ordered engine");
}

#[test]
fn list_ranges_on_ordered_engines() {
    let scratch = Scratch::new();
    for extension in ["kut", "kumb"] {
        let db = scratch.path(&format!("ordered.{extension}"));
        ok(&["create", &db]);
        let keys: Vec<String> = (0..30).map(|i| format!("key{i:02}")).collect();
        for key in keys.iter().rev() {
            ok(&["set", &db, key, &format!("value of {key}")]);
        }
        let listed = |args: &[&str]| -> Vec<String> {
            let mut all = vec!["list", db.as_str(), "--keys"];
            all.extend_from_slice(args);
            ok(&all).lines().map(String::from).collect()
        };
        assert_eq!(listed(&[]), keys);
        assert_eq!(listed(&["--from", "key10", "--to", "key15"]), keys[10..15].to_vec());
        assert_eq!(listed(&["--from", "key095"]), keys[10..].to_vec());
        assert_eq!(listed(&["--to", "key03"]), keys[..3].to_vec());
        let reversed: Vec<String> = keys[10..15].iter().rev().cloned().collect();
        assert_eq!(listed(&["--from", "key10", "--to", "key15", "--reverse"]), reversed);
        assert_eq!(listed(&["--reverse", "--limit", "2"]), vec!["key29".to_string(), "key28".to_string()]);
        assert_eq!(listed(&["--from", "key40"]), Vec::<String>::new());
        // A range whose start is not below its end is empty, walked either way.
        for (from, to) in [("key15", "key10"), ("key12", "key12"), ("key125", "key121")] {
            assert_eq!(listed(&["--from", from, "--to", to]), Vec::<String>::new(), "{from}..{to}");
            assert_eq!(listed(&["--from", from, "--to", to, "--reverse"]), Vec::<String>::new(), "{from}..{to}");
        }
        let tsv = ok(&["list", &db, "--from", "key07", "--limit", "1"]);
        assert_eq!(tsv, "key07\tvalue of key07\n");

        // --inclusive takes the --to key in, both ways; between two keys it changes nothing.
        assert_eq!(listed(&["--from", "key10", "--to", "key15", "--inclusive"]), keys[10..=15].to_vec());
        let reversed: Vec<String> = keys[10..=15].iter().rev().cloned().collect();
        assert_eq!(listed(&["--from", "key10", "--to", "key15", "--inclusive", "--reverse"]), reversed);
        assert_eq!(listed(&["--to", "key02", "--inclusive"]), keys[..=2].to_vec());
        assert_eq!(listed(&["--from", "key12", "--to", "key12", "--inclusive"]), vec!["key12".to_string()]);
        assert_eq!(listed(&["--from", "key12", "--to", "key125", "--inclusive"]), vec!["key12".to_string()]);
        assert_eq!(listed(&["--to", "key295", "--inclusive", "--reverse", "--limit", "1"]), vec!["key29".to_string()]);
        fails(&["list", &db, "--inclusive"], USAGE, "--to");
    }
}

#[test]
fn import_export_round_trip_for_every_codec() {
    let scratch = Scratch::new();
    let records = sample_records(300);
    let tsv = scratch.path("in.tsv");
    write_tsv(&tsv, &records, &["a line without a tab", ""]);
    for codec in kura::codec::names() {
        let db = scratch.path(&format!("{codec}.kuh"));
        let summary = ok(&["import", &db, &tsv, "--record-comp", codec, "--skip-bad"]);
        assert!(summary.contains("records=300"), "{codec}: {summary}");
        assert!(summary.contains("skipped=2"), "{codec}: {summary}");
        assert!(summary.contains("file_size="), "{codec}: {summary}");

        assert_eq!(parse_tsv(&ok(&["export", &db])), records, "{codec}: export to stdout");
        let out = scratch.path(&format!("{codec}.out.tsv"));
        assert_eq!(ok(&["export", &db, &out]), "");
        assert_eq!(parse_tsv(&std::fs::read_to_string(&out).unwrap()), records, "{codec}: export to file");

        let props = properties(&ok(&["inspect", &db]));
        assert_eq!(props["record_comp"], codec);
        assert_eq!(props["count"], "300");
        assert_eq!(ok(&["get", &db, "word00042"]).trim_end(), records["word00042"]);
    }
}

#[test]
fn help_and_kura_codecs_list_every_codec_of_the_registry() {
    let help = ok(&["create", "--help"]);
    let listed: Vec<serde_json::Value> =
        ok(&["codecs", "--json"]).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(listed.len(), kura::codec::CODECS.len());
    for (codec, entry) in kura::codec::CODECS.iter().zip(&listed) {
        assert!(help.contains(codec.name), "kura create --help lacks {}: {help}", codec.name);
        assert_eq!(entry["name"], codec.name);
        assert_eq!(entry["id"], codec.id);
    }
}

#[test]
fn import_into_an_existing_database_adds_and_overwrites() {
    let scratch = Scratch::new();
    let db = scratch.path("db.kuh");
    ok(&["create", &db, "--record-comp", "zstd"]);
    ok(&["set", &db, "kept", "old"]);
    ok(&["set", &db, "word00001", "old"]);
    let records = sample_records(50);
    let tsv = scratch.path("in.tsv");
    write_tsv(&tsv, &records, &[]);
    ok(&["import", &db, &tsv, "--threads", "3"]);
    let mut expected = records.clone();
    expected.insert("kept".into(), "old".into());
    assert_eq!(parse_tsv(&ok(&["export", &db])), expected);

    // A key repeated in the file: the last line wins, whatever the thread count.
    let repeated = scratch.path("repeated.tsv");
    let lines: String = (0..200).map(|i| format!("same\t{i}\nk{i}\tv\n")).collect();
    std::fs::write(&repeated, lines).unwrap();
    ok(&["import", &scratch.path("rep.kuh"), &repeated, "--threads", "4"]);
    assert_eq!(ok(&["get", &scratch.path("rep.kuh"), "same"]), "199\n");

    fails(&["import", &db, &scratch.path("absent.tsv")], NOT_FOUND, "absent.tsv");
}

#[test]
fn rebuild_changes_the_codec_and_keeps_the_records() {
    let scratch = Scratch::new();
    let records = sample_records(200);
    let tsv = scratch.path("in.tsv");
    write_tsv(&tsv, &records, &[]);
    let db = scratch.path("db.kuh");
    ok(&["import", &db, &tsv, "--record-comp", "none"]);
    for codec in ["lz4", "zstd-dict", "zlib", "none"] {
        let summary = ok(&["rebuild", &db, "--record-comp", codec, "--buckets", "4K"]);
        assert!(summary.contains("records=200"), "{summary}");
        let props = properties(&ok(&["inspect", &db]));
        assert_eq!(props["record_comp"], codec);
        assert_eq!(props["count"], "200");
        assert_eq!(parse_tsv(&ok(&["export", &db])), records, "after rebuild to {codec}");
    }
    ok(&["rebuild", &db]);
    assert_eq!(parse_tsv(&ok(&["export", &db])), records);
    fails(&["rebuild", &db, "--record-comp", "bogus"], USAGE, "zstd-dict");
}

#[test]
fn restore_copies_the_records_into_a_new_file() {
    let scratch = Scratch::new();
    let records = sample_records(120);
    let tsv = scratch.path("in.tsv");
    write_tsv(&tsv, &records, &[]);
    let db = scratch.path("db.kuh");
    ok(&["import", &db, &tsv, "--record-comp", "zstd"]);
    let restored = scratch.path("restored.kuh");
    let summary = ok(&["restore", &db, &restored]);
    assert!(summary.contains("records=120"), "{summary}");
    assert_eq!(parse_tsv(&ok(&["export", &restored])), records);
    fails(&["restore", &db, &restored], NOT_FOUND, "already exists");
    fails_somehow(&["restore", &scratch.path("absent.kuh"), &scratch.path("new.kuh")]);
}

#[test]
fn restore_salvages_a_damaged_tree_file_and_a_damaged_memory_snapshot() {
    let scratch = Scratch::new();
    let records = sample_records(3000);
    let tsv = scratch.path("in.tsv");
    write_tsv(&tsv, &records, &[]);
    let db = scratch.path("db.kut");
    ok(&["import", &db, &tsv, "--record-comp", "lz4"]);
    // Damage a page in the middle of the file: its records are lost, the others survive.
    let mut bytes = std::fs::read(&db).unwrap();
    let middle = bytes.len() / 2;
    for byte in &mut bytes[middle..middle + 64] {
        *byte ^= 0x5a;
    }
    std::fs::write(&db, &bytes).unwrap();
    let restored = scratch.path("restored.kut");
    let summary = ok(&["restore", &db, &restored]);
    let count: usize = summary.split("records=").nth(1).unwrap().split(' ').next().unwrap().parse().unwrap();
    let salvaged = parse_tsv(&ok(&["export", &restored]));
    assert_eq!(salvaged.len(), count, "{summary}");
    assert!(count > records.len() / 2 && count <= records.len(), "{summary}");
    for (key, value) in &salvaged {
        assert_eq!(records.get(key), Some(value), "a salvaged record is one that was written");
    }
    // The salvaged file is a sound tree: ranges work on it.
    assert_eq!(ok(&["list", &restored, "--keys", "--limit", "1"]).lines().count(), 1);
    // Restoring into another engine's extension is refused before anything is written.
    fails(&["restore", &db, &scratch.path("other.kuh")], USAGE, "same engine");
    assert!(!Path::new(&scratch.path("other.kuh")).exists());
    // A memory engine's snapshot: a damaged byte costs its block's records only, and the
    // report says how many were dropped.
    let memory = scratch.path("db.kumt");
    ok(&["import", &memory, &tsv]);
    let mut bytes = std::fs::read(&memory).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x08;
    std::fs::write(&memory, &bytes).unwrap();
    let restored = scratch.path("restored.kumt");
    let summary = ok(&["restore", &memory, &restored]);
    let salvaged = parse_tsv(&ok(&["export", &restored]));
    assert!(summary.contains(&format!("records={} ", salvaged.len())), "{summary}");
    assert!(salvaged.len() > records.len() * 9 / 10 && salvaged.len() < records.len(), "{summary}");
    assert!(summary.contains("dropped: 1 of ") && summary.contains("blocks damaged"), "{summary}");
    for (key, value) in &salvaged {
        assert_eq!(records.get(key), Some(value), "a salvaged record is one that was written");
    }
}

#[test]
fn a_second_writer_process_is_refused() {
    let scratch = Scratch::new();
    let db = scratch.path("db.kuh");
    ok(&["create", &db]);
    ok(&["set", &db, "k", "v"]);
    // This test process holds the write lock; the kura process must be refused.
    let holder = kura::open(&db, kura::OpenMode::Write, &kura::Params::new()).unwrap();
    fails(&["set", &db, "k", "w"], OTHER, "locked");
    fails(&["remove", &db, "k"], OTHER, "locked");
    holder.close().unwrap();
    drop(holder);
    ok(&["set", &db, "k", "w"]);
    assert_eq!(ok(&["get", &db, "k"]), "w\n");
}

#[test]
fn bench_sequence_prints_one_json_object_per_phase() {
    let scratch = Scratch::new();
    for extra in [&[][..], &["--threads", "2", "--random-key"][..]] {
        let db = scratch.path("bench.kuh");
        // The second run replaces the first one's database, which takes --force.
        let mut args = vec!["bench", "--iter", "1000", "--size", "16", "--json", "--path", &db, "--force"];
        args.extend_from_slice(extra);
        let text = ok(&args);
        let phases: Vec<serde_json::Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        let names: Vec<&str> = phases.iter().map(|p| p["phase"].as_str().unwrap()).collect();
        assert_eq!(names, ["set", "get", "iterate", "remove"]);
        let threads = if extra.is_empty() { 1 } else { 2 };
        for phase in &phases {
            for field in ["engine", "threads", "records", "elapsed_s", "qps", "file_size", "rss_bytes", "iter", "size"]
            {
                assert!(phase.get(field).is_some(), "{field} missing in {phase}");
            }
            assert_eq!(phase["engine"], "hash");
            assert_eq!(phase["threads"], threads);
            assert_eq!(phase["iter"], 1000);
            assert!(phase["qps"].as_f64().unwrap() >= 0.0);
        }
        if extra.is_empty() {
            assert_eq!(phases[0]["records"], 1000);
            assert_eq!(phases[1]["misses"], 0);
            assert_eq!(phases[2]["operations"], 1000);
        }
        assert_eq!(phases[3]["records"], 0);
    }
    // Without --path, the temporary database is removed afterwards.
    let human = ok(&["bench", "--iter", "200"]);
    assert!(human.contains("Setting done: elapsed_time="), "{human}");
    assert!(human.contains("Removing done:"), "{human}");
    fails(&["bench", "--engine", "nosuch"], USAGE, "hash");
}

#[test]
fn bench_runs_every_engine_without_parameters_and_prints_the_ones_it_chose() {
    let engines: Vec<serde_json::Value> =
        ok(&["engines", "--json"]).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(engines.len(), kura::engines().len());
    for (listed, engine) in engines.iter().zip(kura::engines()) {
        assert_eq!(listed["name"], engine.name);
        assert_eq!(listed["extension"], engine.extension);
        assert_eq!(listed["ordered"], engine.is_ordered());
        assert_eq!(listed["codec_param"].as_str(), engine.codec_param, "{}", engine.name);
        let human = ok(&["bench", "--engine", engine.name, "--iter", "300"]);
        assert!(human.contains("Setting done:"), "{}: {human}", engine.name);
        let chosen = human.lines().find(|l| l.starts_with("Parameters: ")).unwrap();
        assert!(chosen.contains(&format!("engine={}", engine.name)), "{chosen}");
        for name in engine.bench_params(300).names() {
            assert!(chosen.contains(&format!("{name}=")), "{}: {chosen} lacks {name}", engine.name);
        }
    }
}

#[test]
fn bench_keys_from_gets_every_key() {
    let scratch = Scratch::new();
    let records = sample_records(500);
    let tsv = scratch.path("in.tsv");
    write_tsv(&tsv, &records, &[]);
    let db = scratch.path("db.kuh");
    ok(&["import", &db, &tsv, "--record-comp", "lz4"]);
    for threads in ["1", "2", "3"] {
        let text = ok(&["bench", "--keys-from", &tsv, "--path", &db, "--threads", threads, "--json"]);
        let phase: serde_json::Value = serde_json::from_str(text.trim()).unwrap();
        assert_eq!(phase["phase"], "get");
        assert_eq!(phase["operations"], 500);
        assert_eq!(phase["misses"], 0);
        assert_eq!(phase["threads"].to_string(), threads);
    }
    // Keys the database lacks are an error.
    let more = sample_records(600);
    let bigger = scratch.path("bigger.tsv");
    write_tsv(&bigger, &more, &[]);
    fails(&["bench", "--keys-from", &bigger, "--path", &db], OTHER, "not found");
    fails(&["bench", "--keys-from", &tsv], USAGE, "--path");
}

#[test]
fn paths_with_spaces_work() {
    let scratch = Scratch::new();
    let db: PathBuf = scratch.dir.path().join("my db.kuh");
    assert!(kura_path(&["create"], &[&db]).status.success());
    let output = kura_path(&["inspect"], &[&db]);
    assert!(output.status.success());
    assert!(String::from_utf8_lossy(&output.stdout).contains("count=0"));
}

#[test]
fn get_with_several_keys_prints_a_line_per_key_and_names_each_missing_key() {
    let scratch = Scratch::new();
    for engine in kura::engines() {
        let db = scratch.path(&format!("several.{}", engine.extension));
        // The parameters an engine needs at every open (CacheDbm's record cap).
        let bench = engine.bench_params(100);
        let params: Vec<String> = bench.names().map(|n| format!("{n}={}", bench.get(n).unwrap())).collect();
        let run = |args: &[&str]| {
            let mut all = args.to_vec();
            let joined = params.join(",");
            if !joined.is_empty() {
                all.extend(["--params", &joined]);
            }
            kura(&all)
        };
        let stdout_of = |args: &[&str]| {
            let output = run(args);
            assert!(output.status.success(), "{} {args:?}: {}", engine.name, String::from_utf8_lossy(&output.stderr));
            String::from_utf8(output.stdout).unwrap()
        };
        stdout_of(&["create", &db]);
        stdout_of(&["set", &db, "apple", "a red fruit"]);
        stdout_of(&["set", &db, "empty", ""]);
        stdout_of(&["set", &db, "cherry", "small"]);
        // Every key found: one line per key in the order given, repeats included.
        let all_found = stdout_of(&["get", &db, "cherry", "apple", "empty", "cherry"]);
        assert_eq!(all_found, "small\na red fruit\n\nsmall\n", "{}", engine.name);
        // Missing keys: an empty line each, each named once on stderr, exit 1.
        let output = run(&["get", &db, "banana", "apple", "durian", "empty"]);
        assert_eq!(output.status.code(), Some(NOT_FOUND), "{}", engine.name);
        assert_eq!(String::from_utf8(output.stdout).unwrap(), "\na red fruit\n\n\n", "{}", engine.name);
        let stderr = String::from_utf8(output.stderr).unwrap();
        let lines: Vec<&str> = stderr.lines().collect();
        assert_eq!(lines.len(), 2, "{}: {stderr}", engine.name);
        assert!(lines[0].starts_with("kura: ") && lines[0].contains("\"banana\""), "{stderr}");
        assert!(lines[1].starts_with("kura: ") && lines[1].contains("\"durian\""), "{stderr}");
        // One key: the value, or an empty line and exit 1 naming the key.
        assert_eq!(stdout_of(&["get", &db, "apple"]), "a red fruit\n");
        let output = run(&["get", &db, "banana"]);
        assert_eq!(output.status.code(), Some(NOT_FOUND), "{}", engine.name);
        assert!(String::from_utf8_lossy(&output.stderr).contains("not found"), "{}", engine.name);
    }
}

#[test]
fn bench_batch_adds_a_get_batch_phase_per_size_for_every_engine() {
    for engine in kura::engines() {
        for extra in [&[][..], &["--threads", "2", "--random-key"][..]] {
            let mut args = vec!["bench", "--engine", engine.name, "--iter", "1000", "--batch", "7,64", "--json"];
            args.extend_from_slice(extra);
            let phases: Vec<serde_json::Value> = ok(&args).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
            let names: Vec<&str> = phases.iter().map(|p| p["phase"].as_str().unwrap()).collect();
            assert_eq!(names, ["set", "get", "get_batch", "get_batch", "iterate", "remove"], "{}", engine.name);
            // The batched gets look up the single gets' keys: same operations, same misses.
            for (phase, batch) in [(&phases[2], 7), (&phases[3], 64)] {
                assert_eq!(phase["batch"], batch, "{}", engine.name);
                assert_eq!(phase["operations"], phases[1]["operations"], "{}", engine.name);
                assert_eq!(phase["misses"], phases[1]["misses"], "{}", engine.name);
            }
        }
    }
    fails(&["bench", "--batch", "0"], USAGE, "--batch");
}

/// Runs kura as the `nobody` user when the test runs as root (root ignores permission bits).
fn kura_unprivileged(args: &[&str]) -> Output {
    use std::os::unix::process::CommandExt;
    let mut command = Command::new(env!("CARGO_BIN_EXE_kura"));
    command.args(args);
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        command.uid(65534).gid(65534);
    }
    command.output().expect("the kura binary runs")
}

#[test]
fn permission_errors_exit_3_naming_the_file() {
    use std::os::unix::fs::PermissionsExt;
    let scratch = Scratch::new();
    let open_dir = scratch.path("open");
    std::fs::create_dir(&open_dir).unwrap();
    std::fs::set_permissions(&open_dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let db = format!("{open_dir}/db.kuh");
    ok(&["create", &db]);
    ok(&["set", &db, "k", "v"]);
    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o444)).unwrap();
    let closed_dir = scratch.path("closed");
    std::fs::create_dir(&closed_dir).unwrap();
    let hidden = format!("{closed_dir}/db.kuh");
    ok(&["create", &hidden]);
    ok(&["set", &hidden, "k", "v"]);
    std::fs::set_permissions(&closed_dir, std::fs::Permissions::from_mode(0o000)).unwrap();
    std::fs::set_permissions(scratch.dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    for (args, path) in [
        (vec!["set", &db, "k", "w"], &db),
        (vec!["get", &hidden, "k"], &hidden),
        (vec!["set", &hidden, "k", "w"], &hidden),
    ] {
        let output = kura_unprivileged(&args);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(OTHER), "kura {args:?}: {stderr}");
        assert!(stderr.contains(path.as_str()) && stderr.contains("Permission denied"), "kura {args:?}: {stderr}");
    }
    // The read-only file still reads.
    let output = kura_unprivileged(&["get", &db, "k"]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    std::fs::set_permissions(&closed_dir, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// Runs kura with its files limited to `limit_bytes` (`RLIMIT_FSIZE`) and SIGXFSZ ignored,
/// so that a write past the limit fails with EFBIG, as one on a full disk fails with ENOSPC.
fn kura_with_file_size_limit(args: &[&str], limit_bytes: u64) -> Output {
    use std::os::unix::process::CommandExt;
    let mut command = Command::new(env!("CARGO_BIN_EXE_kura"));
    command.args(args);
    // SAFETY: between fork and exec the closure makes only async-signal-safe system calls
    // (setrlimit, signal) and allocates nothing.
    unsafe {
        command.pre_exec(move || {
            let limit = libc::rlimit { rlim_cur: limit_bytes, rlim_max: limit_bytes };
            if libc::setrlimit(libc::RLIMIT_FSIZE, &limit) != 0
                || libc::signal(libc::SIGXFSZ, libc::SIG_IGN) == libc::SIG_ERR
            {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    command.output().expect("the kura binary runs")
}

/// A write that runs out of space exits 3 naming the file; every record stored before is
/// still there afterwards, and once there is room again, writes go on. For each file engine
/// the CLI opens by extension.
#[test]
fn running_out_of_space_exits_3_and_keeps_what_was_stored() {
    let scratch = Scratch::new();
    let mut big = String::new();
    for i in 0..20_000 {
        big.push_str(&format!("bulk{i:06}\t{}\n", "v".repeat(200)));
    }
    let tsv = scratch.path("big.tsv");
    std::fs::write(&tsv, big).unwrap();
    for extension in ["kuh", "kut"] {
        let db = scratch.path(&format!("full.{extension}"));
        ok(&["create", &db]);
        for i in 0..20 {
            ok(&["set", &db, &format!("kept{i}"), &format!("value {i}")]);
        }
        let size = std::fs::metadata(&db).unwrap().len();
        // Room for the file as it is and a little more: the 4 MB import cannot fit.
        let output = kura_with_file_size_limit(&["import", &db, &tsv], size + (256 << 10));
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(OTHER), "{extension}: {stderr}");
        assert!(stderr.contains(&db) && stderr.contains("File too large"), "{extension}: {stderr}");
        for i in 0..20 {
            assert_eq!(ok(&["get", &db, &format!("kept{i}")]).trim_end(), format!("value {i}"), "{extension}");
        }
        ok(&["set", &db, "after", "the disk was freed"]);
        assert_eq!(ok(&["get", &db, "after"]).trim_end(), "the disk was freed");
        // The import itself, given room, completes.
        ok(&["import", &db, &tsv]);
        assert_eq!(ok(&["get", &db, "bulk019999"]).trim_end(), "v".repeat(200));
    }
}

/// A read-only directory (no new database in it) and a missing one: exit 3 and exit 1
/// (not found), each naming the path.
#[test]
fn a_read_only_or_missing_directory_is_a_clear_error_naming_the_path() {
    use std::os::unix::fs::PermissionsExt;
    let scratch = Scratch::new();
    let read_only = scratch.path("read-only");
    std::fs::create_dir(&read_only).unwrap();
    std::fs::set_permissions(&read_only, std::fs::Permissions::from_mode(0o555)).unwrap();
    let inside = format!("{read_only}/db.kuh");
    let output = kura_unprivileged(&["create", &inside]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(OTHER), "{stderr}");
    assert!(stderr.contains(&inside) && stderr.contains("Permission denied"), "{stderr}");
    let missing = scratch.path("no-such-dir/db.kuh");
    fails(&["create", &missing], NOT_FOUND, &missing);
    fails(&["set", &missing, "k", "v"], NOT_FOUND, &missing);
    std::fs::set_permissions(&read_only, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// The issue's reproduction: one bit flipped inside the stored zstd dictionary. Reads must
/// fail (exit 3, naming the dictionary) instead of returning wrong values, and `restore`
/// keeps only the records it can prove intact and says what it dropped.
#[test]
fn a_damaged_dictionary_is_refused_and_restore_says_what_it_dropped() {
    let scratch = Scratch::new();
    let records = sample_records(2000);
    let tsv = scratch.path("dict.tsv");
    write_tsv(&tsv, &records, &[]);
    let db = scratch.path("dict.kuh");
    ok(&["import", &db, &tsv, "--record-comp", "zstd-dict"]);
    let mut bytes = std::fs::read(&db).unwrap();
    let field = |at: usize, len: usize| bytes[at..at + len].iter().rev().fold(0u64, |acc, &b| acc << 8 | u64::from(b));
    let (num_buckets, dictionary_len) = (field(16, 8), field(48, 4));
    assert!(dictionary_len > 0, "the import trained no dictionary");
    // After the header region (the header and its copy, 1,024 bytes) and the buckets.
    let flip_at = (1024 + 5 * num_buckets + dictionary_len / 2) as usize;
    bytes[flip_at] ^= 0x08;
    std::fs::write(&db, &bytes).unwrap();

    fails(&["get", &db, "word00042"], OTHER, "dictionary");
    fails(&["export", &db], OTHER, "dictionary");
    let restored = scratch.path("restored.kuh");
    let report = ok(&["restore", &db, &restored]);
    assert!(report.contains("dropped:") && report.contains("dictionary"), "{report}");
    let salvaged = parse_tsv(&ok(&["export", &restored]));
    for (key, value) in &salvaged {
        assert_eq!(records.get(key), Some(value), "restore kept a value that was never written");
    }
    assert!(salvaged.len() < records.len(), "{report}");
}

/// The numeric comparator decides what a range holds: "9" < "10" there, so --from 9 --to 10
/// holds key 9, and --from 10 --to 9 nothing, though bytewise it is the other way round.
#[test]
fn list_ranges_follow_the_trees_comparator() {
    let scratch = Scratch::new();
    let db = scratch.path("numbers.kut");
    ok(&["create", &db, "--params", "key_comparator=numeric"]);
    for number in [1, 9, 10, 11, 100] {
        ok(&["set", &db, &number.to_string(), "x"]);
    }
    assert_eq!(ok(&["list", &db, "--keys", "--from", "9", "--to", "11"]), "9\n10\n");
    assert_eq!(ok(&["list", &db, "--keys", "--from", "10", "--to", "9"]), "");
    assert_eq!(ok(&["list", &db, "--keys", "--from", "10", "--to", "9", "--reverse"]), "");
}

/// `export DB DB` (or onto one of a set's shard files) would empty the database before
/// reading it: refused, and the database keeps every record.
#[test]
fn export_refuses_to_write_over_the_database() {
    let scratch = Scratch::new();
    let records = sample_records(50);
    let tsv = scratch.path("in.tsv");
    write_tsv(&tsv, &records, &[]);
    for db in [scratch.path("self.kuh"), scratch.path("self.kut")] {
        ok(&["import", &db, &tsv]);
        fails(&["export", &db, &db], USAGE, "the database's own file");
        assert_eq!(parse_tsv(&ok(&["export", &db])), records);
    }
    let set = scratch.path("set.kuh");
    ok(&["import", &set, &tsv, "--shards", "2"]);
    let shard = format!("{set}-00001-of-00002");
    fails(&["export", &set, &shard], USAGE, "the database's own file");
    assert_eq!(parse_tsv(&ok(&["export", &set])), records);
}

/// `list` writes TSV as `export` does: a record plain TSV cannot hold stops it unless
/// --escape is given, and --escape writes what `import --escape` reads back.
#[test]
fn list_escapes_or_refuses_what_plain_tsv_cannot_hold() {
    let scratch = Scratch::new();
    let db = scratch.path("odd.kut");
    ok(&["create", &db]);
    ok(&["set", &db, "plain", "value"]);
    ok(&["set", &db, "tab\tkey", "line\nbreak"]);
    fails(&["list", &db], USAGE, "--escape");
    assert_eq!(ok(&["list", &db, "--keys"]), "plain\ntab\tkey\n");
    let escaped = ok(&["list", &db, "--escape"]);
    assert_eq!(escaped, "plain\tvalue\ntab\\tkey\tline\\nbreak\n");
    let copy = scratch.path("copy.kut");
    let tsv = scratch.path("escaped.tsv");
    std::fs::write(&tsv, &escaped).unwrap();
    ok(&["import", &copy, &tsv, "--escape"]);
    assert_eq!(ok(&["get", &copy, "tab\tkey"]), "line\nbreak\n");
    ok(&["set", &db, "new\nline", "v"]);
    fails(&["list", &db, "--keys"], USAGE, "--escape");
    assert!(ok(&["list", &db, "--keys", "--escape"]).contains("new\\nline\n"));
}

/// A stdout that cannot be written (a full device) is an error with exit 3 and a message,
/// never a panic, for every command that prints a summary.
#[test]
fn a_full_stdout_is_an_error_not_a_panic() {
    let scratch = Scratch::new();
    let tsv = scratch.path("in.tsv");
    write_tsv(&tsv, &sample_records(10), &[]);
    let db = scratch.path("full.kuh");
    let run = |args: &[&str]| {
        let full = std::fs::OpenOptions::new().write(true).open("/dev/full").unwrap();
        Command::new(env!("CARGO_BIN_EXE_kura")).args(args).stdout(full).output().unwrap()
    };
    let restored = scratch.path("restored.kuh");
    for args in [
        vec!["import", db.as_str(), tsv.as_str()],
        vec!["rebuild", db.as_str()],
        vec!["restore", db.as_str(), restored.as_str()],
        vec!["list", db.as_str()],
        vec!["bench", "--iter", "10"],
        vec!["--help"],
    ] {
        let output = run(&args);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(OTHER), "kura {args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "kura {args:?}: {stderr}");
    }
    assert_eq!(parse_tsv(&ok(&["export", &db])).len(), 10, "the import itself went through");
}

/// Options that cannot apply are said so: restore takes no engine parameters, bench's
/// sequence options do not combine with --keys-from, and --buckets for a database that
/// exists is noted on stderr (the import goes on).
#[test]
fn options_that_cannot_apply_are_refused_or_noted() {
    let scratch = Scratch::new();
    let tsv = scratch.path("in.tsv");
    write_tsv(&tsv, &sample_records(20), &[]);
    let db = scratch.path("opts.kut");
    ok(&["import", &db, &tsv]);
    let restored = scratch.path("restored.kut");
    fails(&["--params", "record_comp=zstd", "restore", &db, &restored], USAGE, "rebuild the restored file");
    assert!(!Path::new(&restored).exists());
    ok(&["restore", &db, &restored]);
    for extra in [["--batch", "4"], ["--size", "100"], ["--random-key", "--json"]] {
        let mut args = vec!["bench", "--keys-from", tsv.as_str(), "--path", db.as_str()];
        args.extend_from_slice(&extra);
        fails(&args, USAGE, "cannot be used with");
    }
    let hash = scratch.path("sized.kuh");
    ok(&["import", &hash, &tsv, "--buckets", "1000"]);
    let output = kura(&["import", &hash, &tsv, "--buckets", "50"]);
    assert!(output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("does not apply"));
    assert_eq!(properties(&ok(&["inspect", &hash]))["num_buckets"], "1000");
}

/// `set` creates a missing database, as `import` does, with the engine parameters given;
/// `get`, `remove` and `list` leave a missing one missing (tested above).
#[test]
fn set_creates_a_missing_database_with_its_parameters() {
    let scratch = Scratch::new();
    let db = scratch.path("new.kuh");
    ok(&["--params", "record_comp=zstd,num_buckets=1000", "set", &db, "apple", "red"]);
    assert_eq!(ok(&["get", &db, "apple"]), "red\n");
    let props = properties(&ok(&["inspect", &db]));
    assert_eq!(props["record_comp"], "zstd");

    // --record-comp sets the engine's codec parameter, whatever the engine calls it (the
    // registry says), and an engine that compresses nothing says so.
    let compact = scratch.path("db.kumz");
    ok(&["create", &compact, "--record-comp", "lz4"]);
    assert_eq!(properties(&ok(&["inspect", &compact]))["bucket_comp"], "lz4");
    fails(&["create", &scratch.path("db.kumt"), "--record-comp", "lz4"], USAGE, "takes no codec");
    let tree = scratch.path("new.kut");
    ok(&["set", &tree, "b", "2"]);
    ok(&["set", &tree, "a", "1"]);
    assert_eq!(ok(&["list", &tree, "--keys"]), "a\nb\n");
}

/// Every positional argument of every subcommand says what it is in `--help`.
#[test]
fn every_positional_argument_has_help() {
    let help = ok(&["--help"]);
    let commands: Vec<&str> = help
        .lines()
        .skip_while(|line| !line.starts_with("Commands:"))
        .skip(1)
        .take_while(|line| line.starts_with("  "))
        .filter_map(|line| line.split_whitespace().next())
        .filter(|name| *name != "help")
        .collect();
    assert!(commands.len() >= 15 && commands.contains(&"import") && commands.contains(&"man"), "{commands:?}");
    let mut positionals = 0;
    for command in commands {
        let help = ok(&[command, "--help"]);
        for line in help.lines().skip_while(|line| !line.starts_with("Arguments:")).skip(1) {
            if !line.starts_with("  ") {
                break;
            }
            let text = line.trim_start().split_once("  ").map(|(_, text)| text.trim()).unwrap_or_default();
            assert!(!text.is_empty(), "kura {command} --help: {line:?} has no help");
            positionals += 1;
        }
    }
    assert!(positionals >= 20, "only {positionals} positional arguments found");
}

/// `engines`, `codecs`, `completions` and `man` open no database: `--params` is neither
/// offered nor accepted there (usage error), before or after the subcommand's name.
#[test]
fn commands_without_a_database_take_no_params() {
    for command in ["engines", "codecs"] {
        let help = ok(&[command, "--help"]);
        assert!(!help.contains("--params"), "kura {command} --help: {help}");
        fails(&[command, "--params", "engine=hash"], USAGE, "takes no --params");
        fails(&["--params", "engine=hash", command], USAGE, "takes no --params");
    }
    assert!(!ok(&["completions", "--help"]).contains("--params"));
    assert!(ok(&["list", "--help"]).contains("--params"));
}

/// `kura completions bash` is a script that bash loads and that registers `kura`; zsh's and
/// fish's name the subcommands.
#[test]
fn completion_scripts_load_and_name_the_subcommands() {
    let bash = ok(&["completions", "bash"]);
    assert!(bash.contains("import") && bash.contains("--inclusive"), "{bash}");
    let scratch = Scratch::new();
    let script = scratch.path("kura.bash");
    std::fs::write(&script, &bash).unwrap();
    let loaded = Command::new("bash").args(["-c", &format!("source '{script}' && complete -p kura")]).output().unwrap();
    assert!(loaded.status.success(), "{}", String::from_utf8_lossy(&loaded.stderr));
    assert!(String::from_utf8_lossy(&loaded.stdout).contains("kura"), "{loaded:?}");
    for shell in ["zsh", "fish"] {
        let script = ok(&["completions", shell]);
        assert!(script.contains("rebuild") && script.contains("record-comp"), "{shell}: {script}");
    }
    fails(&["completions", "tcsh"], USAGE, "tcsh");
}

/// `kura man DIR` writes kura.1 and one page per subcommand, each in roff with its name and
/// its options.
#[test]
fn man_writes_a_page_per_subcommand() {
    let scratch = Scratch::new();
    let dir = scratch.path("man/man1");
    let listed = ok(&["man", &dir]);
    assert_eq!(listed.lines().count(), std::fs::read_dir(&dir).unwrap().count());
    for (page, wanted) in [("kura.1", "kura-import(1)"), ("kura-list.1", "--inclusive"), ("kura-import.1", "--format")]
    {
        let text = std::fs::read_to_string(Path::new(&dir).join(page)).unwrap();
        assert!(text.starts_with(".ie") || text.contains(".TH"), "{page}: {text}");
        assert!(text.contains(wanted) || text.contains(&wanted.replace('-', "\\-")), "{page} lacks {wanted}: {text}");
    }
    assert!(!Path::new(&dir).join("kura-help.1").exists());
}
