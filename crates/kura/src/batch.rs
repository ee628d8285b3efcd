//! Write batches: sets and removes collected first and then applied together.
//!
//! TreeDbm applies a batch atomically (all of it or none, even across a crash; see
//! `tree/batch.rs`). The other engines apply its operations in order, each atomic on its own.
//! Bulk loaders (`kura import`) hand records over in batches either way, so an engine that can
//! apply many records under one lock or one commit does.
//!
//! A batch keeps every key and value end to end in one buffer, with a short entry per
//! operation saying where its bytes are. Two allocations per record (a key and a value of
//! their own), made by an import's parser thread and freed by a writer thread, were a third
//! of a two-thread import's time in the allocator; one buffer per batch costs a few.

/// One operation of a write batch, borrowed from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchOp<'a> {
    /// Store `value` under `key`.
    Set {
        /// The key.
        key: &'a [u8],
        /// Its new value.
        value: &'a [u8],
    },
    /// Remove the record of `key` (absent: nothing happens).
    Remove {
        /// The key.
        key: &'a [u8],
    },
}

impl<'a> BatchOp<'a> {
    /// The key the operation applies to.
    pub fn key(&self) -> &'a [u8] {
        match *self {
            BatchOp::Set { key, .. } | BatchOp::Remove { key } => key,
        }
    }

    /// The value a set stores; None for a removal.
    pub fn value(&self) -> Option<&'a [u8]> {
        match *self {
            BatchOp::Set { value, .. } => Some(value),
            BatchOp::Remove { .. } => None,
        }
    }
}

/// Where one operation's bytes are in the batch's buffer: its key at `start`, its value (a
/// set's) right after the key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Span {
    start: usize,
    key_len: usize,
    /// None for a removal.
    value_len: Option<usize>,
}

/// Operations to apply together, in order (a later operation on a key wins).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WriteBatch {
    /// Every operation's key and value, end to end, in operation order.
    bytes: Vec<u8>,
    spans: Vec<Span>,
}

impl WriteBatch {
    /// An empty batch.
    pub fn new() -> WriteBatch {
        WriteBatch::default()
    }

    /// Adds a set of `key` to `value`.
    pub fn set(&mut self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> &mut WriteBatch {
        self.push(BatchOp::Set { key: key.as_ref(), value: value.as_ref() })
    }

    /// Adds a removal of `key`.
    pub fn remove(&mut self, key: impl AsRef<[u8]>) -> &mut WriteBatch {
        self.push(BatchOp::Remove { key: key.as_ref() })
    }

    /// Adds `op` (a copy of its bytes).
    pub fn push(&mut self, op: BatchOp<'_>) -> &mut WriteBatch {
        let (key, value) = (op.key(), op.value());
        self.spans.push(Span { start: self.bytes.len(), key_len: key.len(), value_len: value.map(<[u8]>::len) });
        self.bytes.extend_from_slice(key);
        self.bytes.extend_from_slice(value.unwrap_or_default());
        self
    }

    /// The operations, in the order they apply.
    pub fn ops(&self) -> impl ExactSizeIterator<Item = BatchOp<'_>> + DoubleEndedIterator + Clone + '_ {
        self.spans.iter().map(|span| self.op_at(span))
    }

    /// The operation at `index` (in the order they apply).
    pub fn op(&self, index: usize) -> Option<BatchOp<'_>> {
        self.spans.get(index).map(|span| self.op_at(span))
    }

    fn op_at(&self, span: &Span) -> BatchOp<'_> {
        let key_end = span.start + span.key_len;
        // The spans are made by `push` and shifted together with the bytes by `append`, so
        // they always lie inside the buffer; a miss is a bug in this file, loud in debug.
        let slice = |from: usize, to: usize| {
            let part = self.bytes.get(from..to);
            debug_assert!(part.is_some(), "a batch span {from}..{to} outside its {} bytes", self.bytes.len());
            part.unwrap_or_default()
        };
        let key = slice(span.start, key_end);
        match span.value_len {
            Some(len) => BatchOp::Set { key, value: slice(key_end, key_end + len) },
            None => BatchOp::Remove { key },
        }
    }

    /// Number of operations.
    pub fn len(&self) -> usize {
        self.spans.len()
    }

    /// Whether the batch has no operation.
    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    /// Key and value bytes held, to decide when to write a growing batch.
    pub fn byte_size(&self) -> usize {
        self.bytes.len()
    }

    /// Moves the operations of `later` to the end of this batch (they apply after these).
    pub fn append(&mut self, later: WriteBatch) {
        let shift = self.bytes.len();
        self.spans.extend(later.spans.iter().map(|span| Span { start: span.start + shift, ..*span }));
        self.bytes.extend_from_slice(&later.bytes);
    }

    /// Empties the batch, keeping its memory for reuse.
    pub fn clear(&mut self) {
        self.spans.clear();
        self.bytes.clear();
    }
}

impl<'a> FromIterator<BatchOp<'a>> for WriteBatch {
    fn from_iter<I: IntoIterator<Item = BatchOp<'a>>>(ops: I) -> WriteBatch {
        let mut batch = WriteBatch::new();
        for op in ops {
            batch.push(op);
        }
        batch
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operations_come_back_in_order_through_append_and_clear() {
        let mut first = WriteBatch::new();
        first.set(b"a", b"1").remove(b"b").set(b"", b"");
        let mut second = WriteBatch::new();
        second.set(b"c", b"long value").remove(b"");
        first.append(second.clone());
        let expected = [
            BatchOp::Set { key: b"a", value: b"1" },
            BatchOp::Remove { key: b"b" },
            BatchOp::Set { key: b"", value: b"" },
            BatchOp::Set { key: b"c", value: b"long value" },
            BatchOp::Remove { key: b"" },
        ];
        assert_eq!(first.ops().collect::<Vec<_>>(), expected);
        assert_eq!(first.len(), 5);
        assert_eq!(first.byte_size(), 1 + 1 + 1 + 1 + 10);
        assert_eq!(first.op(3), expected.get(3).copied());
        assert_eq!(first.op(5), None);
        assert_eq!(first.ops().next_back(), expected.last().copied());
        assert_eq!(expected.iter().copied().collect::<WriteBatch>(), first);
        first.clear();
        assert!(first.is_empty() && first.byte_size() == 0 && first.ops().next().is_none());
    }
}
