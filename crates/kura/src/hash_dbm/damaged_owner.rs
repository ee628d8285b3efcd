//! Appending mode's restore: whose record a damaged record was.
//!
//! In appending mode every version of a key stays in its bucket's chain, newest first, so a
//! record that fails its check may have been the newest version of any key of its bucket
//! whose intact versions are all older. Not knowing whose it was, the restore dropped every
//! such key rather than revive an older value: one flipped byte cost a quarter of the
//! 2,000-record test files more than the record it lay in. Here the damaged record's bytes
//! are asked whose it was, and the answer is trusted only where the check or the file's
//! structure backs it:
//!
//! 1. With its tag as stored or any other, it passes its check: the damage lay in its tag
//!    (the kind, under no check, can make a record read as dead or as no record; the
//!    compressed bit and five check bits show as the one tag the check passes with), and its
//!    key is its own.
//! 2. Read with its chain pointer as wide as any pointer may be (the pointer is under no
//!    check, and a flipped continuation bit moves every field after it), its check passes
//!    with its stored key; or with a candidate's key in place of its stored one (keys of its
//!    bucket with older versions): the damage lay in its key or key size, and its value,
//!    whose check is seeded with the key's hash, proves the key (37 bits).
//! 3. With one byte of its stored key put back (each byte, each value), the key lies in its
//!    bucket and its check passes: the damage lay in the key of a key with no older
//!    version, which step 2 cannot offer.
//! 4. With its key size set to the one that makes it as long as the stretch the scan could
//!    not read (the record's true length: the scan resynchronizes on the intact record
//!    after it), its check passes with the key then read, which lies in its bucket.
//! 5. With its value size set to the one that makes it as long as that stretch, its check
//!    passes with its stored key, which lies in its bucket.
//! 6. Read as stored, its length is that stretch's and its key lies in its bucket: the
//!    damage lay in its value or its checks, so its key bytes are its own.
//!
//! Anything else (a stretch longer than one record, a key of another bucket, a header that
//! does not parse) names no owner, and the record keeps shadowing every key of its bucket.
//! What this trusts that a check does not prove is rule 6's premise: damage that changed
//! both a record's key and its value, into a key of the same bucket, would be taken for
//! damage to the value alone (one such key in `num_buckets`); docs/durability.md says so.

use super::chain_lock::WholeFile;
use super::record::{RecordHeader, MAX_HEADER_SIZE, MAX_KEY_SIZE, MAX_NEXT_WIDTH};
use super::storage::{bucket_of, hash_key, Storage};
use crate::encoding::{decode_varint, put_varint, varint_len};

/// Widths a value size can be written in (values up to 2^32 - 1 bytes).
const MAX_VALUE_SIZE_WIDTH: usize = 5;

/// The longest key whose single damaged byte is searched for (255 tries a byte).
const MAX_REPAIRED_KEY: usize = 256;

/// Widths a key size can be written in (keys up to `MAX_KEY_SIZE`, 2^24 bytes).
const MAX_KEY_SIZE_WIDTH: usize = 4;

/// The key whose version the damaged record at `offset` of `bucket`'s chain was (see the
/// module's rules), or None when its bytes do not tell. `stretch`: the length of the
/// stretch the scan could not read that starts at `offset`, if one does; `candidates`: the
/// keys of the bucket whose last intact version is older than the record.
pub fn owner(
    source: &Storage,
    whole: &WholeFile<'_>,
    bucket: u64,
    offset: u64,
    stretch: Option<u64>,
    candidates: &[&[u8]],
) -> Option<Vec<u8>> {
    let bytes = source.raw_bytes(whole, offset, MAX_HEADER_SIZE).ok()?;
    let layout = source.header.check_layout();
    let buckets = source.header.num_buckets;
    let chain = whole.chain(0);
    // Each rule below tries up to a few thousand readings of the record, so only a record
    // with the wide check (37 bits: every record of a version 5 file) is proven by its check;
    // a 13-bit check would pass a wrong reading too often.
    let proves = |header: &RecordHeader, hash: u64| {
        header.check_wide.is_some() && source.checksum_matches(whole, offset, header, hash, header.is_compressed())
    };
    let in_bucket = |key: &[u8]| bucket_of(hash_key(key), buckets) == bucket;
    let stored = RecordHeader::parse(bytes, offset, layout).ok();
    let fits = |header: &RecordHeader| stretch.is_none_or(|len| header.total_len() == len);
    // 1. Intact but for its tag: the kind is under no check (a flip can make a record read as
    // dead, or as no record), and a damaged compressed bit or check bit shows as the one tag
    // among 256 that its check passes with.
    let own_tag = *bytes.first()?;
    let mut retagged = bytes.to_vec();
    for tag in std::iter::once(own_tag).chain((0..=u8::MAX).filter(|&tag| tag != own_tag)) {
        *retagged.first_mut()? = tag;
        let Ok(header) = RecordHeader::parse(&retagged, offset, layout) else { continue };
        let Ok(key) = source.key_of(chain, offset, &header) else { continue };
        // (Its length need not be the stretch's: a record whose tag reads as no record
        // leaves a stretch of one byte, its chain pointer's first byte then reading as a
        // dead tag with its key and value behind it.)
        if in_bucket(key) && proves(&header, hash_key(key)) {
            return Some(key.to_vec());
        }
    }
    // 2. A candidate's key proven by the check; or its own key, read with a chain pointer of
    // another width (a flipped continuation bit of the pointer, under no check, moves every
    // field after it).
    for next_width in 1..=MAX_NEXT_WIDTH {
        let own_key_len =
            bytes.get(1 + next_width..).and_then(decode_varint).and_then(|(n, _)| usize::try_from(n).ok());
        if let Some(header) = own_key_len
            .filter(|&n| n <= MAX_KEY_SIZE)
            .and_then(|key_len| header_as(bytes, offset, source, next_width, key_len, None))
        {
            if let Ok(key) = source.key_of(chain, offset, &header) {
                if in_bucket(key) && proves(&header, hash_key(key)) {
                    return Some(key.to_vec());
                }
            }
        }
        for key in candidates {
            let Some(header) = header_as(bytes, offset, source, next_width, key.len(), None) else { continue };
            if fits(&header) && proves(&header, hash_key(key)) {
                return Some(key.to_vec());
            }
        }
    }
    // 3. Its key with one byte put back, proven by the check.
    if let Some(header) = stored.as_ref().filter(|header| fits(header)) {
        if let Some(key) = source.key_of(chain, offset, header).ok().filter(|key| key.len() <= MAX_REPAIRED_KEY) {
            if let Some(repaired) =
                key_with_one_byte_back(key, |candidate| in_bucket(candidate) && proves(header, hash_key(candidate)))
            {
                return Some(repaired);
            }
        }
    }
    let len = stretch?;
    // 4. The key size that gives the record the stretch's length.
    for next_width in 1..=MAX_NEXT_WIDTH {
        for width in 1..=MAX_KEY_SIZE_WIDTH {
            // Any key size of this width places the fields after it alike.
            let probe = if width == 1 { 0 } else { 1 << (7 * (width - 1)) };
            let Some(header) = header_as(bytes, offset, source, next_width, probe, None) else { continue };
            let fixed = (header.header_len + header.value_len) as u64;
            let Some(key_len) = len.checked_sub(fixed).map(|n| n as usize) else { continue };
            if key_len > MAX_KEY_SIZE || varint_len(key_len as u64) != width {
                continue;
            }
            let Some(header) = header_as(bytes, offset, source, next_width, key_len, None) else { continue };
            let Ok(key) = source.key_of(chain, offset, &header) else { continue };
            if in_bucket(key) && proves(&header, hash_key(key)) {
                return Some(key.to_vec());
            }
        }
    }
    // 5. The value size that gives the record the stretch's length, its key as stored.
    for next_width in 1..=MAX_NEXT_WIDTH {
        let Some((key_len, _)) = bytes.get(1 + next_width..).and_then(decode_varint) else { continue };
        let Some(key_len) = usize::try_from(key_len).ok().filter(|&n| n <= MAX_KEY_SIZE) else { continue };
        for width in 1..=MAX_VALUE_SIZE_WIDTH {
            let probe = if width == 1 { 0 } else { 1 << (7 * (width - 1)) };
            let Some(probed) = header_as(bytes, offset, source, next_width, key_len, Some(probe)) else { continue };
            let fixed = (probed.header_len + probed.key_len) as u64;
            let Some(value_len) = len.checked_sub(fixed).map(|n| n as usize) else { continue };
            if varint_len(value_len as u64) != width {
                continue;
            }
            let Some(repaired) = header_as(bytes, offset, source, next_width, key_len, Some(value_len)) else {
                continue;
            };
            let Ok(key) = source.key_of(chain, offset, &repaired) else { continue };
            if in_bucket(key) && proves(&repaired, hash_key(key)) {
                return Some(key.to_vec());
            }
        }
    }
    // 6. Sizes that agree with the stretch, and a key of the bucket.
    let header = stored?;
    let key = source.key_of(chain, offset, &header).ok()?;
    (header.total_len() == len && in_bucket(key)).then(|| key.to_vec())
}

/// The one key that differs from `key` in one byte and that `holds` accepts; None when none
/// does, or more than one (which the check's 37 bits make all but impossible: the search
/// then gives up rather than guess).
fn key_with_one_byte_back(key: &[u8], holds: impl Fn(&[u8]) -> bool) -> Option<Vec<u8>> {
    let mut work = key.to_vec();
    let mut found = None;
    for position in 0..work.len() {
        let original = *work.get(position)?;
        for candidate in (0..=u8::MAX).filter(|&byte| byte != original) {
            *work.get_mut(position)? = candidate;
            if holds(&work) {
                if found.is_some() {
                    return None;
                }
                found = Some(work.clone());
            }
        }
        *work.get_mut(position)? = original;
    }
    found
}

/// The header of the block whose first bytes are `bytes` (at `offset`), read as a record
/// whose chain pointer is `next_width` bytes wide, whose key is `key_len` bytes long and,
/// when given, whose value is `value_len` bytes long, whatever the bytes of those fields say
/// (one of them may be the damaged byte); the fields after them are read where that puts
/// them. The pointer's value is not under the record's check and is given as 0.
fn header_as(
    bytes: &[u8],
    offset: u64,
    source: &Storage,
    next_width: usize,
    key_len: usize,
    value_len: Option<usize>,
) -> Option<RecordHeader> {
    let (&tag, _) = bytes.split_first()?;
    let mut at = 1 + next_width + varint_len(key_len as u64);
    let mut patched = Vec::with_capacity(MAX_HEADER_SIZE + MAX_NEXT_WIDTH);
    patched.push(tag);
    patched.extend(std::iter::repeat_n(0x80, next_width - 1));
    patched.push(0);
    put_varint(&mut patched, key_len as u64);
    if let Some(value_len) = value_len {
        put_varint(&mut patched, value_len as u64);
        at += varint_len(value_len as u64);
    }
    patched.extend_from_slice(bytes.get(at..)?);
    let header = RecordHeader::parse(&patched, offset, source.header.check_layout()).ok()?;
    let sizes = header.key_len == key_len && value_len.is_none_or(|len| header.value_len == len);
    (sizes && usize::from(header.next_width) == next_width).then_some(header)
}
