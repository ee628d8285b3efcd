//! No command empties a database it was not asked to replace (issue 43, item 4): `create`
//! over every engine's file and over a shard set, `restore` into an existing set, `bench
//! --path` over a database, `export` into another database. Each refuses with exit status 1
//! (the documented "already exists") and leaves every record; `--force` replaces. The list
//! of such paths, with these tests, is in docs/durability.md ("What replaces a database").

#![expect(clippy::unwrap_used, reason = "a test fails loudly on the first broken expectation")]

mod support;

use support::{fails, ok};

use std::path::Path;

const NOT_FOUND: i32 = 1;

/// The `--params` text an engine needs to open at all (CacheDbm's record cap), from the
/// registry; shard sets get two shards.
fn params_of(engine: &kura::Engine) -> String {
    let params = engine.bench_params(100).or_defaults(&engine.import_params(100)).without("num_shards");
    let mut pairs: Vec<String> = params.names().map(|name| format!("{name}={}", params.get(name).unwrap())).collect();
    pairs.push(format!("engine={}", engine.name));
    if engine.shard_set {
        pairs.push("num_shards=2".to_string());
    }
    pairs.join(",")
}

/// The records `db` holds, as `kura list` prints them.
fn listing(db: &str, params: &str) -> String {
    ok(&["list", db, "--params", params])
}

#[test]
fn create_refuses_every_engines_existing_database_and_force_replaces_it() {
    let dir = tempfile::tempdir().unwrap();
    for engine in kura::engines() {
        let db = dir.path().join(format!("db.{}", engine.extension)).to_str().unwrap().to_string();
        let params = params_of(engine);
        ok(&["create", &db, "--params", &params]);
        ok(&["set", &db, "apple", "red", "--params", &params]);
        ok(&["set", &db, "fig", "purple", "--params", &params]);
        let before = listing(&db, &params);
        assert_eq!(before.lines().count(), 2, "{}: {before}", engine.name);
        fails(&["create", &db, "--params", &params], NOT_FOUND, "--force");
        assert_eq!(listing(&db, &params), before, "{}: create emptied the database", engine.name);
        ok(&["create", &db, "--force", "--params", &params]);
        assert_eq!(listing(&db, &params), "", "{}: --force did not replace it", engine.name);
    }
}

/// The case of the issue: a shard set has no file at its base path, and `create` looked only
/// there.
#[test]
fn create_refuses_an_existing_shard_set_whatever_its_size_or_engine() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("cache.kuh").to_str().unwrap().to_string();
    ok(&["create", &base, "--params", "num_shards=2"]);
    for i in 0..20 {
        ok(&["set", &base, &format!("k{i}"), "v"]);
    }
    assert!(!Path::new(&base).exists() && Path::new(&format!("{base}-00001-of-00002")).exists());
    let before = ok(&["list", &base]);
    for params in ["num_shards=2", "num_shards=3", "engine=hash", "engine=shard,inner_engine=tree"] {
        fails(&["create", &base, "--params", params], NOT_FOUND, "shard set");
    }
    fails(&["create", &base], NOT_FOUND, "--force");
    assert_eq!(ok(&["list", &base]), before);
    ok(&["create", &base, "--force", "--params", "num_shards=3"]);
    assert_eq!(ok(&["list", &base]), "");
    assert!(!Path::new(&format!("{base}-00001-of-00002")).exists(), "the old set's files are left");
}

#[test]
fn restore_export_and_bench_leave_an_existing_database_alone() {
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name).to_str().unwrap().to_string();
    let (source, set, other) = (path("source.kuh"), path("set.kuh"), path("other.kuh"));
    for db in [&source, &other] {
        ok(&["create", db]);
        ok(&["set", db, "apple", "red"]);
    }
    ok(&["create", &set, "--params", "num_shards=2"]);
    ok(&["set", &set, "apple", "green"]);

    // A restore writes a new database: not over a shard set, nor over a file.
    fails(&["restore", &source, &set], NOT_FOUND, "already exists");
    fails(&["restore", &source, &other], NOT_FOUND, "already exists");
    assert_eq!(ok(&["get", &set, "apple"]), "green\n");

    // An export is TSV: not over another database, though over any other file.
    fails(&["export", &source, &other], NOT_FOUND, "is a database");
    fails(&["export", &source, &set], NOT_FOUND, "is a database");
    assert_eq!(ok(&["get", &other, "apple"]), "red\n");
    let tsv = path("out.tsv");
    std::fs::write(&tsv, "old").unwrap();
    ok(&["export", &source, &tsv]);
    assert_eq!(std::fs::read_to_string(&tsv).unwrap(), "apple\tred\n");

    // A benchmark starts from an empty database: only --force lets it replace one.
    fails(&["bench", "--iter", "10", "--path", &other], NOT_FOUND, "--force");
    fails(&["bench", "--iter", "10", "--engine", "shard", "--path", &set], NOT_FOUND, "--force");
    assert_eq!(ok(&["get", &other, "apple"]), "red\n");
    assert_eq!(ok(&["get", &set, "apple"]), "green\n");
    ok(&["bench", "--iter", "10", "--path", &other, "--force"]);
    fails(&["get", &other, "apple"], NOT_FOUND, "apple");
}
