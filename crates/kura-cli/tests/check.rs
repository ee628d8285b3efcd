//! `kura check` and the messages damage leads to (issue 43, items 2 and 3): a sound file
//! checks clean (exit 0); a damaged one lists its problems and exits 3 with the hint to
//! restore it; every other command that meets damage names the file and hints at `kura
//! check` and `kura restore`; `inspect`'s help says its `healthy` is only the clean-close flag.

#![expect(
    clippy::unwrap_used,
    clippy::indexing_slicing,
    reason = "a test fails loudly on the first broken expectation"
)]

mod support;

use support::{kura, ok};

/// Runs kura, expects exit 3; returns stdout and stderr.
#[track_caller]
fn fails_with_damage(args: &[&str]) -> (String, String) {
    let output = kura(args);
    let (stdout, stderr) =
        (String::from_utf8(output.stdout).unwrap(), String::from_utf8_lossy(&output.stderr).into_owned());
    assert_eq!(output.status.code(), Some(3), "kura {args:?}: {stdout} {stderr}");
    (stdout, stderr)
}

/// A database with eight records, one of them holding `MARKER`, and a copy with one byte of
/// that value flipped.
fn sound_and_damaged(dir: &std::path::Path, extension: &str, params: &str) -> (String, String) {
    let sound = dir.join(format!("sound.{extension}")).to_str().unwrap().to_string();
    let damaged = dir.join(format!("damaged.{extension}")).to_str().unwrap().to_string();
    ok(&["create", &sound, "--params", params]);
    for i in 0..8 {
        let value = if i == 5 { "MARKER-value-of-record-5".to_string() } else { format!("value {i}") };
        ok(&["set", &sound, &format!("key{i}"), &value, "--params", params]);
    }
    let mut bytes = std::fs::read(&sound).unwrap();
    let at = bytes.windows(6).position(|w| w == b"MARKER").expect("the value is stored raw");
    bytes[at + 2] ^= 0x10;
    std::fs::write(&damaged, bytes).unwrap();
    (sound, damaged)
}

#[test]
fn check_passes_a_sound_file_and_lists_the_damage_of_a_flipped_one() {
    let dir = tempfile::tempdir().unwrap();
    let (sound, damaged) = sound_and_damaged(dir.path(), "kuh", "num_buckets=16");
    assert_eq!(ok(&["check", &sound]), "checked records=8 pages=0 problems=0\n");
    // `inspect` reads the header only: the damaged copy was closed cleanly, so healthy.
    assert!(ok(&["inspect", &damaged]).contains("healthy=true"));
    let (stdout, stderr) = fails_with_damage(&["check", &damaged]);
    assert!(stdout.starts_with("checked records=7 pages=0 problems=1\nproblem: record at "), "{stdout}");
    assert!(stdout.contains("checksum mismatch"), "{stdout}");
    assert!(stderr.contains(&format!("{damaged}: damaged, 1 problem found")), "{stderr}");
    assert!(stderr.contains(&format!("hint: `kura restore {damaged} NEW_PATH`")), "{stderr}");

    // Any other command meeting the damage names the file and says what to do.
    for args in [vec!["list", &damaged], vec!["get", &damaged, "key5"], vec!["export", &damaged]] {
        let (_, stderr) = fails_with_damage(&args);
        assert!(stderr.contains(&format!("kura: broken data: {damaged}: ")), "{args:?}: {stderr}");
        assert!(stderr.contains(&format!("hint: `kura check {damaged}`")), "{args:?}: {stderr}");
        assert!(stderr.contains(&format!("`kura restore {damaged} NEW_PATH`")), "{args:?}: {stderr}");
    }
    let help = ok(&["help", "inspect"]);
    assert!(help.contains("clean-close flag") && help.contains("kura check"), "{help}");
}

#[test]
fn every_engine_checks_clean_and_flags_its_damaged_copy() {
    let dir = tempfile::tempdir().unwrap();
    for engine in kura::engines().iter().filter(|e| e.name != "shard") {
        let params = engine.bench_params(100).or_defaults(&engine.import_params(100)).with("engine", engine.name);
        let text: Vec<String> = params.names().map(|n| format!("{n}={}", params.get(n).unwrap())).collect();
        let text = text.join(",");
        let sub = dir.path().join(engine.name);
        std::fs::create_dir(&sub).unwrap();
        let (sound, damaged) = sound_and_damaged(&sub, engine.extension, &text);
        assert!(ok(&["check", &sound, "--params", &text]).contains("problems=0"), "{}", engine.name);
        let (stdout, stderr) = fails_with_damage(&["check", &damaged, "--params", &text]);
        assert!(stdout.contains("problem: "), "{}: {stdout}", engine.name);
        // The hint offers a restore only to an engine that has one (the registry says).
        let offers_restore = stderr.contains("kura restore");
        let has_restore = engine.can_restore();
        assert_eq!(offers_restore, has_restore, "{}: {stderr}", engine.name);
    }
}

#[test]
fn a_shard_sets_check_names_the_damaged_shard() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("set.kuh").to_str().unwrap().to_string();
    ok(&["create", &base, "--params", "num_shards=2,num_buckets=16"]);
    for i in 0..20 {
        ok(&["set", &base, &format!("key{i}"), &format!("MARKER-{i}")]);
    }
    assert!(ok(&["check", &base]).starts_with("checked records=20 "));
    let shard = format!("{base}-00001-of-00002");
    let mut bytes = std::fs::read(&shard).unwrap();
    let at = bytes.windows(6).position(|w| w == b"MARKER").unwrap();
    bytes[at + 3] ^= 0x01;
    std::fs::write(&shard, bytes).unwrap();
    let (stdout, _) = fails_with_damage(&["check", &base]);
    assert!(stdout.contains("problem: shard 1 of 2: record at "), "{stdout}");
    assert!(stdout.contains(": checksum mismatch"), "{stdout}");
}

/// Issue 43's first finding: one flipped byte in a HashDbm header (byte 40 of an 8-record
/// file). With the header's copy (format version 4) every command still reads the file, `kura
/// check` reports the damaged copy (exit 3) and `inspect` names it, a writing command repairs
/// it, and `kura restore` copies all 8 records; with both copies damaged, commands refuse the
/// file with the hints and the restore still copies all 8 (the byte put back).
#[test]
fn a_flipped_header_byte_is_served_by_the_copy_reported_by_check_and_repaired_by_a_writer() {
    let dir = tempfile::tempdir().unwrap();
    let (sound, _) = sound_and_damaged(dir.path(), "kuh", "num_buckets=16");
    let original = std::fs::read(&sound).unwrap();
    let path = |name: &str| dir.path().join(name).to_str().unwrap().to_string();
    for (name, flipped) in [("first.kuh", vec![40]), ("copy.kuh", vec![512 + 40]), ("both.kuh", vec![40, 512 + 40])] {
        let damaged = path(name);
        let mut bytes = original.clone();
        flipped.iter().for_each(|&at| bytes[at] ^= 0x10);
        std::fs::write(&damaged, &bytes).unwrap();
        let restored = path(&format!("restored-{name}"));
        let report = ok(&["restore", &damaged, &restored]);
        assert!(report.starts_with("restored records=8 "), "{name}: {report}");
        assert_eq!(ok(&["list", &restored, "--keys"]).lines().count(), 8, "{name}");
        let (stdout, _) = fails_with_damage(&["check", &damaged]);
        if name == "both.kuh" {
            assert!(stdout.contains("copy at 512 fails its check too"), "{stdout}");
            let (_, stderr) = fails_with_damage(&["list", &damaged]);
            assert!(stderr.contains(&format!("`kura restore {damaged} NEW_PATH`")), "{stderr}");
            continue;
        }
        assert!(stdout.starts_with("checked records=8 pages=0 problems=1\n"), "{name}: {stdout}");
        let which = if name == "first.kuh" { "the header at 0 failed" } else { "the header copy at 512 failed" };
        assert!(stdout.contains(which), "{name}: {stdout}");
        let inspect = ok(&["inspect", &damaged]);
        let damage = if name == "first.kuh" { "header_damage=first" } else { "header_damage=copy" };
        assert!(inspect.contains(damage) && inspect.contains("header_copies=2"), "{name}: {inspect}");
        assert_eq!(ok(&["list", &damaged, "--keys"]).lines().count(), 8, "{name}");
        assert_eq!(std::fs::read(&damaged).unwrap(), bytes, "{name}: a reading command wrote");
        ok(&["set", &damaged, "key8", "value 8"]);
        assert_eq!(ok(&["check", &damaged]), "checked records=9 pages=0 problems=0\n", "{name}: not repaired");
        assert!(ok(&["inspect", &damaged]).contains("header_damage=none"), "{name}");
    }
}
