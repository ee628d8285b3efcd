//! Tools for tests that damage tree files on purpose: read the header, list a page's
//! children, and write arbitrary page bytes into a slot with a valid checksum, so that the
//! structural checks (not only the checksums) are exercised. Not for normal use.

use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;
use std::path::Path;

use super::format::{FileHeader, SlotHeader, SlotKind, HEADER_SIZE, SLOT_HEADER_SIZE};
use super::page::{Branch, Leaf};
use crate::codec::{Codec, CodecKind, Effort};
use crate::error::{Error, Result};

fn read_at(path: &Path, offset: u64, len: usize) -> Result<Vec<u8>> {
    let file = std::fs::File::open(path).map_err(|e| Error::io("open", e))?;
    let mut bytes = vec![0u8; len];
    file.read_exact_at(&mut bytes, offset).map_err(|e| Error::io("read", e))?;
    Ok(bytes)
}

fn write_at(path: &Path, offset: u64, bytes: &[u8]) -> Result<()> {
    let file = OpenOptions::new().write(true).open(path).map_err(|e| Error::io("open", e))?;
    file.write_all_at(bytes, offset).map_err(|e| Error::io("write", e))
}

/// `(root offset, height, current header copy offset)` of a tree file.
pub fn root(path: &Path) -> Result<(u64, u32, u64)> {
    let header = FileHeader::read_current(&read_at(path, 0, 2 * HEADER_SIZE)?)?;
    Ok((header.root, header.height, header.copy_offset()))
}

/// Rewrites the current header with another root and height (checksum kept valid).
pub fn set_root(path: &Path, root: u64, height: u32) -> Result<()> {
    let mut header = FileHeader::read_current(&read_at(path, 0, 2 * HEADER_SIZE)?)?;
    header.root = root;
    header.height = height;
    write_at(path, header.copy_offset(), &header.encode())
}

/// The child offsets of the (uncompressed or compressed) branch page at `offset`.
pub fn children(path: &Path, offset: u64) -> Result<Vec<u64>> {
    let header = FileHeader::read_current(&read_at(path, 0, 2 * HEADER_SIZE)?)?;
    let slot = SlotHeader::decode(&read_at(path, offset, SLOT_HEADER_SIZE)?, offset, u64::MAX)?;
    let stored = read_at(path, offset + SLOT_HEADER_SIZE as u64, slot.stored_len as usize)?;
    let mut raw = Vec::new();
    Codec::new(header.codec, Vec::new())?.decode(&stored, slot.compressed, &mut raw)?;
    Ok(Branch::decode(&raw, header.comparator, header.records_slot_hints())?.children().to_vec())
}

/// Serialized branch bytes with these children and separators, checked or not.
pub fn branch_bytes(children: &[u64], keys: &[&[u8]]) -> Result<Vec<u8>> {
    let branch = Branch::forged(children, keys.iter().map(|key| key.to_vec()).collect());
    let mut raw = Vec::new();
    branch.encode(&mut raw)?;
    Ok(raw)
}

/// Serialized leaf bytes holding `records` in the order given (sorted or not).
pub fn leaf_bytes(records: &[(&[u8], &[u8])]) -> Vec<u8> {
    let mut leaf = Leaf::new();
    for (index, (key, value)) in records.iter().enumerate() {
        let _ = leaf.insert(index, key, value);
    }
    let mut raw = Vec::new();
    leaf.encode(&mut raw);
    raw
}

/// Writes `stored` bytes into the slot at `offset` as a page of the given kind (`branch`
/// or leaf), with a valid checksum; `compressed` marks them as codec output. Fails if they
/// do not fit the slot.
pub fn write_page(path: &Path, offset: u64, branch: bool, stored: &[u8], compressed: bool) -> Result<()> {
    let old = SlotHeader::decode(&read_at(path, offset, SLOT_HEADER_SIZE)?, offset, u64::MAX)?;
    let stored_len = u32::try_from(stored.len()).map_err(|_| Error::invalid("too large"))?;
    if super::format::content_len(stored_len) > old.slot_len {
        return Err(Error::invalid("the forged page does not fit the slot"));
    }
    let kind = if branch { SlotKind::Branch } else { SlotKind::Leaf };
    let mut slot = SlotHeader { kind, compressed, stored_len, slot_len: old.slot_len, checksum: 0 };
    slot.checksum = slot.checksum_of(offset, stored);
    write_at(path, offset, &slot.encode())?;
    write_at(path, offset + SLOT_HEADER_SIZE as u64, stored)
}

/// Compresses `raw` with `codec` as a page would be.
pub fn compress(codec: CodecKind, raw: &[u8]) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    Codec::new(codec, Vec::new())?.encode(raw, Effort::Dense, &mut out)?;
    Ok(out)
}

/// Sets the clean-close flag of the current header, as a crash (false) would leave it.
pub fn set_closed_cleanly(path: &Path, clean: bool) -> Result<()> {
    let mut header = FileHeader::read_current(&read_at(path, 0, 2 * HEADER_SIZE)?)?;
    header.closed_cleanly = clean;
    if !clean {
        header.free_list = 0;
    }
    write_at(path, header.copy_offset(), &header.encode())
}

/// What the two header copies at the start of a tree file say (`file_start`: its first 256
/// bytes), for a test's failure message: each copy's sequence number, base, clean-close flag
/// and root, or why it does not decode (a torn or damaged copy).
pub fn describe_headers(file_start: &[u8]) -> String {
    let describe = |copy: usize| {
        let bytes = file_start.get(copy * HEADER_SIZE..).unwrap_or_default();
        match FileHeader::decode(bytes) {
            Ok(header) => format!(
                "copy {copy}: sequence {}, base {:?}, closed cleanly {}, root {}, count {}",
                header.sequence,
                header.since_base.map(|since| since.base),
                header.closed_cleanly,
                header.root,
                header.count
            ),
            Err(e) => format!("copy {copy}: {}", e.message()),
        }
    };
    format!("{}; {}", describe(0), describe(1))
}
