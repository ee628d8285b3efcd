//! Which of a tree file's two header copies an open takes when one fails its check (issue 43).
//!
//! The copies are not alike: a commit writes one and leaves the other holding the durable
//! commit before it, so the other copy's tree may be older, its pages intact where they were
//! not reused (the durable tree's slots are held back until the next durable commit). Taking
//! it in place of a damaged newest copy would bring older values back. So a copy that fails
//! its check is first given back its one damaged byte, located by the header checksum
//! (`encoding::repair_one_byte`, shared with HashDbm): every single-byte damage of a copy
//! then costs nothing. A copy damaged beyond one byte is `lost`, and the intact one is used
//! only where it is proven to hold the file's newest tree (`lone_copy_is_current`):
//!
//! - it was written by a clean close, its saved free list is intact and the file ends where
//!   it says (a writer that opened the file since wrote the other copy first and would have
//!   left its journal beside the file until its own close, which rewrites both copies);
//! - or it is the durable commit a clean close was made of: the close saved its free list as
//!   the file's last slot, after every page of that tree, and the clean header went to the
//!   other copy, with the same tree (a close publishes the tree it saves first; had the
//!   close published another, its clean header would have overwritten this copy); a free
//!   list ends the file, and no journal lies beside the file.
//!
//! Otherwise a normal open refuses the file (BrokenData, with `kura restore`), and a salvage
//! drops the intact copy's records and says why: none of them can be proven current.

use std::path::Path;

use super::format::{FileHeader, SlotKind, CHECKSUM_FIELD, DATA_START, HEADER_SIZE, SLOT_ALIGN, SLOT_HEADER_SIZE};
use super::space::Space;
use super::verify::PageSource;
use crate::encoding::repair_one_byte;
use crate::error::Result;

/// A copy that failed its check and had one damaged byte put back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepairedCopy {
    /// Where the copy lies (0 or 128).
    pub at: u64,
    /// The damaged byte's offset within the copy.
    pub byte: usize,
    /// The copy as it was written, for a writer's open to put back.
    pub bytes: [u8; HEADER_SIZE],
}

/// Both copies as read, and what was done about a damaged one.
#[derive(Debug, Clone)]
pub struct Copies {
    /// The valid (or repaired) copy with the larger sequence number.
    pub newest: FileHeader,
    /// The other copy, when valid (or repaired).
    pub other: Option<FileHeader>,
    /// Copies given back one damaged byte.
    pub repaired: Vec<RepairedCopy>,
    /// A copy damaged beyond one byte: where it lies and why it failed.
    pub lost: Option<(u64, String)>,
}

impl Copies {
    /// One sentence per damaged copy, for `kura check`'s problems and a restore's report.
    pub fn describe(&self) -> Vec<String> {
        let mut notes: Vec<String> = self
            .repaired
            .iter()
            .map(|r| {
                format!(
                    "header copy at {}: failed its check; byte {} was damaged and is put back (located by the header \
                     checksum)",
                    r.at, r.byte
                )
            })
            .collect();
        if let Some((at, why)) = &self.lost {
            notes.push(format!("header copy at {at}: damaged beyond one byte ({why})"));
        }
        notes
    }
}

/// Reads both copies from the first 256 bytes of a file, putting back one damaged byte of
/// a copy that fails its check. Fails only when neither copy is valid or repairable.
pub fn read_copies(head: &[u8]) -> Result<Copies> {
    let mut valid = Vec::new();
    let mut repaired = Vec::new();
    let mut lost = None;
    let mut first_error = None;
    for at in [0, HEADER_SIZE] {
        let bytes = head.get(at..).unwrap_or_default();
        match FileHeader::decode(bytes) {
            Ok(header) => valid.push(header),
            Err(e) => {
                match repair_one_byte(bytes, CHECKSUM_FIELD, |b: &[u8; HEADER_SIZE]| FileHeader::decode(b).ok()) {
                    Some(fixed) => {
                        valid.push(fixed.value);
                        repaired.push(RepairedCopy { at: at as u64, byte: fixed.byte, bytes: fixed.bytes });
                    }
                    None => {
                        lost = Some((at as u64, e.message().to_string()));
                        first_error.get_or_insert(e);
                    }
                }
            }
        }
    }
    valid.sort_by_key(|header| std::cmp::Reverse(header.sequence));
    let mut valid = valid.into_iter();
    match (valid.next(), first_error) {
        (Some(newest), _) => Ok(Copies { newest, other: valid.next(), repaired, lost }),
        (None, Some(e)) => Err(e),
        (None, None) => Err(crate::error::Error::broken("tree file header: no copy")),
    }
}

/// How far back from the end of a file the free list a close saved is looked for.
const MAX_FREE_LIST_SCAN: u64 = 16 << 20;

/// Whether the current header of `pager` (the only intact copy) is proven to hold the file's
/// newest tree (see the module comment): `Ok(None)`, or `Ok(Some(end))` when its tree is the
/// one a clean close saved and the used area ends at `end` (its own end field may lie further:
/// it was written before the close gave back the free tail); the reason when it is not.
pub fn lone_copy_is_current(
    pager: &impl PageSource,
    path: &Path,
    file_len: u64,
) -> std::result::Result<Option<u64>, String> {
    let header = pager.header();
    if crate::journal::journal_path(path).exists() {
        return Err("a journal lies beside the file: a writer had it open after that commit".to_string());
    }
    if header.closed_cleanly {
        let list = pager.read_blob(header.free_list).and_then(|bytes| Space::decode(&bytes, header.end));
        return match list {
            Ok(_) if header.end == file_len => Ok(None),
            Ok(_) => Err(format!("it was closed cleanly, but the file ends at {file_len}, not at {}", header.end)),
            Err(e) => Err(format!("it was closed cleanly, but its free list fails its check ({})", e.message())),
        };
    }
    // The durable commit a clean close was made of: the close saved its free list as the
    // file's last slot, after every page of that tree.
    let saved_list = |at: u64| {
        pager.slot_header(at).ok().filter(|slot| slot.kind == SlotKind::Blob && at + slot.slot_len == file_len)?;
        pager.read_blob(at).and_then(|bytes| Space::decode(&bytes, at)).ok().map(|_| at)
    };
    let lowest = file_len.saturating_sub(MAX_FREE_LIST_SCAN).max(DATA_START);
    // The last slot position that leaves room for a slot header, aligned down.
    let last = file_len
        .checked_sub(SLOT_HEADER_SIZE as u64)
        .filter(|_| file_len.is_multiple_of(SLOT_ALIGN))
        .map(|last| last / SLOT_ALIGN * SLOT_ALIGN);
    let found = last.and_then(|last| (lowest..=last).rev().step_by(SLOT_ALIGN as usize).find_map(saved_list));
    match found {
        Some(end) if header.root < end && header.dictionary < end => Ok(Some(end)),
        _ => Err("it is not the header of a clean close, and no free list a close saved of its tree ends the file"
            .to_string()),
    }
}
