//! `Dbm::check` for TreeDbm: every page of the tree read from the file and verified.
//!
//! The walk goes down from the root in key order and reads each page of the committed tree
//! from the file, past the page cache (`Pager::decode_page`), so that a cached copy cannot
//! hide damage on the disk; pages modified since the last commit live in memory and are
//! taken from there. It checks each page's checksum and decoding, that each page sits at the
//! level its parent implies and is reached once, that keys ascend within each leaf and from
//! one leaf to the next under the tree's comparator, and that the leaves hold the count the
//! tree keeps. A damaged page is one problem; the walk skips what lies under it and goes on.
//! Each child's slot must also fit the hint its parent keeps of its length (slot_hint.rs): a
//! wrong hint loses nothing, but costs every read of the page a second one, and a writer never
//! writes one.
//!
//! Then the rest of the file: what the open found (a header copy that failed its check,
//! repaired or lost; a saved free-slot list that failed its check and was ignored; a file
//! cut short), the dictionary and the saved free-slot list read again from the file, every
//! free slot against the tree's pages (a page inside a free slot would be overwritten by the
//! next commit), and the former pages a free slot still holds from its start on: a slot
//! whose header reads whole there and whose bytes fail its checksum is damage too (a writer
//! writes every slot whole, so a sound file has none).

use std::cmp::Ordering;
use std::collections::HashSet;

use super::btree::{BTree, TEMP_BIT};
use super::format::MAX_HEIGHT;
use super::page::Page;
use super::slot_hint::SlotHint;
use super::TreeDbm;
use crate::check::{CheckReport, Place};
use crate::error::Result;

impl TreeDbm {
    /// The whole walk, under the tree's read lock so that no commit moves pages meanwhile.
    pub(crate) fn check_pages(&self) -> Result<CheckReport> {
        let tree = self.read()?;
        Ok(check_tree(&tree))
    }
}

/// The place of a page id: a file offset, or (a page modified since the last commit) none.
fn place(id: u64) -> Place {
    if id & TEMP_BIT == 0 {
        Place::Page(id)
    } else {
        Place::Database
    }
}

fn check_tree(tree: &BTree) -> CheckReport {
    let mut report = CheckReport::default();
    let path = tree.pager.path().display().to_string();
    let comparator = tree.comparator();
    let mut seen = HashSet::new();
    // The file's slots of the tree's committed pages, `(offset, slot length)`.
    let mut slots = Vec::new();
    let mut previous: Option<Vec<u8>> = None;
    let mut in_leaves = 0u64;
    // Children are pushed last first, so that leaves come off the stack in key order.
    let mut stack = Vec::new();
    if tree.height > 0 {
        stack.push((tree.root, 1u32, SlotHint::UNKNOWN));
    }
    let hint_unit = tree.pager.hint_unit();
    while let Some((id, level, hint)) = stack.pop() {
        if level > MAX_HEIGHT || !seen.insert(id) {
            report.add(place(id), "reached twice or too deep: the tree has a cycle");
            continue;
        }
        let page = if id & TEMP_BIT == 0 {
            tree.pager.decode_page(id).map(std::sync::Arc::new)
        } else {
            tree.page(id).map(super::btree::PageRef::into_arc)
        };
        let page = match page {
            Ok(page) => page,
            Err(e) => {
                let message = e.message();
                let message = message.strip_prefix(&format!("{path}: ")).unwrap_or(message);
                let message =
                    message.strip_prefix(&format!("tree page at offset {id}: ")).unwrap_or(message).to_string();
                report.add(place(id), message);
                continue;
            }
        };
        report.pages += 1;
        if let Some(slot) = (id & TEMP_BIT == 0).then(|| tree.pager.slot_header(id).ok()).flatten() {
            slots.push((id, slot.slot_len));
            let content = slot.content_len();
            if let Some(hinted) = hint_unit.and_then(|unit| unit.read_len(hint)).filter(|&len| len < content) {
                report.add(
                    place(id),
                    format!(
                        "its parent's hint says its slot holds at most {hinted} bytes, it holds {content}: \
                         the branch or the slot is damaged, or this is a bug in Kura (no writer leaves such a hint)"
                    ),
                );
            }
        }
        match (&*page, level == tree.height) {
            (Page::Leaf(leaf), true) => {
                for index in 0..leaf.len() {
                    let Some(key) = leaf.key(index) else { break };
                    if let Some(before) = &previous {
                        if comparator.compare(before, key) != Ordering::Less {
                            report.add(place(id), format!("key {index} is not above the key before it"));
                        }
                    }
                    previous = Some(key.to_vec());
                    in_leaves += 1;
                }
            }
            (Page::Branch(branch), false) => {
                let children = (0..branch.len()).rev().filter_map(|index| branch.child_hinted(index));
                stack.extend(children.map(|(child, hint)| (child, level + 1, hint)));
            }
            _ => report.add(place(id), format!("at level {level} of {}: the wrong kind of page", tree.height)),
        }
    }
    report.records = in_leaves;
    let counted = tree.count();
    if in_leaves != counted && report.is_clean() {
        report.add(Place::Database, format!("the tree counts {counted} records, its leaves hold {in_leaves}"));
    }
    check_rest_of_file(tree, &slots, &mut report);
    report
}

/// What lies outside the tree's pages (see the module comment).
fn check_rest_of_file(tree: &BTree, pages: &[(u64, u64)], report: &mut CheckReport) {
    let pager = &tree.pager;
    for found in pager.found() {
        report.add(Place::Database, found.clone());
    }
    let header = pager.header();
    if header.dictionary != 0 {
        if let Err(e) = pager.read_blob(header.dictionary) {
            report.add(Place::Page(header.dictionary), format!("the dictionary: {}", e.message()));
        }
    }
    if header.closed_cleanly && header.free_list != 0 {
        let list = pager.read_blob(header.free_list).and_then(|b| super::space::Space::decode(&b, header.free_list));
        if let Err(e) = list {
            report.add(Place::Page(header.free_list), format!("the saved free-slot list: {}", e.message()));
        }
    }
    let space = pager.space();
    for &(offset, len) in pages {
        if space.overlaps(offset, len) {
            report.add(Place::Page(offset), "lies in a free slot: the next commit may overwrite it");
        }
    }
}
