//! Rebuilding: writing all records, in key order, into a new file of densely packed pages,
//! possibly with another codec (a zstd dictionary trained on the records) or page size, then
//! atomically replacing the old file.
//!
//! The bulk loader fills each leaf up to `max_page_size` and builds the branch levels
//! bottom-up as leaves are written, so it needs memory for one page per level only.

use std::path::Path;
use std::sync::Arc;

use super::btree::BTree;
use super::comparator::Comparator;
use super::options::TreeOptions;
use super::page::{Branch, Leaf, Page};
use super::pager::Pager;
use super::seek::Seek;
use super::slot_hint::SlotHint;
use crate::error::{Error, Result};
use crate::file::{remove_if_exists, replace_file, sibling_path};

/// Writes sorted records into a fresh pager as a packed tree.
pub struct BulkLoader {
    pager: Pager,
    comparator: Comparator,
    max_page_size: usize,
    leaf: Leaf,
    /// One open branch per level above the leaves, with its first key and how many branches
    /// of that level were already written.
    levels: Vec<OpenBranch>,
    count: u64,
    last_key: Option<Vec<u8>>,
}

struct OpenBranch {
    branch: Option<(Vec<u8>, Branch)>,
    written: u64,
}

impl BulkLoader {
    pub fn new(pager: Pager) -> BulkLoader {
        let comparator = pager.comparator();
        let max_page_size = pager.max_page_size();
        BulkLoader { pager, comparator, max_page_size, leaf: Leaf::new(), levels: Vec::new(), count: 0, last_key: None }
    }

    /// Adds a record; keys must come in strictly ascending order.
    pub fn add(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        if let Some(last) = &self.last_key {
            if self.comparator.compare(last, key) != std::cmp::Ordering::Less {
                return Err(Error::invalid("bulk load: keys out of order"));
            }
        }
        let record_size = key.len() + value.len() + 3;
        if !self.leaf.is_empty() && self.leaf.encoded_size() + record_size > self.max_page_size {
            self.flush_leaf()?;
        }
        let index = self.leaf.len();
        self.leaf.insert(index, key, value)?;
        self.last_key = Some(key.to_vec());
        self.count += 1;
        Ok(())
    }

    fn flush_leaf(&mut self) -> Result<()> {
        let leaf = std::mem::take(&mut self.leaf);
        let first_key = leaf.key(0).unwrap_or_default().to_vec();
        let written = self.pager.write_page(Arc::new(Page::Leaf(leaf)))?;
        self.push_child(0, first_key, written)
    }

    /// Adds a written page (its offset and hint) to the open branch of `level`, writing that
    /// branch first if full.
    fn push_child(&mut self, level: usize, first_key: Vec<u8>, (offset, hint): (u64, SlotHint)) -> Result<()> {
        if self.levels.len() <= level {
            self.levels.push(OpenBranch { branch: None, written: 0 });
        }
        let max = self.max_page_size;
        let open =
            self.levels.get_mut(level).ok_or_else(|| Error::internal("a bulk load writes only to levels it opened"))?;
        let full = match &open.branch {
            Some((_, branch)) => branch.len() >= 2 && branch.encoded_size() + first_key.len() + 8 > max,
            None => false,
        };
        if full {
            if let Some((branch_key, branch)) = open.branch.take() {
                open.written += 1;
                let written = self.pager.write_page(Arc::new(Page::Branch(branch)))?;
                self.push_child(level + 1, branch_key, written)?;
            }
        }
        let open =
            self.levels.get_mut(level).ok_or_else(|| Error::internal("a bulk load writes only to levels it opened"))?;
        match &mut open.branch {
            None => open.branch = Some((first_key, Branch::with_first(offset, hint))),
            Some((_, branch)) => {
                let last = branch.len() - 1;
                branch.insert_hinted_after(last, first_key, offset, hint);
            }
        }
        Ok(())
    }

    /// Writes what remains and publishes the tree; returns the pager.
    pub fn finish(mut self, hard: bool) -> Result<Pager> {
        let mut root = 0;
        let mut height = 0;
        if !self.leaf.is_empty() {
            self.flush_leaf()?;
        }
        let mut level = 0;
        while level < self.levels.len() {
            let top = level + 1 == self.levels.len();
            let open = self
                .levels
                .get_mut(level)
                .ok_or_else(|| Error::internal("a bulk load writes only to levels it opened"))?;
            let written = open.written;
            if let Some((first_key, branch)) = open.branch.take() {
                if top && written == 0 {
                    // The last open branch of the top level is the root, unless it has a single
                    // child, which then is.
                    if branch.len() == 1 {
                        root = branch.child(0).unwrap_or(0);
                        height = level + 1;
                    } else {
                        root = self.pager.write_page(Arc::new(Page::Branch(branch)))?.0;
                        height = level + 2;
                    }
                    break;
                }
                let written = self.pager.write_page(Arc::new(Page::Branch(branch)))?;
                if let Some(open) = self.levels.get_mut(level) {
                    open.written += 1;
                }
                self.push_child(level + 1, first_key, written)?;
            }
            level += 1;
        }
        let mut header = self.pager.header().clone();
        header.root = root;
        header.height = u32::try_from(height).map_err(|_| Error::broken("bulk load height"))?;
        header.count = self.count;
        self.pager.publish(header, super::pager::Publish::hard(hard), &[])?;
        Ok(self.pager)
    }
}

/// Calls `each` on every record of `tree` in key order, leaf by leaf.
pub fn for_each_record(tree: &BTree, mut each: impl FnMut(&[u8], &[u8]) -> Result<()>) -> Result<()> {
    let mut position = tree.seek(Seek::First)?;
    while let Some(found) = position {
        let Page::Leaf(leaf) = &*found.leaf else {
            return Err(Error::broken("a cursor stopped on a branch"));
        };
        for index in found.index..leaf.len() {
            if let Some((key, value)) = leaf.record(index) {
                each(key, value)?;
            }
        }
        let Some(last) = leaf.key(leaf.len().saturating_sub(1)) else {
            break;
        };
        position = tree.seek(Seek::Above(last))?;
    }
    Ok(())
}

/// Rebuilds the open tree into a new file and swaps it in.
pub fn rebuild(tree: &mut BTree, path: &Path, options: &TreeOptions, dictionary_size: usize) -> Result<()> {
    tree.commit(false)?;
    let header = tree.pager.header().clone();
    let mut pager_options = options.pager_options();
    pager_options.codec = if options.codec_given { options.codec } else { tree.pager.codec().kind() };
    pager_options.comparator = header.comparator;
    if options.comparator_given && options.comparator != header.comparator {
        return Err(Error::invalid("rebuild cannot change the key comparator"));
    }
    if !options.max_page_size_given {
        pager_options.max_page_size = header.max_page_size;
    }
    pager_options.cache_bytes =
        if !options.cache_bytes_given { options::cache_budget_of(tree) } else { options.clean_cache_bytes() };
    if pager_options.codec.uses_dictionary() {
        let size = if options.dictionary_size == crate::codec::DEFAULT_DICTIONARY_SIZE {
            dictionary_size
        } else {
            options.dictionary_size
        };
        let mut training = crate::codec::DictionaryTraining::new(size);
        let mut sample = Vec::new();
        for_each_record(tree, |key, value| {
            // Pages hold runs of records: train on record-sized pieces of key and value.
            sample.clear();
            sample.extend_from_slice(key);
            sample.extend_from_slice(value);
            training.add(&sample);
            Ok(())
        })?;
        pager_options.dictionary = training.train()?;
    }
    let temporary = sibling_path(path, ".rebuild");
    let built = (|| {
        let pager = Pager::create(&temporary, &pager_options)?;
        let mut loader = BulkLoader::new(pager);
        for_each_record(tree, |key, value| loader.add(key, value))?;
        let mut pager = loader.finish(true)?;
        pager.mark_open()?;
        replace_file(&temporary, path)?;
        pager.set_path(path);
        Ok(pager)
    })();
    let pager = match built {
        Ok(pager) => pager,
        Err(e) => {
            let _ = remove_if_exists(&temporary);
            return Err(e);
        }
    };
    let max_dirty_pages = tree.max_dirty_pages;
    *tree = BTree::new(pager, max_dirty_pages);
    Ok(())
}

mod options {
    use super::BTree;

    /// The cache budget a rebuilt tree keeps: the same as before.
    pub fn cache_budget_of(tree: &BTree) -> usize {
        tree.pager.cache().budget()
    }
}
