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
//! - or it is the durable commit a clean close was made of: the close saved its free list at
//!   the end of that tree, and the clean header went to the other copy, with the same tree
//!   (a close publishes the tree it saves first); the free list blob lies at the intact copy's
//!   end and the file ends right after it, and no journal lies beside the file.
//!
//! Otherwise a normal open refuses the file (BrokenData, with `kura restore`), and a salvage
//! drops the intact copy's records and says why: none of them can be proven current.

use std::path::Path;

use super::format::{FileHeader, SlotKind, CHECKSUM_FIELD, HEADER_SIZE};
use super::pager::Pager;
use super::space::Space;
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

/// Whether the current header of `pager` (the only intact copy) is proven to hold the file's
/// newest tree (see the module comment); the reason when it is not.
pub fn lone_copy_is_current(pager: &Pager, path: &Path, file_len: u64) -> std::result::Result<(), String> {
    let header = pager.header();
    if crate::journal::journal_path(path).exists() {
        return Err("a journal lies beside the file: a writer had it open after that commit".to_string());
    }
    if header.closed_cleanly {
        let list = pager.read_blob(header.free_list).and_then(|bytes| Space::decode(&bytes, header.end));
        return match list {
            Ok(_) if header.end == file_len => Ok(()),
            Ok(_) => Err(format!("it was closed cleanly, but the file ends at {file_len}, not at {}", header.end)),
            Err(e) => Err(format!("it was closed cleanly, but its free list fails its check ({})", e.message())),
        };
    }
    let blob = pager.slot_header(header.end).ok().filter(|slot| slot.kind == SlotKind::Blob);
    let list = blob.map(|slot| (slot, pager.read_blob(header.end).and_then(|b| Space::decode(&b, header.end))));
    match list {
        Some((slot, Ok(_))) if header.end + slot.slot_len == file_len => Ok(()),
        _ => Err(format!(
            "it is not the header of a clean close, and no free list saved by a close of its tree lies at its end \
             ({})",
            header.end
        )),
    }
}
