//! After a crash: finding the free space again, and salvaging records from damaged files.
//!
//! Shadow paging keeps the committed tree whole across a crash of the process; only the list
//! of free slots (saved at close) is lost. `recover_space` walks the tree to find the slots in
//! use, and every gap between them is free. The walk checks the structure as it goes: a page
//! met twice (a cycle or a shared child), a page at the wrong level, a tree deeper than the
//! header says, are BrokenData.
//!
//! When the tree itself is damaged (a write lost by the device, a file truncated or edited),
//! `salvage` walks it tolerantly, skipping pages that fail their checks, and copies every
//! readable record into a new file.

use std::collections::HashSet;
use std::path::Path;

use super::btree::BTree;
use super::format::{SlotKind, MAX_HEIGHT};
use super::options::TreeOptions;
use super::page::Page;
use super::pager::{Pager, PagerOptions};
use super::slot_hint::SlotHint;
use super::space::Space;
use crate::dbm::Action;
use crate::error::{Error, Result};
use crate::file::{remove_if_exists, replace_file, sibling_path};

/// Modified pages between commits while salvaging.
const SALVAGE_DIRTY_PAGES: usize = 4096;

/// The free space of a tree file whose saved free list was lost.
pub fn recover_space(pager: &Pager) -> Result<Space> {
    let header = pager.header();
    let mut used = Vec::new();
    let mut seen = HashSet::new();
    if header.dictionary != 0 {
        let slot = pager.slot_header(header.dictionary)?;
        if slot.kind != SlotKind::Blob {
            return Err(Error::broken("the dictionary slot holds a page"));
        }
        used.push((header.dictionary, slot.slot_len));
        seen.insert(header.dictionary);
    }
    let mut stack = Vec::new();
    if header.root != 0 {
        stack.push((header.root, 1u32, SlotHint::UNKNOWN));
    }
    while let Some((offset, level, hint)) = stack.pop() {
        if !seen.insert(offset) {
            return Err(Error::broken(format!("tree page at offset {offset} is referenced twice")));
        }
        let slot = pager.slot_header(offset)?;
        used.push((offset, slot.slot_len));
        let leaf_level = level == header.height;
        match (slot.kind, leaf_level) {
            (SlotKind::Leaf, true) => {}
            // A branch is read as long as its parent's hint says, as the read ahead asked.
            (SlotKind::Branch, false) if level < MAX_HEIGHT => match pager.decode_page_sized(offset, hint)?.0 {
                Page::Branch(branch) => {
                    // In a file larger than memory each child's header is a read from the
                    // disk: ask for all of a branch's children at once, so the disk serves
                    // them together rather than one wait after another (a leaf's header is
                    // all the walk reads of it, a branch is decoded whole).
                    let children_are_leaves = level + 1 == header.height;
                    for index in 0..branch.len() {
                        if let Some((child, hint)) = branch.child_hinted(index) {
                            pager.read_ahead_for_walk(child, hint, children_are_leaves);
                            stack.push((child, level + 1, hint));
                        }
                    }
                }
                Page::Leaf(_) => return Err(Error::broken("a branch slot decoded as a leaf")),
            },
            _ => return Err(Error::broken(format!("tree page at offset {offset} is at the wrong level"))),
        }
    }
    Space::from_used(used)
}

/// What a salvage walk met.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Walked {
    /// Pages under the root that failed their checks (their records, and for a branch the
    /// pages under it, are not reached through it).
    pub skipped: u64,
    /// Leaves of the tree that the scan of every slot found outside the walk (under a damaged
    /// branch), whose records were copied.
    pub scanned_leaves: u64,
    /// Whether the scan could not run: after damage, a file without an intact free list
    /// (not closed cleanly, its list damaged, or cut away with the end of the file) cannot
    /// tell the current tree's unreachable leaves from stale ones, so none is taken.
    pub scan_refused: bool,
    /// Records of a tree that may be older than the file's newest (its newest header copy
    /// lost, `Pager::maybe_stale`), read and dropped: none of them was copied.
    pub stale_records: u64,
}

/// Calls `each` on every readable record under the root of `pager`, skipping damaged pages;
/// then, when pages were skipped, on the records of every leaf of the current tree that
/// the walk did not reach (`scan_leaves`), which `each` adds only where no reached leaf gave
/// the key.
/// A tree that may be older than the file's newest gives nothing: its records are counted
/// and dropped, never an old value over a newer one.
pub fn salvage(pager: &Pager, mut each: impl FnMut(&[u8], &[u8]) -> Result<()>) -> Result<Walked> {
    let mut reached = HashSet::new();
    if pager.maybe_stale() {
        let mut stale_records = 0;
        let skipped = walk(pager, &mut reached, &mut |_, _| {
            stale_records += 1;
            Ok(())
        })?;
        return Ok(Walked { skipped, stale_records, ..Walked::default() });
    }
    let skipped = walk(pager, &mut reached, &mut each)?;
    let mut walked = Walked { skipped, ..Walked::default() };
    if skipped > 0 {
        match scan_leaves(pager, &reached, &mut each)? {
            Some(leaves) => walked.scanned_leaves = leaves,
            None => walked.scan_refused = true,
        }
    }
    Ok(walked)
}

/// The leaves of the current tree outside `reached`, found by reading every slot position
/// (slots are 16-byte aligned, and a slot's checksum binds it to its offset, so bytes inside
/// a page do not pass for one): a leaf slot whose checksum holds is one of the current tree
/// unless it lies in a free slot of the file's saved free list. Old versions of pages (copy
/// on write frees a page's slot at every commit that rewrites it) stay in free slots until
/// reused, and the slot format carries no commit number: without the free list (a file not
/// closed cleanly, or its list damaged) a stale leaf cannot be told from a current one, so
/// none is taken (None), never an old value over a newer one.
fn scan_leaves(
    pager: &Pager,
    reached: &HashSet<u64>,
    each: &mut impl FnMut(&[u8], &[u8]) -> Result<()>,
) -> Result<Option<u64>> {
    let header = pager.header();
    if !header.closed_cleanly {
        return Ok(None);
    }
    let free = pager.space();
    let mut leaves = 0;
    let mut offset = super::format::DATA_START;
    while offset < header.end {
        let step = super::format::SLOT_ALIGN;
        if reached.contains(&offset)
            || free.is_free(offset)
            || offset == header.free_list
            || offset == header.dictionary
        {
            offset += step;
            continue;
        }
        let is_leaf = pager.slot_header(offset).is_ok_and(|slot| slot.kind == SlotKind::Leaf);
        if is_leaf {
            if let Ok(Page::Leaf(leaf)) = pager.decode_page(offset) {
                leaves += 1;
                for index in 0..leaf.len() {
                    if let Some((key, value)) = leaf.record(index) {
                        each(key, value)?;
                    }
                }
            }
        }
        offset += step;
    }
    Ok(Some(leaves))
}

/// The tolerant walk from the root: every record of every page that passes its checks, the
/// offsets of those pages in `reached`; returns how many pages were skipped.
fn walk(pager: &Pager, reached: &mut HashSet<u64>, each: &mut impl FnMut(&[u8], &[u8]) -> Result<()>) -> Result<u64> {
    let header = pager.header();
    let mut skipped = 0;
    let mut seen = HashSet::new();
    let mut stack = Vec::new();
    if header.root != 0 {
        stack.push((header.root, 1u32));
    }
    while let Some((offset, level)) = stack.pop() {
        if level > MAX_HEIGHT || !seen.insert(offset) {
            skipped += 1;
            continue;
        }
        let page = pager.decode_page(offset);
        if page.is_ok() {
            reached.insert(offset);
        }
        match page {
            Ok(Page::Leaf(leaf)) => {
                for index in 0..leaf.len() {
                    if let Some((key, value)) = leaf.record(index) {
                        each(key, value)?;
                    }
                }
            }
            // Children are pushed last-first so that leaves come out in key order.
            Ok(Page::Branch(branch)) => stack.extend(branch.children().iter().rev().map(|&c| (c, level + 1))),
            Err(_) => skipped += 1,
        }
    }
    Ok(skipped)
}

/// Copies the readable records of `source` into a new file at `dest` with the same settings.
/// Returns the records copied and the damaged pages skipped.
pub fn restore_to(source: &Pager, dest: &Path) -> Result<(u64, Walked)> {
    let header = source.header();
    let options = PagerOptions {
        codec: header.codec,
        dictionary: source.codec().dictionary().to_vec(),
        comparator: header.comparator,
        max_page_size: header.max_page_size,
        cache_bytes: source.cache().budget(),
        memory_bytes: Some(source.memory_bytes()),
        max_file_size: super::options::DEFAULT_MAX_FILE_SIZE,
    };
    let mut tree = BTree::new(Pager::create(dest, &options)?, SALVAGE_DIRTY_PAGES);
    let skipped = fill(&mut tree, source)?;
    let count = tree.count();
    tree.pager.close(true)?;
    Ok((count, skipped))
}

/// Copies the readable records; a key met twice keeps the value met first (the walk's
/// before the scan's). Returns what the walk met.
fn fill(tree: &mut BTree, source: &Pager) -> Result<Walked> {
    let skipped = salvage(source, |key, value| {
        tree.process(key, &mut |existing| match existing {
            Some(_) => Action::Keep,
            None => Action::Set(std::borrow::Cow::Borrowed(value)),
        })?;
        if tree.wants_commit() {
            tree.commit(false)?;
        }
        Ok(())
    })?;
    tree.commit(true)?;
    Ok(skipped)
}

/// Replaces the damaged file of `pager` by a salvaged copy; returns the pager of the copy.
pub fn restore_in_place(pager: Pager, options: &TreeOptions) -> Result<Pager> {
    let path = pager.path().to_path_buf();
    let temporary = sibling_path(&path, ".restore");
    let header = pager.header().clone();
    let pager_options = PagerOptions {
        codec: header.codec,
        dictionary: pager.codec().dictionary().to_vec(),
        comparator: header.comparator,
        max_page_size: header.max_page_size,
        cache_bytes: options.clean_cache_bytes(),
        memory_bytes: options.memory_bytes,
        max_file_size: options.max_file_size,
    };
    let restored = (|| {
        let mut tree = BTree::new(Pager::create(&temporary, &pager_options)?, SALVAGE_DIRTY_PAGES);
        fill(&mut tree, &pager)?;
        replace_file(&temporary, &path)?;
        let mut fresh = tree.pager;
        fresh.set_path(&path);
        Ok(fresh)
    })();
    if restored.is_err() {
        let _ = remove_if_exists(&temporary);
    }
    restored
}
