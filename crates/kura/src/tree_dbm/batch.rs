//! How TreeDbm applies a write batch (LevelDB's WriteBatch) all or nothing.
//!
//! Pending changes are committed first, so that the last published tree is exactly the state
//! before the batch. The batch is then applied in memory and committed as one unit: a crash
//! before the header write leaves none of it, after it all of it; an error midway rolls the
//! tree back to the state before the batch.

use std::borrow::Cow;

use super::btree::BTree;
use crate::batch::{BatchOp, WriteBatch};
use crate::dbm::Action;
use crate::error::Result;

pub fn apply(tree: &mut BTree, batch: &WriteBatch) -> Result<()> {
    tree.commit(false)?;
    for op in batch.ops() {
        let outcome = match op {
            BatchOp::Set { key, value } => tree.process(key, &mut |_| Action::Set(Cow::Borrowed(value))),
            BatchOp::Remove { key } => tree.process(key, &mut |_| Action::Remove),
        };
        if let Err(e) = outcome {
            tree.rollback();
            return Err(e);
        }
    }
    tree.commit(false)
}
