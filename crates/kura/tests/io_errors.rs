//! I/O errors at open: a read-only file, a read-only directory, a missing directory and a
//! directory that may not be entered (EACCES) give typed errors whose message names the
//! path, for every engine of the registry (a shard set's errors name the shard file, whose
//! name starts with the set's path).
//!
//! Root is not stopped by permission bits, and CI runs as root: there the test runs itself
//! again in a child process that first drops to the `nobody` user (uid and gid 65534).

#![expect(clippy::unwrap_used, reason = "a test fails by panicking")]

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

use kura::{Dbm, ErrorKind, OpenMode, Params};

const CHILD_ENV: &str = "KURA_IO_ERRORS_CHILD";
const NOBODY: libc::uid_t = 65534;

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

fn params_for(engine: &kura::Engine) -> Params {
    engine.bench_params(100)
}

fn assert_io_error(result: kura::Result<Box<dyn Dbm>>, path: &Path, kinds: &[ErrorKind], what: &str) {
    let error = match result {
        Ok(_) => panic!("{what}: opened"),
        Err(e) => e,
    };
    assert!(kinds.contains(&error.kind()), "{what}: {error} is not one of {kinds:?}");
    assert!(error.message().contains(&path.display().to_string()), "{what}: the error names no path: {error}");
    println!("{what}: {error}");
}

/// The files in `dir` whose names start with the name of `path`.
fn database_files(dir: &Path, path: &Path) -> Vec<std::path::PathBuf> {
    let name = path.file_name().unwrap().to_str().unwrap();
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|file| file.file_name().unwrap().to_str().unwrap().starts_with(name))
        .collect();
    files.sort();
    files
}

fn check_every_engine() {
    let root = tempfile::tempdir().unwrap();
    for engine in kura::engines() {
        let dir = root.path().join(engine.name);
        std::fs::create_dir(&dir).unwrap();
        let params = params_for(engine);
        let path = dir.join(format!("db.{}", engine.extension));
        let db = engine.open(&path, OpenMode::Create, &params).unwrap();
        db.set(b"k", b"v", true).unwrap();
        db.close().unwrap();
        // The database's files: its own, or a shard set's shard files, each named after the
        // set's path (`db.kus-00000-of-00004`), so that an error naming one names the set.
        let files = database_files(&dir, &path);
        assert!(!files.is_empty(), "{}: no file written", engine.name);

        // A read-only file: a writer is refused; a reader still reads it.
        files.iter().for_each(|file| chmod(file, 0o444));
        let what = format!("{} read-only file", engine.name);
        assert_io_error(engine.open(&path, OpenMode::Write, &params), &path, &[ErrorKind::Io], &what);
        let reader = engine.open(&path, OpenMode::ReadOnly, &params).unwrap();
        assert_eq!(reader.get(b"k").unwrap(), b"v");
        reader.close().unwrap();
        files.iter().for_each(|file| chmod(file, 0o644));

        // A read-only directory: no new database in it.
        chmod(&dir, 0o555);
        let new = dir.join(format!("new.{}", engine.extension));
        let what = format!("{} read-only directory", engine.name);
        assert_io_error(engine.open(&new, OpenMode::Create, &params), &new, &[ErrorKind::Io], &what);
        chmod(&dir, 0o755);

        // A missing directory: NotFound (the OS said ENOENT), naming the path.
        let missing = dir.join("no-such-dir").join(format!("db.{}", engine.extension));
        let what = format!("{} missing directory", engine.name);
        assert_io_error(engine.open(&missing, OpenMode::Create, &params), &missing, &[ErrorKind::NotFound], &what);

        // A directory that may not be entered: EACCES for readers and writers.
        chmod(&dir, 0o000);
        for mode in [OpenMode::ReadOnly, OpenMode::Write] {
            let what = format!("{} unreadable directory ({mode:?})", engine.name);
            assert_io_error(engine.open(&path, mode, &params), &path, &[ErrorKind::Io], &what);
        }
        chmod(&dir, 0o755);
    }
}

#[test]
fn open_errors_are_typed_and_name_the_path() {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    if std::env::var_os(CHILD_ENV).is_some() {
        // SAFETY: plain system calls on this (single-threaded, freshly started) process.
        unsafe {
            assert_eq!(libc::setgroups(0, std::ptr::null()), 0);
            assert_eq!(libc::setgid(NOBODY), 0);
            assert_eq!(libc::setuid(NOBODY), 0);
        }
        return check_every_engine();
    }
    if !root {
        return check_every_engine();
    }
    let status = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "open_errors_are_typed_and_name_the_path", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, "1")
        .status()
        .unwrap();
    assert!(status.success(), "the child running as nobody failed");
}
