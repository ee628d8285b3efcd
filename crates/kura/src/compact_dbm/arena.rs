//! A lock group's blocks, back to back in one allocation, and each bucket's place in it as a
//! packed span in a table.
//!
//! Why not a heap allocation per block: glibc's malloc adds an 8-byte header to each and
//! rounds it up to 16 bytes (about 11 bytes a block on the dictionary data set), and the
//! table then holds a 16-byte `Box<[u8]>` a bucket. The arena costs an 8-byte span a bucket
//! and the bytes that writes leave behind: a block rewritten no larger than before is written
//! in place; a larger one is appended, and its old place becomes dead. Dead bytes are bounded
//! by compaction (at most `1 / MAX_DEAD_SHARE` of the arena), spare capacity by growing in
//! steps of `1 / GROWTH_STEP`; both are counted in `heap_bytes`, as they are memory held.

use std::ops::Range;

use super::block::heap_size;
use crate::error::{Error, ErrorKind, Result};

/// The low bits of a span hold the block's length, the high bits its offset.
const LENGTH_BITS: u32 = 32;
const LENGTH_MASK: u64 = (1 << LENGTH_BITS) - 1;
/// Offsets and lengths are 32-bit: one group's arena holds at most 4 GiB.
const MAX_ARENA_BYTES: usize = LENGTH_MASK as usize;
/// The arena is compacted when dead bytes exceed this share of it.
const MAX_DEAD_SHARE: usize = 8;
/// The arena grows by at least this share of its length at a time,
const GROWTH_STEP: usize = 16;
/// and by at least this many bytes, so that a small arena is not reallocated on every append.
const MIN_GROWTH: usize = 1024;

/// `offset << 32 | length`; 0 for an empty bucket (a block is never empty: see `block.rs`).
fn pack(offset: usize, length: usize) -> u64 {
    debug_assert!(offset <= MAX_ARENA_BYTES && length <= MAX_ARENA_BYTES && length > 0);
    ((offset as u64) << LENGTH_BITS) | length as u64
}

fn unpack(span: u64) -> (usize, usize) {
    ((span >> LENGTH_BITS) as usize, (span & LENGTH_MASK) as usize)
}

fn out_of_range() -> Error {
    Error::broken("compact: bucket index out of range")
}

/// A broken invariant of the arena: every span lies within it.
fn span_past_end() -> Error {
    Error::broken("compact: a block's span points past its group's arena")
}

fn full() -> Error {
    Error::new(ErrorKind::Limit, "a compact lock group holds 4 GiB of blocks, its most")
}

pub struct BlockArena {
    /// Each bucket's span. All zero bytes when every bucket is empty, so a new table is taken
    /// zeroed from the allocator and its pages cost nothing until a bucket on them is written.
    spans: Vec<u64>,
    bytes: Vec<u8>,
    /// Bytes of `bytes` that no span covers.
    dead: usize,
}

impl BlockArena {
    pub fn new(buckets: usize) -> BlockArena {
        BlockArena { spans: vec![0; buckets], bytes: Vec::new(), dead: 0 }
    }

    pub fn bucket_count(&self) -> usize {
        self.spans.len()
    }

    /// The block of `bucket` (empty for an empty bucket); BrokenData when the bucket is out of
    /// range or its span points past the arena (a broken invariant of `replace`).
    #[inline]
    pub fn get(&self, bucket: usize) -> Result<&[u8]> {
        let (offset, length) = unpack(*self.spans.get(bucket).ok_or_else(out_of_range)?);
        self.bytes.get(offset..offset + length).ok_or_else(span_past_end)
    }

    /// Every bucket's block in bucket order.
    pub fn iter(&self) -> impl Iterator<Item = &[u8]> {
        self.spans.iter().map(|&span| {
            let (offset, length) = unpack(span);
            let block = self.bytes.get(offset..offset + length);
            debug_assert!(block.is_some(), "a span points past the arena");
            block.unwrap_or_default()
        })
    }

    /// Makes room for `additional` more bytes of blocks exactly: for a bulk build that knows
    /// its size, so that it grows the arena once.
    pub fn reserve_exact(&mut self, additional: usize) {
        self.bytes.reserve_exact(additional);
    }

    /// Gives spare capacity back to the allocator: after a bulk build.
    pub fn shrink_to_fit(&mut self) {
        self.bytes.shrink_to_fit();
    }

    /// Makes `block` the block of `bucket` (empty: the bucket is emptied).
    pub fn replace(&mut self, bucket: usize, block: &[u8]) -> Result<()> {
        let (offset, old_length) = unpack(*self.spans.get(bucket).ok_or_else(out_of_range)?);
        if block.len() <= old_length {
            // In place (or emptied): the tail of the old block becomes dead.
            let place = self.bytes.get_mut(offset..offset + block.len()).ok_or_else(span_past_end)?;
            place.copy_from_slice(block);
            let span = self.spans.get_mut(bucket).ok_or_else(out_of_range)?;
            *span = if block.is_empty() { 0 } else { pack(offset, block.len()) };
            self.dead += old_length - block.len();
        } else {
            // Room first, while the old block is still live: a refusal loses nothing, and a
            // compaction on the way moves the old block with the others.
            self.make_room(block.len())?;
            let span = self.spans.get_mut(bucket).ok_or_else(out_of_range)?;
            self.dead += unpack(*span).1;
            *span = pack(self.bytes.len(), block.len());
            self.bytes.extend_from_slice(block);
        }
        if self.dead > self.bytes.len() / MAX_DEAD_SHARE && self.dead >= self.spans.len() {
            self.compact(0)?;
        }
        debug_assert!(self.dead <= self.bytes.len());
        Ok(())
    }

    /// Replaces the blocks of many buckets at once (a bulk batch): `staged` lists, in
    /// ascending bucket order, each bucket and where its new block lies in `blocks`. When
    /// they are a good share of the arena (a load into an empty or young map), the new arena
    /// is allocated once at its exact size and the other blocks are copied over: no spare
    /// room, no chunks freed on the way. Otherwise they are replaced one by one, so that a
    /// batch touching a few buckets of a large arena does not copy it.
    pub fn replace_many(&mut self, staged: &[(usize, Range<usize>)], blocks: &[u8]) -> Result<()> {
        let staged_bytes: usize = staged.iter().map(|(_, range)| range.len()).sum();
        if staged_bytes.saturating_mul(GROWTH_STEP) < self.bytes.len() - self.dead {
            for (bucket, range) in staged {
                self.replace(*bucket, blocks.get(range.clone()).ok_or_else(span_past_end)?)?;
            }
            return Ok(());
        }
        let mut replaced = 0;
        for (bucket, range) in staged {
            let span = self.spans.get(*bucket).ok_or_else(out_of_range)?;
            replaced += unpack(*span).1;
            debug_assert!(range.end <= blocks.len());
        }
        debug_assert!(staged.is_sorted_by(|a, b| a.0 < b.0), "staged buckets ascend, each once");
        let live = self.bytes.len() - self.dead - replaced + staged_bytes;
        if live > MAX_ARENA_BYTES {
            return Err(full());
        }
        let mut bytes = Vec::with_capacity(live);
        let mut next = staged.iter().peekable();
        for (bucket, span) in self.spans.iter_mut().enumerate() {
            let block = match next.next_if(|(staged_bucket, _)| *staged_bucket == bucket) {
                Some((_, range)) => blocks.get(range.clone()),
                None => {
                    let (offset, length) = unpack(*span);
                    self.bytes.get(offset..offset + length)
                }
            };
            let block = block.ok_or_else(span_past_end)?;
            *span = if block.is_empty() { 0 } else { pack(bytes.len(), block.len()) };
            bytes.extend_from_slice(block);
        }
        debug_assert_eq!(bytes.len(), live);
        self.bytes = bytes;
        self.dead = 0;
        Ok(())
    }

    /// Ensures `additional` bytes can be appended: by compacting when dead bytes pay for it,
    /// else by growing a step.
    fn make_room(&mut self, additional: usize) -> Result<()> {
        if self.bytes.capacity() - self.bytes.len() >= additional {
            return Ok(());
        }
        let live = self.bytes.len() - self.dead;
        if live + additional > MAX_ARENA_BYTES {
            return Err(full());
        }
        if self.bytes.len() + additional > MAX_ARENA_BYTES
            || (self.dead > self.bytes.len() / MAX_DEAD_SHARE / 2 && self.dead >= self.spans.len())
        {
            self.compact(additional + live / GROWTH_STEP)?;
        } else {
            let step =
                (self.bytes.len() / GROWTH_STEP).max(MIN_GROWTH).min(MAX_ARENA_BYTES - self.bytes.len() - additional);
            self.bytes.reserve_exact(additional + step);
        }
        Ok(())
    }

    /// Copies the live blocks into a new arena in bucket order, with `room` bytes to spare.
    fn compact(&mut self, room: usize) -> Result<()> {
        let live = self.bytes.len() - self.dead;
        let mut bytes = Vec::with_capacity(live + room);
        for span in &mut self.spans {
            if *span == 0 {
                continue;
            }
            let (offset, length) = unpack(*span);
            *span = pack(bytes.len(), length);
            bytes.extend_from_slice(self.bytes.get(offset..offset + length).ok_or_else(span_past_end)?);
        }
        debug_assert_eq!(bytes.len(), live, "the spans cover every live byte once");
        self.bytes = bytes;
        self.dead = 0;
        Ok(())
    }

    /// What the allocator holds for the blocks: the arena's capacity, dead bytes included.
    pub fn heap_bytes(&self) -> u64 {
        heap_size(self.bytes.capacity()) as u64
    }

    /// What the allocator holds for the span table.
    pub fn table_bytes(&self) -> u64 {
        heap_size(self.spans.capacity() * std::mem::size_of::<u64>()) as u64
    }
}

#[cfg(test)]
mod tests {
    #![expect(clippy::unwrap_used, reason = "a test fails loudly on the first broken expectation")]
    #![expect(clippy::indexing_slicing, reason = "a test fails loudly on a wrong index")]
    use super::*;
    use crate::split_mix::SplitMix64;

    #[test]
    fn random_replacements_match_a_model_and_keep_dead_bytes_bounded() {
        let mut rng = SplitMix64::new(7);
        let buckets = 300;
        let mut arena = BlockArena::new(buckets);
        let mut model: Vec<Vec<u8>> = vec![Vec::new(); buckets];
        for step in 0..60_000u32 {
            let bucket = (rng.next_u64() % buckets as u64) as usize;
            let length = match rng.next_u64() % 10 {
                0 => 0,
                1..=7 => 2 + (rng.next_u64() % 200) as usize,
                _ => 200 + (rng.next_u64() % 3000) as usize,
            };
            let block: Vec<u8> = (0..length).map(|i| (step as usize + i) as u8).collect();
            arena.replace(bucket, &block).unwrap();
            model[bucket] = block;
            if step % 997 == 0 {
                for (index, expected) in model.iter().enumerate() {
                    assert_eq!(arena.get(index).unwrap(), &expected[..], "bucket {index} at step {step}");
                }
                let live: usize = model.iter().map(Vec::len).sum();
                assert!(arena.dead <= arena.bytes.len() / MAX_DEAD_SHARE + 3200 + buckets, "dead {}", arena.dead);
                assert_eq!(arena.bytes.len() - arena.dead, live);
            }
        }
        // A bulk replacement of every third bucket, some emptied: the staged blocks are a good
        // share of the arena, which is rebuilt exactly.
        let (staged, blocks) = stage_every_third(&mut model, 400);
        arena.replace_many(&staged, &blocks).unwrap();
        assert_eq!(arena.dead, 0);
        assert_eq!(arena.bytes.len(), model.iter().map(Vec::len).sum::<usize>());
        assert_eq!(arena.bytes.capacity(), arena.bytes.len());
        // A small one is applied bucket by bucket (two blocks shrink by a byte in place,
        // leaving two dead bytes) rather than by copying the arena.
        let shrunk: Vec<usize> = (0..buckets).filter(|&b| model[b].len() > 1).take(2).collect();
        let mut blocks = Vec::new();
        let mut staged = Vec::new();
        for &bucket in &shrunk {
            model[bucket].pop();
            staged.push((bucket, blocks.len()..blocks.len() + model[bucket].len()));
            blocks.extend_from_slice(&model[bucket]);
        }
        arena.replace_many(&staged, &blocks).unwrap();
        assert_eq!(arena.dead, 2, "a small batch rebuilt the arena");
        assert_eq!(arena.iter().collect::<Vec<_>>(), model.iter().map(Vec::as_slice).collect::<Vec<_>>());
        assert!(arena.replace_many(&[(buckets, 0..1)], b"x").is_err());
        assert!(arena.get(buckets).is_err());
        assert!(arena.replace(buckets, b"xy").is_err());
        let listed: Vec<&[u8]> = arena.iter().collect();
        assert_eq!(listed, model.iter().map(Vec::as_slice).collect::<Vec<_>>());
    }

    /// New blocks of `scale` to `50 * scale` bytes for every third bucket of `model` (every
    /// other one of them emptied), as `replace_many` takes them; `model` is updated.
    fn stage_every_third(model: &mut [Vec<u8>], scale: usize) -> (Vec<(usize, Range<usize>)>, Vec<u8>) {
        let (mut staged, mut blocks) = (Vec::new(), Vec::new());
        for bucket in (0..model.len()).step_by(3) {
            let length = if bucket % 2 == 0 { 0 } else { scale * (1 + bucket % 50) };
            let block = vec![bucket as u8; length];
            staged.push((bucket, blocks.len()..blocks.len() + length));
            blocks.extend_from_slice(&block);
            model[bucket] = block;
        }
        (staged, blocks)
    }
}
