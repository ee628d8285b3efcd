//! The first steps with Kura: open a database file (the engine chosen by its extension), set,
//! get, remove, count, walk the records, and close it; then open it again to show the records
//! were kept. Exists so that a new user sees the core calls in one place, and runs in
//! `make test` (`make test-examples`) so that it keeps compiling and doing what it says.
//!
//! Run: `cargo run -p kura --example basics [DIRECTORY]` (a temporary directory by default).

use kura::{open, DbmExt, ErrorKind, OpenMode, Params};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let scratch = tempfile::tempdir()?;
    let directory = std::env::args().nth(1).map_or_else(|| scratch.path().to_path_buf(), Into::into);
    // `.kuh` is HashDbm, the file hash database; `.kut` would be TreeDbm, `.kumt` TinyDbm.
    let path = directory.join("fruits.kuh");

    // Parameters as on the command line; an unknown name is an error, not a silent default.
    let params = Params::parse("record_comp=zstd,num_buckets=1K")?;
    let db = open(&path, OpenMode::Create, &params)?;
    db.set(b"apple", b"a red fruit", true)?;
    db.set(b"banana", b"a yellow fruit", true)?;
    // `overwrite = false` keeps the existing value and reports the key as already there.
    let refused = db.set(b"apple", b"a green fruit", false);
    assert!(refused.is_err(), "set without overwrite replaced a record");
    assert_eq!(db.get(b"apple")?, b"a red fruit");

    // A missing key is an error of kind NotFound, which callers match on.
    match db.get(b"cherry") {
        Err(error) if error.kind() == ErrorKind::NotFound => println!("cherry: not found"),
        other => return Err(format!("cherry should be missing, got {other:?}").into()),
    }

    // Counters are 8-byte big-endian values, updated atomically.
    db.increment(b"visits", 1, 0)?;
    assert_eq!(db.increment(b"visits", 2, 0)?, 3);
    db.remove(b"banana")?;
    assert_eq!(db.count()?, 2);

    // A hash engine walks its records in its own order: sort to print them stably.
    let mut records = db.records()?.collect::<kura::Result<Vec<_>>>()?;
    records.sort();
    for (key, value) in &records {
        println!("{} = {:?}", String::from_utf8_lossy(key), value);
    }
    db.close()?;

    // Reopened read-only, the records are still there.
    let reopened = open(&path, OpenMode::ReadOnly, &Params::new())?;
    assert_eq!(reopened.get(b"apple")?, b"a red fruit");
    assert!(!reopened.is_writable());
    println!("{} records in {}", reopened.count()?, path.display());
    reopened.close()?;
    Ok(())
}
