//! Disk full: every engine writes into a small file system until space runs out. The failing
//! write is a typed error naming the file; the database then opens with every record
//! committed (synchronized) before; once space is freed, writes go on.
//!
//! The small file system is a 3 MiB tmpfs mounted for the test when the process may mount
//! (root with CAP_SYS_ADMIN, as in CI); otherwise a child process runs the same workload
//! under `RLIMIT_FSIZE` (files may not grow past the limit: EFBIG instead of ENOSPC), and
//! "freeing space" raises the limit.

#![expect(clippy::unwrap_used, reason = "a test fails by panicking")]

use std::collections::BTreeMap;
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use kura::{Dbm, DbmExt, Engine, ErrorKind, OpenMode, Params};

const FS_BYTES: u64 = 3 << 20;
const VALUE_BYTES: usize = 1500;
const SYNC_EVERY: u64 = 25;
const CHILD_ENV: &str = "KURA_DISK_FULL_CHILD";

/// A value that does not compress (so that it takes its room whatever the codec).
fn value(i: u64) -> Vec<u8> {
    let mut rng = kura::split_mix::SplitMix64::new(i);
    (0..VALUE_BYTES).map(|_| rng.next_u64() as u8).collect()
}

fn key(i: u64) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

/// A tmpfs of `FS_BYTES` mounted on a fresh directory, unmounted on drop.
struct SmallFs {
    dir: tempfile::TempDir,
}

impl SmallFs {
    fn mount() -> Option<SmallFs> {
        let dir = tempfile::tempdir().ok()?;
        let target = CString::new(dir.path().as_os_str().as_bytes()).ok()?;
        let options = CString::new(format!("size={FS_BYTES}")).ok()?;
        // SAFETY: every pointer is a NUL-terminated string that outlives the call.
        let mounted =
            unsafe { libc::mount(c"tmpfs".as_ptr(), target.as_ptr(), c"tmpfs".as_ptr(), 0, options.as_ptr().cast()) };
        (mounted == 0).then_some(SmallFs { dir })
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for SmallFs {
    fn drop(&mut self) {
        if let Ok(target) = CString::new(self.dir.path().as_os_str().as_bytes()) {
            // SAFETY: a NUL-terminated path that outlives the call.
            unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) };
        }
    }
}

fn params_for(engine: &Engine) -> Params {
    match engine.name {
        // The default million buckets (5 MB) would not fit.
        "hash" => Params::new().with("num_buckets", 1000),
        // Two HashDbm shards, each as small as the hash database above.
        "shard" => Params::new().with("num_shards", 2).with("num_buckets", 1000),
        // A checkpoint writes the pages changed since the last one while the journal still
        // holds them: on a 3 MiB disk, checkpointing every 256 KiB of journal keeps that room
        // within the 512 KiB the test frees (docs/durability.md, full disk).
        "tree" => engine.bench_params(10_000).with("checkpoint_bytes", 256 << 10),
        _ => engine.bench_params(10_000),
    }
}

/// Writes until a write fails, checks the error, reopens, frees space with `free`, writes on.
fn fill_and_recover(engine: &Engine, dir: &Path, free: &mut dyn FnMut()) {
    let path = dir.join(format!("full.{}", engine.extension));
    let params = params_for(engine);
    let what = engine.name;
    let db = engine.open(&path, OpenMode::Create, &params).unwrap();
    let mut committed: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    let mut pending = BTreeMap::new();
    let mut failure = None;
    for i in 0..100_000u64 {
        let result = db.set(&key(i), &value(i), true).map(|()| {
            pending.insert(key(i), value(i));
        });
        let result = result.and_then(|()| if (i + 1) % SYNC_EVERY == 0 { db.synchronize(true) } else { Ok(()) });
        match result {
            Ok(()) if (i + 1) % SYNC_EVERY == 0 => committed.append(&mut pending),
            Ok(()) => {}
            Err(e) => {
                failure = Some(e);
                break;
            }
        }
    }
    let error = failure.unwrap_or_else(|| panic!("{what}: the small file system never filled"));
    assert!(matches!(error.kind(), ErrorKind::Io | ErrorKind::Limit), "{what}: untyped error {error}");
    assert!(error.message().contains(&dir.display().to_string()), "{what}: the error names no path: {error}");
    println!("{what}: full after {} committed records: {error}", committed.len());
    // Closing may fail too (it writes); the file stays as the last synchronize left it.
    if let Err(e) = db.close() {
        println!("{what}: close after the failure: {e}");
        assert!(matches!(e.kind(), ErrorKind::Io | ErrorKind::Limit), "{what}: {e}");
    }
    drop(db);

    // Still full: the database opens for reading with every committed record.
    let reader = engine.open(&path, OpenMode::ReadOnly, &params).unwrap();
    check(reader.as_ref(), &committed, what);
    reader.close().unwrap();

    free();
    let db = engine.open(&path, OpenMode::Write, &params).unwrap();
    check(db.as_ref(), &committed, what);
    for i in 1_000_000..1_000_000 + 2 * SYNC_EVERY {
        db.set(&key(i), &value(i), true).unwrap();
        committed.insert(key(i), value(i));
    }
    db.synchronize(true).unwrap();
    db.close().unwrap();
    let db = engine.open(&path, OpenMode::ReadOnly, &params).unwrap();
    check(db.as_ref(), &committed, what);
    db.close().unwrap();
}

/// Every committed record is there with its value; any other record is one written later
/// (a set that returned before the failure), with its own value.
fn check(db: &dyn Dbm, committed: &BTreeMap<Vec<u8>, Vec<u8>>, what: &str) {
    for (k, v) in committed {
        assert_eq!(&db.get(k).unwrap_or_else(|e| panic!("{what}: committed record lost: {e}")), v, "{what}");
    }
    for record in db.records().unwrap() {
        let (k, v) = record.unwrap();
        let i: u64 = String::from_utf8_lossy(k.get(3..).unwrap_or_default()).parse().unwrap();
        assert_eq!(v, value(i), "{what}: a record with a value never written");
    }
}

fn ballast(dir: &Path) -> PathBuf {
    let path = dir.join("ballast");
    std::fs::write(&path, vec![1u8; 512 << 10]).unwrap();
    path
}

#[test]
fn every_engine_survives_a_full_disk() {
    if std::env::var_os(CHILD_ENV).is_some() {
        return under_file_size_limit();
    }
    match SmallFs::mount() {
        Some(fs) => {
            for engine in kura::engines() {
                let dir = fs.path().join(engine.name);
                std::fs::create_dir(&dir).unwrap();
                let ballast = ballast(fs.path());
                fill_and_recover(engine, &dir, &mut || std::fs::remove_file(&ballast).unwrap());
                std::fs::remove_dir_all(&dir).unwrap();
            }
        }
        None => {
            println!("cannot mount a tmpfs here: running under RLIMIT_FSIZE in a child process");
            let status = Command::new(std::env::current_exe().unwrap())
                .args(["--exact", "every_engine_survives_a_full_disk", "--nocapture", "--test-threads=1"])
                .env(CHILD_ENV, "1")
                .status()
                .unwrap();
            assert!(status.success(), "the child under RLIMIT_FSIZE failed");
        }
    }
}

/// The child: files may not grow past `FS_BYTES`; "freeing space" lifts the limit.
fn under_file_size_limit() {
    // SAFETY: ignoring SIGXFSZ turns an over-limit write into an EFBIG error.
    unsafe { libc::signal(libc::SIGXFSZ, libc::SIG_IGN) };
    let set_limit = |bytes: libc::rlim_t| {
        let limit = libc::rlimit { rlim_cur: bytes, rlim_max: libc::RLIM_INFINITY };
        // SAFETY: a valid rlimit struct, read during the call only.
        assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_FSIZE, &limit) }, 0);
    };
    for engine in kura::engines() {
        let dir = tempfile::tempdir().unwrap();
        set_limit(FS_BYTES);
        fill_and_recover(engine, dir.path(), &mut || set_limit(libc::RLIM_INFINITY));
    }
}
