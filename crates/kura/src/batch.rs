//! Write batches: sets and removes collected first and then applied together.
//!
//! TreeDbm applies a batch atomically (all of it or none, even across a crash; see
//! `tree/batch.rs`). The other engines apply its operations in order, each atomic on its own.
//! Bulk loaders (`kura import`) hand records over in batches either way, so an engine that can
//! apply many records under one lock or one commit does.

/// One operation of a write batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BatchOp {
    /// Store `value` under `key`.
    Set {
        /// The key.
        key: Vec<u8>,
        /// Its new value.
        value: Vec<u8>,
    },
    /// Remove the record of `key` (absent: nothing happens).
    Remove {
        /// The key.
        key: Vec<u8>,
    },
}

/// Operations to apply together, in order (a later operation on a key wins).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WriteBatch {
    ops: Vec<BatchOp>,
    bytes: usize,
}

impl WriteBatch {
    /// An empty batch.
    pub fn new() -> WriteBatch {
        WriteBatch::default()
    }

    /// Adds a set of `key` to `value`.
    pub fn set(&mut self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> &mut WriteBatch {
        let (key, value) = (key.as_ref().to_vec(), value.as_ref().to_vec());
        self.bytes += key.len() + value.len();
        self.ops.push(BatchOp::Set { key, value });
        self
    }

    /// Adds a removal of `key`.
    pub fn remove(&mut self, key: impl AsRef<[u8]>) -> &mut WriteBatch {
        let key = key.as_ref().to_vec();
        self.bytes += key.len();
        self.ops.push(BatchOp::Remove { key });
        self
    }

    /// The operations, in the order they apply.
    pub fn ops(&self) -> &[BatchOp] {
        &self.ops
    }

    /// Number of operations.
    pub fn len(&self) -> usize {
        self.ops.len()
    }

    /// Whether the batch has no operation.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// Key and value bytes held, to decide when to write a growing batch.
    pub fn byte_size(&self) -> usize {
        self.bytes
    }

    /// Moves the operations of `later` to the end of this batch (they apply after these).
    pub fn append(&mut self, mut later: WriteBatch) {
        self.bytes += later.bytes;
        self.ops.append(&mut later.ops);
    }

    /// Empties the batch, keeping its memory for reuse.
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
