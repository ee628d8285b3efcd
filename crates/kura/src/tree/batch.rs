//! Atomic write batches (LevelDB's WriteBatch): sets and removes applied all or nothing.
//!
//! Pending changes are committed first, so that the last published tree is exactly the state
//! before the batch. The batch is then applied in memory and committed as one unit: a crash
//! before the header write leaves none of it, after it all of it; an error midway rolls the
//! tree back to the state before the batch.

use std::borrow::Cow;

use super::btree::BTree;
use crate::dbm::Action;
use crate::error::Result;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BatchOp {
    Set { key: Vec<u8>, value: Vec<u8> },
    Remove { key: Vec<u8> },
}

/// Operations to apply together, in order (a later operation on a key wins).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WriteBatch {
    ops: Vec<BatchOp>,
    bytes: usize,
}

impl WriteBatch {
    pub fn new() -> WriteBatch {
        WriteBatch::default()
    }

    pub fn set(&mut self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> &mut WriteBatch {
        let (key, value) = (key.as_ref().to_vec(), value.as_ref().to_vec());
        self.bytes += key.len() + value.len();
        self.ops.push(BatchOp::Set { key, value });
        self
    }

    pub fn remove(&mut self, key: impl AsRef<[u8]>) -> &mut WriteBatch {
        let key = key.as_ref().to_vec();
        self.bytes += key.len();
        self.ops.push(BatchOp::Remove { key });
        self
    }

    pub fn ops(&self) -> &[BatchOp] {
        &self.ops
    }

    pub fn len(&self) -> usize {
        self.ops.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// Key and value bytes held, to decide when to write a growing batch.
    pub fn byte_size(&self) -> usize {
        self.bytes
    }

    pub fn clear(&mut self) {
        self.ops.clear();
        self.bytes = 0;
    }
}

impl From<Vec<BatchOp>> for WriteBatch {
    fn from(ops: Vec<BatchOp>) -> WriteBatch {
        let bytes = ops
            .iter()
            .map(|op| match op {
                BatchOp::Set { key, value } => key.len() + value.len(),
                BatchOp::Remove { key } => key.len(),
            })
            .sum();
        WriteBatch { ops, bytes }
    }
}

pub fn apply(tree: &mut BTree, batch: &WriteBatch) -> Result<()> {
    tree.commit(false)?;
    for op in &batch.ops {
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
