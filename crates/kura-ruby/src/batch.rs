//! `Kura::Batch`: puts and deletes gathered in Ruby, written by `DB#write` in one call.
//!
//! `db.batch { |b| ... }` fills one and writes it when the block returns; an exception in
//! the block writes nothing. The batch holds copies of the bytes, never an engine lock, so a
//! block that raises or runs long leaves the database as usable as before. TreeDbm applies a
//! batch atomically (all or nothing, even across a crash); the other engines apply it one
//! operation at a time (`Dbm::write_batch`).

use std::cell::RefCell;

use kura::WriteBatch;
use magnus::{Error, Ruby, Value};

use crate::convert::Input;

#[magnus::wrap(class = "Kura::Batch", free_immediately, size)]
#[derive(Default)]
pub struct Batch {
    ops: RefCell<WriteBatch>,
}

impl Batch {
    pub fn new() -> Batch {
        Batch::default()
    }

    /// Adds a put of `value` under `key`.
    pub fn put(ruby: &Ruby, rb_self: &Batch, key: Value, value: Value) -> Result<(), Error> {
        let (key, value) = (Input::key(ruby, key)?, Input::value(ruby, value)?);
        key.with_bytes(|k| value.with_bytes(|v| rb_self.ops.borrow_mut().set(k, v).len()));
        Ok(())
    }

    /// Adds a delete of `key` (absent keys are not an error).
    pub fn delete(ruby: &Ruby, rb_self: &Batch, key: Value) -> Result<(), Error> {
        let key = Input::key(ruby, key)?;
        key.with_bytes(|k| rb_self.ops.borrow_mut().remove(k).len());
        Ok(())
    }

    /// Operations gathered so far.
    pub fn size(&self) -> usize {
        self.ops.borrow().len()
    }

    /// The operations, leaving the batch empty.
    pub fn take(&self) -> WriteBatch {
        std::mem::take(&mut *self.ops.borrow_mut())
    }
}
