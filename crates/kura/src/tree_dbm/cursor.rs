//! Cursors of TreeDbm: a position in key order that survives concurrent updates.
//!
//! A cursor remembers the key it stands on, plus the leaf it found it in and the tree's
//! generation at that moment. While the generation is unchanged, moves within the leaf need
//! no lock at all; otherwise the cursor seeks again from its key, so a record removed under it
//! makes it stand on the next one, and it never yields a key twice.

use std::sync::Arc;

use super::page::Page;
use super::seek::{Position, Seek};
use super::TreeDbm;
use crate::dbm::{Action, Cursor, Dbm, OrderedCursor};
use crate::error::{Error, Result};

/// A cursor over a TreeDbm in key order, both ways.
pub struct TreeCursor<'a> {
    db: &'a TreeDbm,
    /// The key the cursor stands on; None when it stands nowhere.
    key: Option<Vec<u8>>,
    /// The leaf holding `key` as of `generation`.
    leaf: Option<(Arc<Page>, usize, u64)>,
}

impl<'a> TreeCursor<'a> {
    /// A cursor at no record; call `first`, `last` or a jump.
    pub fn new(db: &'a TreeDbm) -> TreeCursor<'a> {
        TreeCursor { db, key: None, leaf: None }
    }

    /// Every read of the cursor (and of a range, which walks cursors) comes through here:
    /// its errors name the file (`TreeDbm::named`).
    fn seek(&mut self, target: Seek<'_>) -> Result<bool> {
        let sought = self.db.read().and_then(|tree| Ok((tree.seek(target)?, self.db.generation())));
        let (position, generation) = self.db.named(sought)?;
        self.settle(position, generation);
        Ok(self.key.is_some())
    }

    fn settle(&mut self, position: Option<Position>, generation: u64) {
        match position {
            Some(Position { leaf, index }) => {
                self.key = leaf_key(&leaf, index).map(<[u8]>::to_vec);
                self.leaf = Some((leaf, index, generation));
            }
            None => {
                self.key = None;
                self.leaf = None;
            }
        }
    }

    /// The leaf and index of the current key if the snapshot is still current.
    fn current(&self) -> Option<(&Page, usize)> {
        match &self.leaf {
            Some((leaf, index, generation)) if *generation == self.db.generation() => Some((leaf, *index)),
            _ => None,
        }
    }

    /// Steps within the snapshot leaf; false when the step leaves it (or it is stale).
    fn step_in_leaf(&mut self, forward: bool) -> bool {
        let Some((leaf, index, generation)) = &mut self.leaf else {
            return false;
        };
        if *generation != self.db.generation() {
            return false;
        }
        let next = if forward { index.checked_add(1) } else { index.checked_sub(1) };
        match next.and_then(|n| leaf_key(leaf, n).map(|k| (n, k))) {
            Some((n, key)) => {
                // The key's buffer is reused: a step within a leaf allocates nothing.
                let held = self.key.get_or_insert_with(Vec::new);
                held.clear();
                held.extend_from_slice(key);
                *index = n;
                true
            }
            None => false,
        }
    }

    /// Makes sure the cursor stands on an existing record (the next one if its record went).
    fn resolve(&mut self) -> Result<bool> {
        if self.key.is_none() {
            return Ok(false);
        }
        if self.current().is_some() {
            return Ok(true);
        }
        let key = self.key.take().unwrap_or_default();
        self.seek(Seek::AtLeast(&key))
    }
}

fn leaf_key(page: &Page, index: usize) -> Option<&[u8]> {
    match page {
        Page::Leaf(leaf) => leaf.key(index),
        Page::Branch(_) => None,
    }
}

impl Cursor for TreeCursor<'_> {
    fn first(&mut self) -> Result<bool> {
        self.seek(Seek::First)
    }

    fn jump(&mut self, key: &[u8]) -> Result<bool> {
        self.seek(Seek::AtLeast(key))
    }

    fn next(&mut self) -> Result<bool> {
        let Some(key) = self.key.take() else {
            return Ok(false);
        };
        self.key = Some(key);
        if self.step_in_leaf(true) {
            return Ok(true);
        }
        let key = self.key.take().unwrap_or_default();
        self.seek(Seek::Above(&key))
    }

    fn record(&mut self) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        if !self.resolve()? {
            return Ok(None);
        }
        let Some((Page::Leaf(leaf), index)) = self.current() else {
            return Ok(None);
        };
        Ok(leaf.record(index).map(|(k, v)| (k.to_vec(), v.to_vec())))
    }

    fn record_with(&mut self, visit: &mut dyn FnMut(&[u8], &[u8])) -> Result<bool> {
        if !self.resolve()? {
            return Ok(false);
        }
        let Some((Page::Leaf(leaf), index)) = self.current() else {
            return Ok(false);
        };
        let Some((key, value)) = leaf.record(index) else {
            return Ok(false);
        };
        visit(key, value);
        Ok(true)
    }

    fn key(&mut self) -> Result<Option<Vec<u8>>> {
        if !self.resolve()? {
            return Ok(None);
        }
        Ok(self.key.clone())
    }

    fn set(&mut self, value: &[u8]) -> Result<()> {
        if !self.resolve()? {
            return Err(Error::not_found("the cursor is at no record"));
        }
        let key = self.key.clone().unwrap_or_default();
        if !self.db.replace(&key, value)? {
            return Err(Error::not_found("the record at the cursor was removed"));
        }
        Ok(())
    }

    fn remove(&mut self) -> Result<()> {
        if !self.resolve()? {
            return Err(Error::not_found("the cursor is at no record"));
        }
        let key = self.key.take().unwrap_or_default();
        let mut existed = false;
        self.db.process(&key, &mut |old| {
            existed = old.is_some();
            Action::Remove
        })?;
        self.seek(Seek::AtLeast(&key))?;
        if !existed {
            return Err(Error::not_found("the record at the cursor was removed"));
        }
        Ok(())
    }
}

impl OrderedCursor for TreeCursor<'_> {
    fn last(&mut self) -> Result<bool> {
        self.seek(Seek::Last)
    }

    fn previous(&mut self) -> Result<bool> {
        if self.key.is_none() {
            return Ok(false);
        }
        if self.step_in_leaf(false) {
            return Ok(true);
        }
        let key = self.key.take().unwrap_or_default();
        self.seek(Seek::Below(&key))
    }

    fn jump_lower(&mut self, key: &[u8], inclusive: bool) -> Result<bool> {
        self.seek(if inclusive { Seek::AtMost(key) } else { Seek::Below(key) })
    }

    fn jump_upper(&mut self, key: &[u8], inclusive: bool) -> Result<bool> {
        self.seek(if inclusive { Seek::AtLeast(key) } else { Seek::Above(key) })
    }
}
