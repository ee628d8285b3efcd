//! BabyDbm (`.kumb`): an in-memory ordered database, a B+ tree of records (`btree/`) behind
//! one reader-writer lock that waits in user space first (`spin_lock.rs`; key order cannot be
//! sharded by hash). Small records sit inline in the tree's leaves (see `record.rs`), so most
//! records cost no allocation of their own. Its
//! cursor goes both ways and lands beside keys (`OrderedCursor`). Optionally backed by a
//! snapshot file (see `backing.rs`).

use std::path::Path;

use super::backing::{self, Backing};
use super::btree::{OrderedTree, Put};
use super::record::RecordBytes;
use super::snapshot;
use crate::dbm::OpenMode;
use crate::dbm::{Action, Cursor, Dbm, OrderedCursor, Params, Processor};
use crate::engine::Mark;
use crate::error::{Error, ErrorKind, Result};
use crate::multi_get::SEGMENT;
use crate::spin_lock::SpinRwLock;
use crate::stats::Stats;

const CLASS: u8 = b'b';

/// The in-memory ordered database (`.kumb`): a B+ tree behind one reader-writer lock.
pub struct BabyDbm {
    tree: SpinRwLock<OrderedTree>,
    backing: Backing,
}

impl BabyDbm {
    /// `kura restore`: copies every record of every intact block of the snapshot `source`
    /// into a new snapshot `dest` (docs/memory.md, "Salvage").
    pub fn salvage_file(source: &Path, dest: &Path) -> Result<crate::engine::RestoreReport> {
        super::backing::salvage_file(source, dest, CLASS)
    }

    /// The parameters `open` takes (the registry lists them; anything else is an error).
    pub const PARAMS: &'static [&'static str] = &[];

    /// The marks its files start with (the registry lists them; `kura.dbm.whichdb` asks).
    pub const MAGIC: &'static [Mark] = &snapshot::magic(&CLASS);

    /// A database with no file (no parameters).
    pub fn new(params: &Params) -> Result<BabyDbm> {
        params.check_known("baby", Self::PARAMS)?;
        Ok(BabyDbm { tree: SpinRwLock::new(OrderedTree::new()), backing: Backing::in_memory(CLASS) })
    }

    /// Opens `path` (empty: no file), loading its snapshot as `mode` says.
    pub fn open(path: impl AsRef<Path>, mode: OpenMode, params: &Params) -> Result<BabyDbm> {
        params.check_known("baby", Self::PARAMS)?;
        let opened = Backing::open(path.as_ref(), mode, CLASS)?;
        let dbm = BabyDbm { tree: SpinRwLock::new(OrderedTree::new()), backing: opened.backing };
        if let Some(bytes) = opened.snapshot {
            let mut tree = dbm.tree.write();
            backing::load(&bytes, |key, value| tree.put(key, value, true).map(drop))?;
        }
        if opened.write_now {
            dbm.save()?;
        }
        Ok(dbm)
    }

    fn save(&self) -> Result<()> {
        self.backing.save("", |writer| {
            let tree = self.tree.read();
            tree.for_each(|record| writer.record(record.key(), record.value()))
        })
    }

    /// The key of the record `pick` finds in the tree, copied out.
    fn neighbour(&self, pick: impl FnOnce(&OrderedTree) -> Option<&RecordBytes>) -> Option<Vec<u8>> {
        let tree = self.tree.read();
        pick(&tree).map(|record| record.key().to_vec())
    }

    fn memory_usage(&self) -> u64 {
        self.tree.read().memory_bytes()
    }
}

impl Dbm for BabyDbm {
    fn process(&self, key: &[u8], processor: Processor<'_, '_>) -> Result<()> {
        self.backing.check_open()?;
        if !self.backing.is_writable() {
            let tree = self.tree.read();
            let current = tree.get(key).map(RecordBytes::value);
            return match processor(current) {
                Action::Keep => Ok(()),
                _ => Err(backing::read_only()),
            };
        }
        let mut tree = self.tree.write();
        let current = tree.get(key).map(RecordBytes::value);
        let existed = current.is_some();
        match processor(current) {
            Action::Keep => {}
            Action::Set(value) => {
                tree.put(key, &value, true)?;
            }
            Action::Remove => {
                if existed {
                    tree.remove(key);
                }
            }
        }
        Ok(())
    }

    fn get_with(&self, key: &[u8], visit: &mut dyn FnMut(Option<&[u8]>)) -> Result<()> {
        self.backing.check_open()?;
        let tree = self.tree.read();
        visit(tree.get(key).map(RecordBytes::value));
        Ok(())
    }

    /// The batched lookup of `btree/get_many.rs`, under the read lock one segment of keys at
    /// a time (`multi_get::SEGMENT`).
    fn get_many_with(&self, keys: &[&[u8]], visit: &mut dyn FnMut(usize, Option<&[u8]>)) -> Result<()> {
        self.backing.check_open()?;
        for (number, segment) in keys.chunks(SEGMENT).enumerate() {
            let tree = self.tree.read();
            tree.get_many(segment, |index, record| visit(number * SEGMENT + index, record.map(RecordBytes::value)));
        }
        Ok(())
    }

    fn set(&self, key: &[u8], value: &[u8], overwrite: bool) -> Result<()> {
        self.backing.check_writable()?;
        if self.tree.write().put(key, value, overwrite)? == Put::Kept {
            return Err(Error::new(ErrorKind::Duplicate, "a record exists for the key"));
        }
        Ok(())
    }

    fn remove(&self, key: &[u8]) -> Result<()> {
        self.backing.check_writable()?;
        match self.tree.write().remove(key) {
            Some(_) => Ok(()),
            None => Err(Error::not_found("no record for the key")),
        }
    }

    fn count(&self) -> Result<u64> {
        self.backing.check_open()?;
        Ok(self.tree.read().len() as u64)
    }

    fn cursor(&self) -> Result<Box<dyn Cursor + '_>> {
        self.backing.check_open()?;
        Ok(Box::new(BabyCursor { dbm: self, position: None }))
    }

    fn is_ordered(&self) -> bool {
        true
    }

    fn ordered_cursor(&self) -> Result<Box<dyn OrderedCursor + '_>> {
        self.backing.check_open()?;
        Ok(Box::new(BabyCursor { dbm: self, position: None }))
    }

    fn clear(&self) -> Result<()> {
        self.backing.check_writable()?;
        self.tree.write().clear();
        Ok(())
    }

    fn synchronize(&self, _hard: bool) -> Result<()> {
        self.backing.synchronize(|| self.save())
    }

    fn rebuild(&self, params: &Params) -> Result<()> {
        // The tree keeps its nodes at least a quarter full as it goes: nothing to compact.
        self.backing.check_writable()?;
        params.check_known("baby", Self::PARAMS)
    }

    fn should_be_rebuilt(&self) -> Result<bool> {
        self.backing.check_open()?;
        Ok(false)
    }

    fn file_size(&self) -> Result<u64> {
        self.backing.check_open()?;
        Ok(self.memory_usage())
    }

    fn inspect(&self) -> Result<Stats> {
        let count = self.count()?;
        Ok(self.backing.stats("BabyDbm", count, self.memory_usage(), []))
    }

    fn is_writable(&self) -> bool {
        self.backing.is_writable()
    }

    fn close(&self) -> Result<()> {
        self.backing.close(|| self.save())
    }
}

impl Drop for BabyDbm {
    fn drop(&mut self) {
        self.backing.save_if_open(|| self.save());
    }
}

/// A position in key order: the key it stands on (which may have been removed since; moves
/// are relative to it, so the cursor survives any concurrent update).
pub struct BabyCursor<'d> {
    dbm: &'d BabyDbm,
    position: Option<Vec<u8>>,
}

impl BabyCursor<'_> {
    fn land(&mut self, found: Option<Vec<u8>>) -> bool {
        self.position = found;
        self.position.is_some()
    }

    fn at(&self) -> Result<&[u8]> {
        self.position.as_deref().ok_or_else(|| Error::not_found("the cursor is at no record"))
    }
}

impl Cursor for BabyCursor<'_> {
    fn first(&mut self) -> Result<bool> {
        self.dbm.backing.check_open()?;
        let found = self.dbm.neighbour(OrderedTree::first);
        Ok(self.land(found))
    }

    fn jump(&mut self, key: &[u8]) -> Result<bool> {
        self.jump_upper(key, true)
    }

    fn next(&mut self) -> Result<bool> {
        self.dbm.backing.check_open()?;
        let Some(current) = self.position.take() else { return Ok(false) };
        let found = self.dbm.neighbour(|tree| tree.after(&current, false));
        Ok(self.land(found))
    }

    fn record(&mut self) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        self.dbm.backing.check_open()?;
        let Some(key) = self.position.as_deref() else { return Ok(None) };
        let tree = self.dbm.tree.read();
        Ok(tree.get(key).map(|r| (r.key().to_vec(), r.value().to_vec())))
    }

    fn key(&mut self) -> Result<Option<Vec<u8>>> {
        Ok(self.record()?.map(|(key, _)| key))
    }

    fn set(&mut self, value: &[u8]) -> Result<()> {
        self.dbm.backing.check_writable()?;
        let key = self.at()?;
        let mut tree = self.dbm.tree.write();
        let record = tree.get_mut(key).ok_or_else(|| Error::not_found("the record at the cursor is gone"))?;
        record.set_value(value)
    }

    fn remove(&mut self) -> Result<()> {
        self.dbm.backing.check_writable()?;
        let key = self.at()?;
        if self.dbm.tree.write().remove(key).is_none() {
            return Err(Error::not_found("the record at the cursor is gone"));
        }
        self.next()?;
        Ok(())
    }
}

impl OrderedCursor for BabyCursor<'_> {
    fn last(&mut self) -> Result<bool> {
        self.dbm.backing.check_open()?;
        let found = self.dbm.neighbour(OrderedTree::last);
        Ok(self.land(found))
    }

    fn previous(&mut self) -> Result<bool> {
        self.dbm.backing.check_open()?;
        let Some(current) = self.position.take() else { return Ok(false) };
        let found = self.dbm.neighbour(|tree| tree.before(&current, false));
        Ok(self.land(found))
    }

    fn jump_lower(&mut self, key: &[u8], inclusive: bool) -> Result<bool> {
        self.dbm.backing.check_open()?;
        let found = self.dbm.neighbour(|tree| tree.before(key, inclusive));
        Ok(self.land(found))
    }

    fn jump_upper(&mut self, key: &[u8], inclusive: bool) -> Result<bool> {
        self.dbm.backing.check_open()?;
        let found = self.dbm.neighbour(|tree| tree.after(key, inclusive));
        Ok(self.land(found))
    }
}
