//! Write batches: several sets and removes applied together with `write_batch`, and
//! `write_batch_durable` for a batch that must survive a power loss once it returns. On
//! TreeDbm a batch is all or nothing, even across a crash; on the other engines each
//! operation is atomic on its own. Exists to show the batch API and the difference between
//! the two calls; runs in `make test` so that both keep working as shown.
//!
//! Run: `cargo run -p kura --example batches`.

use kura::{open, OpenMode, Params, WriteBatch};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let scratch = tempfile::tempdir()?;
    let path = scratch.path().join("accounts.kut");
    let db = open(&path, OpenMode::Create, &Params::new())?;
    db.set(b"alice", b"100", true)?;
    db.set(b"bob", b"20", true)?;

    // Operations apply in order, and a later one on the same key wins.
    let mut transfer = WriteBatch::new();
    transfer.set("alice", "70").set("bob", "50").set("carol", "0").remove("carol");
    // Applied as one commit to the tree's journal: a crash keeps all of it or none.
    db.write_batch(&transfer)?;
    assert_eq!(db.get(b"alice")?, b"70");
    assert_eq!(db.get(b"bob")?, b"50");
    assert!(db.get(b"carol").is_err(), "the batch's later remove of carol did not win");

    // Durable: one fdatasync of the journal before it returns, so the batch outlives a power
    // loss, not only a killed process (write_batch alone promises the latter).
    let mut closing = WriteBatch::new();
    closing.set("alice", "0").set("bob", "120");
    db.write_batch_durable(&closing)?;
    db.close()?;

    let reopened = open(&path, OpenMode::ReadOnly, &Params::new())?;
    assert_eq!(reopened.get(b"alice")?, b"0");
    assert_eq!(reopened.get(b"bob")?, b"120");
    assert_eq!(reopened.count()?, 2);
    println!("batches: alice 0, bob 120 after two batches");
    Ok(())
}
