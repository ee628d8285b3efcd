//! A shard set: one database split over several files of one engine (`BASE-00000-of-00004`
//! ...), a key's shard chosen by a seeded hash, so that writers on different shards share no
//! lock. `open` makes one when given `num_shards`, and finds an existing set by its files
//! afterwards. Exists to show that a set is used like any other database (here from four
//! threads at once) and where its files are; runs in `make test` to keep that true.
//!
//! Run: `cargo run -p kura --example shards`.

use std::sync::Arc;

use kura::{open, Dbm, DbmExt, OpenMode, Params};

const THREADS: usize = 4;
const KEYS_PER_THREAD: usize = 250;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let scratch = tempfile::tempdir()?;
    let base = scratch.path().join("users.kut");
    // `num_shards` picks ShardDbm; the extension picks the engine of each shard (TreeDbm).
    let set: Arc<dyn Dbm> = open(&base, OpenMode::Create, &Params::new().with("num_shards", 4))?.into();

    // One handle serves many threads: each writes its own keys, spread over the shards.
    let writers: Vec<_> = (0..THREADS)
        .map(|thread| {
            let set = Arc::clone(&set);
            std::thread::spawn(move || -> kura::Result<()> {
                for number in 0..KEYS_PER_THREAD {
                    let key = format!("user{thread}-{number:04}");
                    set.set(key.as_bytes(), format!("{thread}").as_bytes(), true)?;
                }
                Ok(())
            })
        })
        .collect();
    for writer in writers {
        writer.join().map_err(|_| "a writer thread panicked")??;
    }
    assert_eq!(set.count()?, (THREADS * KEYS_PER_THREAD) as u64);
    // Ordered shards merge into one ordered walk.
    let first = set.records()?.next().transpose()?.map(|(key, _)| key);
    assert_eq!(first.as_deref(), Some(&b"user0-0000"[..]));
    set.close()?;

    let mut files: Vec<String> = std::fs::read_dir(scratch.path())?
        .map(|entry| entry.map(|entry| entry.file_name().to_string_lossy().into_owned()))
        .collect::<std::io::Result<_>>()?;
    files.retain(|name| !name.ends_with(".journal"));
    files.sort();
    assert_eq!(
        files,
        [
            "users.kut-00000-of-00004",
            "users.kut-00001-of-00004",
            "users.kut-00002-of-00004",
            "users.kut-00003-of-00004"
        ]
    );

    // Reopened without parameters: the set is found by its files, its size from their names.
    let reopened = open(&base, OpenMode::ReadOnly, &Params::new())?;
    assert_eq!(reopened.get(b"user3-0249")?, b"3");
    println!("shards: {} records in {}", reopened.count()?, files.join(" "));
    Ok(())
}
