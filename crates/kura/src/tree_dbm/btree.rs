//! The B+ tree over the pager: lookups, updates with copy-on-write, and commits.
//!
//! Pages of the committed tree are immutable. The first update of a page since the last
//! commit copies it into `dirty` under a temporary id (`TEMP_BIT` set), together with all its
//! ancestors, so that dirty pages always form a subtree hanging from the root: a clean page
//! never refers to a dirty one. A commit writes the dirty pages children first into free
//! slots, publishes a header with the new root, and only then frees the slots of the pages
//! they replaced. A crash at any point leaves the last published tree whole.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::dbm::{Action, Processor};
use crate::error::{Error, ErrorKind, Result};

use super::comparator::Comparator;
use super::dirty::DirtyPages;
use super::finger::Finger;
use super::format::MAX_HEIGHT;
use super::page::{Branch, Leaf, Page, MAX_RECORD_SIZE};
use super::pager::{Pager, Publish};
use super::slot_hint::SlotHint;

pub use super::dirty::TEMP_BIT;

pub struct BTree {
    pub pager: Pager,
    /// 0 for an empty tree; a file offset, or a dirty page id.
    pub(super) root: u64,
    /// Levels from the root to the leaves (0 when empty). Every leaf is at this depth.
    pub(super) height: u32,
    pub(super) count: u64,
    pub(super) dirty: DirtyPages,
    /// Slots of the committed tree replaced since the last commit: freed after the next one.
    pub(super) replaced: Vec<u64>,
    /// Commit when more pages than this are dirty (between batches).
    pub max_dirty_pages: usize,
    /// The branch path of the current update, kept to spare an allocation per update.
    path_buffer: Vec<(u64, usize)>,
    /// Bumped by every change of a page id or of a separator (see finger.rs).
    pub(super) structure: u64,
    pub(super) finger: Finger,
    /// The leaf of the last update and `structure` then.
    pub(super) last_leaf: Option<(u64, u64)>,
    /// How many leaves after the one an update descends to are read ahead (0: none): for
    /// updates in key order (a sorted batch spilling, store.rs) into a tree larger than
    /// memory, where each leaf would otherwise wait for the disk in turn.
    pub(super) leaves_read_ahead: usize,
    /// The branch of the last read-ahead and the highest child index asked for in it (atomics
    /// only because `find_leaf` takes `&self`; only the writer reads ahead).
    read_ahead_mark: (AtomicU64, AtomicU64),
}

/// A page borrowed (from the dirty set or the pins) or shared from the cache.
pub enum PageRef<'a> {
    Borrowed(&'a Arc<Page>),
    Clean(Arc<Page>),
}

impl std::ops::Deref for PageRef<'_> {
    type Target = Page;

    fn deref(&self) -> &Page {
        match self {
            PageRef::Borrowed(page) => page,
            PageRef::Clean(page) => page,
        }
    }
}

impl PageRef<'_> {
    pub fn into_arc(self) -> Arc<Page> {
        match self {
            PageRef::Borrowed(page) => Arc::clone(page),
            PageRef::Clean(page) => page,
        }
    }
}

pub fn wrong_level(id: u64) -> Error {
    Error::broken(format!("tree page {id} is not at the level its parent implies (a cycle or a bad height)"))
}

impl BTree {
    pub fn new(pager: Pager, max_dirty_pages: usize) -> BTree {
        let header = pager.header().clone();
        BTree {
            pager,
            root: header.root,
            height: header.height,
            count: header.count,
            dirty: DirtyPages::default(),
            replaced: Vec::new(),
            max_dirty_pages,
            path_buffer: Vec::new(),
            structure: 0,
            finger: Finger::default(),
            last_leaf: None,
            leaves_read_ahead: 0,
            read_ahead_mark: (AtomicU64::new(0), AtomicU64::new(0)),
        }
    }

    pub fn comparator(&self) -> Comparator {
        self.pager.comparator()
    }

    /// Called after an update that found `leaf` by the descent along `path` and changed no
    /// structure: when the update before used the same leaf, a run in key order has likely
    /// begun, so the finger is taken (reading the separators costs a descent's worth, and
    /// random updates rarely pay it).
    fn remember_leaf(&mut self, leaf: u64, path: &[(u64, usize)]) -> Result<()> {
        let repeated = self.last_leaf == Some((leaf, self.structure));
        self.last_leaf = Some((leaf, self.structure));
        if !repeated || self.finger.is_current(self.structure) {
            return Ok(());
        }
        let mut low = None;
        let mut high = None;
        for &(branch_id, index) in path {
            let page = self.page(branch_id)?;
            let Page::Branch(branch) = &*page else {
                return Ok(());
            };
            // Deeper separators are tighter: the last one met wins.
            if let Some(key) = index.checked_sub(1).and_then(|i| branch.keys.get(i)) {
                low = Some(key.clone());
            }
            if let Some(key) = branch.keys.get(index) {
                high = Some(key.clone());
            }
        }
        self.finger.take(self.structure, leaf, path, low, high);
        Ok(())
    }

    pub fn count(&self) -> u64 {
        self.count
    }

    pub fn height(&self) -> u32 {
        self.height
    }

    pub fn dirty_pages(&self) -> usize {
        self.dirty.len()
    }

    pub fn has_changes(&self) -> bool {
        self.root & TEMP_BIT != 0 || !self.replaced.is_empty() || self.count != self.pager.header().count
    }

    pub fn page(&self, id: u64) -> Result<PageRef<'_>> {
        self.page_hinted(id, SlotHint::UNKNOWN)
    }

    /// `page` of a child whose slot length its parent's `hint` tells (slot_hint.rs).
    pub fn page_hinted(&self, id: u64, hint: SlotHint) -> Result<PageRef<'_>> {
        if id & TEMP_BIT != 0 {
            self.dirty
                .get(id)
                .map(PageRef::Borrowed)
                .ok_or_else(|| Error::internal("a dirty page id names a page in the dirty set"))
        } else {
            match self.pager.pinned(id) {
                Some(page) => Ok(PageRef::Borrowed(page)),
                None => self.pager.read_page(id, hint).map(PageRef::Clean),
            }
        }
    }

    /// Runs `use_page` on page `id` without taking a reference to it: a dirty page from the
    /// dirty set, a clean one in place in the cache (`Pager::with_page`: `use_page` must not
    /// call into the tree).
    #[inline]
    pub fn with_page<R>(&self, id: u64, use_page: impl FnOnce(&Page) -> R) -> Result<R> {
        self.with_page_hinted(id, SlotHint::UNKNOWN, use_page)
    }

    /// `with_page` of a child whose slot length its parent's `hint` tells.
    #[inline]
    pub fn with_page_hinted<R>(&self, id: u64, hint: SlotHint, use_page: impl FnOnce(&Page) -> R) -> Result<R> {
        if id & TEMP_BIT != 0 {
            self.page(id).map(|page| use_page(&page))
        } else {
            self.pager.with_page(id, hint, use_page)
        }
    }

    /// Calls `found` with the value of `key` (None when absent). A clean page is used in
    /// place in the cache (see `Pager::with_page`): `found` must not call into the tree.
    pub fn get<R>(&self, key: &[u8], found: impl FnOnce(Option<&[u8]>) -> R) -> Result<R> {
        let comparator = self.comparator();
        let mut id = self.root;
        let mut hint = SlotHint::UNKNOWN;
        for _ in 1..self.height {
            let child = |page: &Page| match page {
                Page::Branch(branch) => branch.child_hinted(branch.child_index(comparator, key)),
                Page::Leaf(_) => None,
            };
            (id, hint) = self.with_page_hinted(id, hint, child)?.ok_or_else(|| wrong_level(id))?;
        }
        if self.height == 0 {
            return Ok(found(None));
        }
        if id & TEMP_BIT == 0 && self.pager.reads_leaf_uncached(id) {
            return self.pager.find_in_leaf_slot(id, hint, key, found)?.ok_or_else(|| wrong_level(id));
        }
        let in_leaf = |page: &Page| match page {
            Page::Leaf(leaf) => Ok(found(leaf.search(comparator, key).ok().and_then(|i| leaf.value(i)))),
            Page::Branch(_) => Err(wrong_level(id)),
        };
        self.with_page_hinted(id, hint, in_leaf)?
    }

    /// Descends to the leaf for `key`, returning the branch path `(id, child index)` and the
    /// leaf id with what its parent says of its slot's length.
    pub(super) fn find_leaf(&self, key: &[u8], path: &mut Vec<(u64, usize)>) -> Result<(u64, SlotHint)> {
        let comparator = self.comparator();
        let mut id = self.root;
        let mut hint = SlotHint::UNKNOWN;
        for _ in 1..self.height {
            let page = self.page_hinted(id, hint)?;
            let Page::Branch(branch) = &*page else {
                return Err(wrong_level(id));
            };
            let index = branch.child_index(comparator, key);
            path.push((id, index));
            if self.leaves_read_ahead > 0 && path.len() + 1 == self.height as usize {
                self.read_ahead_leaves(id, branch, index);
            }
            (id, hint) = branch.child_hinted(index).ok_or_else(|| wrong_level(id))?;
        }
        Ok((id, hint))
    }

    /// Reads ahead the `leaves_read_ahead` leaves after child `index` of the lowest branch
    /// `id`, but only those the previous descent into this branch did not ask for: the advice
    /// is a system call even for a page in memory, and asking for all of them at each descent
    /// made a load in memory 2.3 times slower.
    fn read_ahead_leaves(&self, id: u64, branch: &Branch, index: usize) {
        let (mark_branch, mark_index) = &self.read_ahead_mark;
        let asked = mark_index.load(Ordering::Relaxed) as usize;
        let from = if mark_branch.load(Ordering::Relaxed) == id && asked > index { asked + 1 } else { index + 1 };
        let until = index + self.leaves_read_ahead;
        for index in from..=until {
            let Some((leaf, hint)) = branch.child_hinted(index) else { break };
            if leaf & TEMP_BIT == 0 {
                self.pager.read_ahead(leaf, hint);
            }
        }
        mark_branch.store(id, Ordering::Relaxed);
        mark_index.store(until.max(from.saturating_sub(1)) as u64, Ordering::Relaxed);
    }

    /// Asks the disk at once for the leaves that `keys` land on (`Pager::read_ahead`), when
    /// the file does not fit the cache: a batch then waits for its leaves together rather than
    /// one after another as it applies each operation. 2M records under a 128 MiB memory
    /// limit: each of 1,000 random operations of a batch otherwise waited for its leaf's read
    /// in turn, and this disk serves 2,000 random reads asked for together six times faster
    /// than one by one. Advice only: a failing descent is left to the operation itself.
    pub fn read_ahead_leaves_of<'k>(&self, keys: impl Iterator<Item = &'k [u8]>) {
        if self.height < 2 || !self.pager.exceeds_memory() {
            return;
        }
        let comparator = self.comparator();
        let mut path = Vec::new();
        let mut previous = None;
        let mut run = None;
        // The lowest branch of the last descent and the child it took. Keys in order often
        // share a leaf: a key between that child's separators is in the leaf just asked for,
        // without a descent (three for each key were 6% of a load beyond memory).
        let mut last: Option<(PageRef<'_>, usize)> = None;
        for key in keys {
            if let Some((page, index)) = &last {
                if let Page::Branch(branch) = &**page {
                    if branch.encloses(comparator, *index, key) {
                        continue;
                    }
                }
            }
            path.clear();
            last = None;
            if let Ok((leaf, hint)) = self.find_leaf(key, &mut path) {
                if leaf & TEMP_BIT == 0 && previous != Some(leaf) {
                    self.pager.read_ahead_in_run(&mut run, leaf, hint);
                }
                previous = Some(leaf);
                last = path.last().and_then(|&(branch, index)| Some((self.page(branch).ok()?, index)));
            }
        }
        self.pager.end_read_ahead_run(&mut run);
    }

    /// Runs `processor` on the record of `key` and applies its decision.
    /// Returns whether the tree changed.
    pub fn process(&mut self, key: &[u8], processor: Processor<'_, '_>) -> Result<bool> {
        if self.root == 0 {
            if let Action::Set(value) = processor(None) {
                check_record_size(key, &value)?;
                let mut leaf = Leaf::new();
                leaf.insert(0, key, &value)?;
                self.root = self.new_dirty(Page::Leaf(leaf));
                self.height = 1;
                self.count = 1;
                return Ok(true);
            }
            return Ok(false);
        }
        let mut path = std::mem::take(&mut self.path_buffer);
        path.clear();
        let outcome = self.process_in_leaf(key, processor, &mut path);
        self.path_buffer = path;
        outcome
    }

    /// `process` on a non-empty tree; `path` is an empty buffer for the branch path.
    fn process_in_leaf(
        &mut self,
        key: &[u8],
        processor: Processor<'_, '_>,
        path: &mut Vec<(u64, usize)>,
    ) -> Result<bool> {
        let structure = self.structure;
        // (A leaf the finger knows was read for the update before: no hint needed.)
        let (leaf_id, hint) = match self.finger.leaf_for(self.structure, self.comparator(), key, path) {
            Some(leaf) => (leaf, SlotHint::UNKNOWN),
            None => self.find_leaf(key, path)?,
        };
        let changed = self.update_leaf(key, processor, path, (leaf_id, hint))?;
        // Unchanged structure: no page was copied, so `leaf_id` and `path` are still current
        // (unless a merge attempt shortened the path).
        if self.structure == structure && path.len() + 1 == self.height as usize {
            self.remember_leaf(leaf_id, path)?;
        }
        Ok(changed)
    }

    /// Applies `processor` to `key` in leaf `leaf_id` (whose slot length `hint` tells),
    /// reached along `path`.
    fn update_leaf(
        &mut self,
        key: &[u8],
        processor: Processor<'_, '_>,
        path: &mut Vec<(u64, usize)>,
        (leaf_id, hint): (u64, SlotHint),
    ) -> Result<bool> {
        let (position, action) = {
            let page = self.page_hinted(leaf_id, hint)?;
            let Page::Leaf(leaf) = &*page else {
                return Err(wrong_level(leaf_id));
            };
            let position = leaf.search(self.comparator(), key);
            (position, processor(position.ok().and_then(|i| leaf.value(i))))
        };
        let max = self.pager.max_page_size();
        match (action, position) {
            (Action::Keep, _) | (Action::Remove, Err(_)) => Ok(false),
            (Action::Set(value), position) => {
                check_record_size(key, &value)?;
                let leaf_id = self.make_path_dirty(path, leaf_id)?;
                let leaf = self.leaf_mut(leaf_id)?;
                let inserted = match position {
                    Ok(index) => {
                        leaf.set_value(index, &value)?;
                        None
                    }
                    Err(index) => {
                        leaf.insert(index, key, &value)?;
                        Some(index)
                    }
                };
                // (Checked here, where the leaf is at hand, to spare a lookup per update.)
                let oversized = leaf.encoded_size() > max && leaf.len() >= 2;
                if inserted.is_some() {
                    self.count += 1;
                }
                if oversized {
                    self.split_if_needed(path, leaf_id, inserted)?;
                }
                Ok(true)
            }
            (Action::Remove, Ok(index)) => {
                let leaf_id = self.make_path_dirty(path, leaf_id)?;
                let leaf = self.leaf_mut(leaf_id)?;
                leaf.remove(index);
                let underfull = leaf.encoded_size() < max / 4 || leaf.is_empty();
                self.count = self.count.saturating_sub(1);
                if underfull {
                    self.merge_if_needed(path, leaf_id)?;
                }
                Ok(true)
            }
        }
    }

    /// Page `id`, read as `page`, for keeping after the tree's lock is released (a seek's
    /// position): a leaf lending its values from the file's mapping is copied, as its slot
    /// may be reused once the lock is gone (`Pager::decode_page_lending`), and the copy takes
    /// its place in the cache, so that only the first seek to a leaf copies it.
    pub(super) fn kept(&self, id: u64, page: PageRef<'_>) -> Arc<Page> {
        if !page.is_lent() {
            return page.into_arc();
        }
        let copy = Arc::new(Page::clone(&page));
        self.pager.recache(id, Arc::clone(&copy));
        copy
    }

    pub(super) fn new_dirty(&mut self, page: Page) -> u64 {
        self.structure += 1;
        self.dirty.add(Arc::new(page))
    }

    /// Makes page `id` writable: a clean page is copied into the dirty set (its slot to be
    /// freed after the next commit). Returns the id to use from now on.
    pub(super) fn make_dirty(&mut self, id: u64) -> Result<u64> {
        if id & TEMP_BIT != 0 {
            return Ok(id);
        }
        let page = match self.pager.forget_replaced(id) {
            // A leaf lending its values from the slot about to be freed holds them itself
            // from now on (see `Pager::decode_page_lending`).
            Some(page) if page.is_lent() => Arc::new(Page::clone(&page)),
            Some(page) => page,
            None => Arc::new(self.pager.decode_page(id)?),
        };
        debug_assert!(!page.is_lent(), "invariant: no dirty page lends from a slot (a bug in Kura)");
        self.replaced.push(id);
        self.structure += 1;
        Ok(self.dirty.add(page))
    }

    /// Makes the path and the leaf writable, repointing each parent at its child's copy.
    fn make_path_dirty(&mut self, path: &mut [(u64, usize)], leaf_id: u64) -> Result<u64> {
        if leaf_id & TEMP_BIT != 0 {
            return Ok(leaf_id); // dirty pages' ancestors are dirty
        }
        let mut parent: Option<(u64, usize)> = None;
        for level in 0..=path.len() {
            let id = match path.get(level) {
                Some(&(id, _)) => id,
                None => leaf_id,
            };
            let copy = self.make_dirty(id)?;
            match parent {
                None => self.root = copy,
                Some((parent_id, index)) => self.set_child(parent_id, index, copy)?,
            }
            if let Some(entry) = path.get_mut(level) {
                entry.0 = copy;
                parent = Some(*entry);
            } else {
                return Ok(copy);
            }
        }
        Err(Error::broken("empty tree path"))
    }

    pub(super) fn page_mut(&mut self, id: u64) -> Result<&mut Page> {
        self.dirty
            .get_mut(id)
            .map(Arc::make_mut)
            .ok_or_else(|| Error::internal("a dirty page id names a page in the dirty set"))
    }

    pub(super) fn leaf_mut(&mut self, id: u64) -> Result<&mut Leaf> {
        match self.page_mut(id)? {
            Page::Leaf(leaf) => Ok(leaf),
            Page::Branch(_) => Err(wrong_level(id)),
        }
    }

    pub(super) fn branch_mut(&mut self, id: u64) -> Result<&mut Branch> {
        match self.page_mut(id)? {
            Page::Branch(branch) => Ok(branch),
            Page::Leaf(_) => Err(wrong_level(id)),
        }
    }

    /// Points child `index` of dirty branch `parent` at dirty page `child` (a page not yet
    /// written, so no hint).
    fn set_child(&mut self, parent: u64, index: usize, child: u64) -> Result<()> {
        if self.branch_mut(parent)?.set_child(index, child, SlotHint::UNKNOWN) {
            Ok(())
        } else {
            Err(wrong_level(parent))
        }
    }

    /// Whether enough is dirty that the caller should commit.
    pub fn wants_commit(&self) -> bool {
        self.dirty.len() > self.max_dirty_pages
    }

    /// Writes the dirty pages and publishes the new root. On failure the uncommitted changes
    /// are dropped and the tree is back at the last published state.
    pub fn commit(&mut self, hard: bool) -> Result<()> {
        if !self.has_changes() {
            if hard {
                if self.pager.is_durable() {
                    self.pager.sync(true)?;
                } else {
                    // Commits since the durable one were written without fsync.
                    self.pager.make_durable()?;
                }
            }
            return Ok(());
        }
        match self.write_and_publish(hard) {
            Ok(()) => Ok(()),
            Err(e) => {
                self.rollback();
                Err(e)
            }
        }
    }

    fn write_and_publish(&mut self, hard: bool) -> Result<()> {
        self.structure += 1;
        let root = if self.root & TEMP_BIT != 0 { self.write_dirty(self.root, 0)?.0 } else { self.root };
        let mut header = self.pager.header().clone();
        header.root = root;
        header.height = self.height;
        header.count = self.count;
        let replaced = std::mem::take(&mut self.replaced);
        let published = self.pager.publish(header, Publish::hard(hard), &replaced);
        self.replaced = replaced;
        published?;
        self.root = root;
        self.dirty.clear();
        self.replaced.clear();
        Ok(())
    }

    /// Writes dirty page `id` after its dirty children; returns its offset and the hint its
    /// parent stores with it.
    fn write_dirty(&mut self, id: u64, depth: u32) -> Result<(u64, SlotHint)> {
        if depth >= MAX_HEIGHT {
            return Err(Error::broken("dirty tree deeper than the format allows"));
        }
        let mut page =
            self.dirty.remove(id).ok_or_else(|| Error::internal("a dirty page id names a page in the dirty set"))?;
        if let Page::Branch(branch) = &*page {
            let dirty_children: Vec<(usize, u64)> =
                branch.children().iter().copied().enumerate().filter(|(_, c)| c & TEMP_BIT != 0).collect();
            for (index, child) in dirty_children {
                let (offset, hint) = self.write_dirty(child, depth + 1)?;
                if let Page::Branch(branch) = Arc::make_mut(&mut page) {
                    branch.set_child(index, offset, hint);
                }
            }
        }
        self.pager.write_page(page)
    }

    /// Drops every change since the last published commit.
    pub fn rollback(&mut self) {
        self.pager.abandon_unpublished();
        self.structure += 1;
        let header = self.pager.header().clone();
        self.root = header.root;
        self.height = header.height;
        self.count = header.count;
        self.dirty.clear();
        self.replaced.clear();
    }

    /// Empties the tree in memory only, publishing nothing: a reader replaying a journal's
    /// clear (its file stays as it is).
    pub fn empty_in_memory(&mut self) {
        self.dirty.clear();
        self.replaced.clear();
        self.structure += 1;
        self.root = 0;
        self.height = 0;
        self.count = 0;
    }

    /// Removes every record (published at once).
    pub fn clear(&mut self) -> Result<()> {
        self.dirty.clear();
        self.replaced.clear();
        self.pager.clear()?;
        self.rollback();
        Ok(())
    }
}

pub(super) fn check_record_size(key: &[u8], value: &[u8]) -> Result<()> {
    if key.len().saturating_add(value.len()) > MAX_RECORD_SIZE {
        return Err(Error::new(
            ErrorKind::Limit,
            format!("a record of {} bytes is over the limit of {MAX_RECORD_SIZE}", key.len() + value.len()),
        ));
    }
    Ok(())
}
