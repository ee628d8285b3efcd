//! Key ranges on an ordered engine: TreeDbm's `range` with Rust's range syntax (the upper key
//! excluded by `a..c`, included by `a..=c`, as the README's Conventions table says for every
//! interface), walking down with `.rev()`, and the ordered cursor that any ordered engine
//! behind `Box<dyn Dbm>` offers (here BabyDbm, the in-memory one). Exists to show the range
//! convention in code, and runs in `make test` so the convention it asserts stays true.
//!
//! Run: `cargo run -p kura --example ranges`.

use kura::{open, Dbm, OpenMode, Params, TreeDbm};

/// The keys of a list of records, as text, for comparing with what the example expects.
fn keys(records: &[(Vec<u8>, Vec<u8>)]) -> Vec<String> {
    records.iter().map(|(key, _)| String::from_utf8_lossy(key).into_owned()).collect()
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let scratch = tempfile::tempdir()?;
    let tree = TreeDbm::open(scratch.path().join("words.kut"), OpenMode::Create, &Params::new())?;
    for word in ["apple", "apricot", "banana", "blueberry", "cherry", "date"] {
        tree.set(word.as_bytes(), word.to_uppercase().as_bytes(), true)?;
    }

    // From "apple" included to "c" excluded: the default everywhere (CLI `--from a --to c`).
    let half_open = tree.range("apple".."c").collect::<kura::Result<Vec<_>>>()?;
    assert_eq!(keys(&half_open), ["apple", "apricot", "banana", "blueberry"]);

    // The upper key included: `..=` (CLI `--inclusive`, Python `inclusive=True`).
    let closed = tree.range("banana"..="cherry").collect::<kura::Result<Vec<_>>>()?;
    assert_eq!(keys(&closed), ["banana", "blueberry", "cherry"]);

    // The same keys walked down from the top (CLI `--reverse`, Python `reverse=True`).
    let down = tree.range("b"..).rev().collect::<kura::Result<Vec<_>>>()?;
    assert_eq!(keys(&down), ["date", "cherry", "blueberry", "banana"]);
    println!("b.. walked down: {:?}", keys(&down));
    tree.close()?;

    // Any ordered engine opened through `open` has an ordered cursor: jump lands on the first
    // key not less than the one given. BabyDbm needs no file; `.kumb` names it.
    let baby = open(scratch.path().join("memory.kumb"), OpenMode::Create, &Params::new())?;
    for (key, value) in [("k1", "one"), ("k2", "two"), ("k3", "three")] {
        baby.set(key.as_bytes(), value.as_bytes(), true)?;
    }
    let mut cursor = baby.ordered_cursor()?;
    assert!(cursor.jump(b"k15")?, "no key at or after k15");
    assert_eq!(cursor.record()?, Some((b"k2".to_vec(), b"two".to_vec())));
    assert!(cursor.previous()?);
    assert_eq!(cursor.key()?, Some(b"k1".to_vec()));
    drop(cursor);

    // A hash engine has no order, and says so instead of returning records in hash order.
    let hash = open(scratch.path().join("hash.kuh"), OpenMode::Create, &Params::new())?;
    assert!(hash.ordered_cursor().is_err(), "a hash engine offered an ordered cursor");
    println!("ranges: ok");
    Ok(())
}
