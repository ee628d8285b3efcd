//! Checking, at an open after a crash, that a header written without fsync is whole.
//!
//! A header written since the durable commit (durable.rs) carries the digest and the number
//! of the pages of its tree that were written since. The pages it shares with the durable
//! tree lie in slots not rewritten since (they are held back when freed), so they are as the
//! durable commit left them; the others must all have reached the disk. The check walks the
//! durable tree's branches (to know its slots), then the new tree: every page outside the
//! durable tree must pass its checksum and decode at its level, and the sum of their digest
//! terms and their number must be the header's. A page lost in a power loss leaves other
//! bytes or an older page at its offset, whose term differs.
//!
//! Only an open of a file not closed cleanly, whose current header was written without
//! fsync, runs it: it reads the branches of both trees and every page written since the
//! durable commit. A clean open reads no page.

use std::collections::HashSet;

use super::durable::digest_term;
use super::format::{FileHeader, SlotHeader, MAX_HEIGHT};
use super::page::Page;
use crate::error::{Error, Result};

/// What the check reads of a file: its current header and its pages. The pager implements
/// it; the check stays apart from the pager that runs it while opening.
pub trait PageSource {
    /// The header being checked.
    fn header(&self) -> &FileHeader;
    /// The slot header (kind, length, checksum) of the page at `offset`.
    fn slot_header(&self, offset: u64) -> Result<SlotHeader>;
    /// The page at `offset`, decoded and its checksum verified, read past any cache.
    fn decode_page(&self, offset: u64) -> Result<Page>;
    /// The blob (a saved free list, the dictionary) at `offset`, its checksum verified.
    fn read_blob(&self, offset: u64) -> Result<Vec<u8>>;
}

/// Checks the tree of the pager's current header against the durable header `base` in the
/// other copy; an error says what is missing.
pub fn new_pages_are_whole(pager: &impl PageSource, base: &FileHeader) -> Result<()> {
    let newest = pager.header();
    let since = newest.since_base.ok_or_else(|| Error::broken("the tree header has no digest to check"))?;
    if newest.dictionary != base.dictionary || newest.codec != base.codec || newest.comparator != base.comparator {
        return Err(Error::broken("the tree header and its durable base disagree on the codec"));
    }
    // A file keeps its format version until a rebuild or a restore writes a new file, so the
    // two copies of one file never differ in it (a version 1 branch has no slot hints).
    if newest.version != base.version {
        return Err(Error::broken(format!(
            "the tree header (format version {}) and its durable base (version {}) disagree on the format",
            newest.version, base.version
        )));
    }
    let durable = durable_pages(pager, base)?;
    let mut seen = HashSet::new();
    let mut digest = 0u64;
    let mut new_pages = 0u64;
    let mut stack = Vec::new();
    if newest.root != 0 {
        stack.push((newest.root, 1u32));
    }
    while let Some((offset, level)) = stack.pop() {
        if level > MAX_HEIGHT {
            return Err(Error::broken(format!("tree page at offset {offset} lies deeper than {MAX_HEIGHT} levels")));
        }
        if !seen.insert(offset) {
            return Err(Error::broken(format!("tree page at offset {offset} is referenced twice")));
        }
        let known = durable.contains(&offset);
        if !known {
            let slot = pager.slot_header(offset)?;
            digest = digest.wrapping_add(digest_term(offset, slot.checksum));
            new_pages += 1;
        }
        let leaf_level = level == newest.height;
        if leaf_level && known {
            continue;
        }
        match (pager.decode_page(offset)?, leaf_level) {
            (Page::Leaf(_), true) => {}
            (Page::Branch(branch), false) => stack.extend(branch.children().iter().map(|&child| (child, level + 1))),
            _ => return Err(Error::broken(format!("tree page at offset {offset} is at the wrong level"))),
        }
    }
    if digest != since.digest || new_pages != since.new_pages {
        return Err(Error::broken(format!(
            "the last tree header names {} pages written since the durable commit; {new_pages} found, digest {}",
            since.new_pages,
            if digest == since.digest { "equal" } else { "different" }
        )));
    }
    Ok(())
}

/// The slots of the tree of `base` (the durable header): its branches are read, its leaves not.
fn durable_pages(pager: &impl PageSource, base: &FileHeader) -> Result<HashSet<u64>> {
    let mut pages = HashSet::new();
    let mut stack = Vec::new();
    if base.root != 0 {
        stack.push((base.root, 1u32));
    }
    while let Some((offset, level)) = stack.pop() {
        if level > MAX_HEIGHT {
            return Err(Error::broken(format!(
                "durable tree page at offset {offset} lies deeper than {MAX_HEIGHT} levels"
            )));
        }
        if !pages.insert(offset) {
            return Err(Error::broken(format!("durable tree page at offset {offset} is referenced twice")));
        }
        if level < base.height {
            match pager.decode_page(offset)? {
                Page::Branch(branch) => stack.extend(branch.children().iter().map(|&child| (child, level + 1))),
                Page::Leaf(_) => return Err(Error::broken(format!("durable tree page at offset {offset} is a leaf"))),
            }
        }
    }
    Ok(pages)
}
