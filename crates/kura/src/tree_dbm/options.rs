//! The tuning parameters of TreeDbm, parsed from `name=value` pairs.

use crate::codec::CodecKind;
use crate::dbm::Params;
use crate::error::{Error, Result};

use super::comparator::Comparator;
use super::page::decoded_page_bytes;
use super::pager::PagerOptions;
use super::store::BufferPolicy;

pub(crate) const PARAMS: &[&str] = &[
    "record_comp",
    "page_comp",
    "key_comparator",
    "max_page_size",
    "cache_bytes",
    "max_dirty_pages",
    "max_file_size",
    "dict_size",
    "checkpoint_bytes",
    "memory_bytes",
    "write_buffer_bytes",
];

/// Raw bytes of a page before compression. Measured (docs/tree.md): 8 KiB pages keep random
/// reads fast; larger pages compress a little better and cost more per page read.
pub const DEFAULT_MAX_PAGE_SIZE: u32 = 8 * 1024;
const MIN_PAGE_SIZE: u64 = 256;
const MAX_PAGE_SIZE: u64 = 16 << 20;
/// Decoded pages kept in memory. Large enough for a working set of ~100 MiB of records,
/// because a cache miss costs a decompression of a whole page. Where less memory is
/// available (a memory cgroup, a small machine), `default_cache_bytes` takes a quarter of it.
pub const DEFAULT_CACHE_BYTES: usize = 256 << 20;
/// The least page cache a default gives, however little memory is available.
const MIN_DEFAULT_CACHE_BYTES: usize = 8 << 20;

/// The page cache when `cache_bytes` is not given: `DEFAULT_CACHE_BYTES`, or a quarter of the
/// memory this process may use (`available`: `memory_budget`, a cgroup limit included) when
/// that is less:
/// the cache and the modified pages then leave the rest to the kernel's page cache, which
/// holds the file's pages.
fn default_cache_bytes(available: Option<u64>) -> usize {
    let quarter = available.map_or(usize::MAX, |b| usize::try_from(b / 4).unwrap_or(usize::MAX));
    quarter.clamp(MIN_DEFAULT_CACHE_BYTES, DEFAULT_CACHE_BYTES)
}
/// The most a default write buffer takes (`default_write_buffer_bytes`).
const MAX_DEFAULT_WRITE_BUFFER_BYTES: usize = 1 << 30;

/// The write buffer's budget when `write_buffer_bytes` is not given (used only while the file
/// is larger than half the memory): a third of the memory (`memory_bytes`), at most
/// `MAX_DEFAULT_WRITE_BUFFER_BYTES`, and never less than a quarter of `cache_bytes` (all it is
/// when the memory is unknown). Each commit of random records into such a file reads and
/// rewrites every leaf its records land in; the buffer applies many commits together, each
/// leaf once for all of them. 8M records in commits of 100,000 under 512 MiB (`cache_bytes`
/// 128 MiB): 135 s with 170 MB (the checkpoint applying what the last commits left included),
/// the disk reading 17.5 GB and writing 14.0 GB, against 252 s, 66.4 GB and 45.5 GB with a
/// quarter of the cache, which no commit of 100,000 fitted (a batch over a quarter of the
/// journal's 64 MiB bypassed the buffer then, and one commit is 17 MB); 64-68 s, 7.2 GB read
/// and 9.9 GB written, once the buffer held its records end to end (30% more of them), a full
/// buffer was applied by a checkpoint and a drain's pages were placed in key order
/// (docs/tree.md). With the cache and the buffer, the process's own memory peaked at 400 MB of
/// the 512 MiB there (the cgroup's `rss`); the rest is left to the kernel's page cache, for the
/// file's pages.
fn default_write_buffer_bytes(cache_bytes: usize, memory_bytes: Option<u64>) -> usize {
    let share = memory_bytes.map_or(0, |memory| usize::try_from(memory / 3).unwrap_or(usize::MAX));
    share.min(MAX_DEFAULT_WRITE_BUFFER_BYTES).max(cache_bytes / 4)
}

/// The fewest modified pages a cache-derived budget allows (`TreeOptions::dirty_budget`).
const MIN_DIRTY_PAGES: usize = 64;
pub const DEFAULT_MAX_FILE_SIZE: u64 = 1 << 40;

#[derive(Debug, Clone)]
pub struct TreeOptions {
    pub codec: CodecKind,
    pub codec_given: bool,
    pub comparator: Comparator,
    pub comparator_given: bool,
    pub max_page_size: u32,
    pub max_page_size_given: bool,
    pub cache_bytes: usize,
    pub cache_bytes_given: bool,
    /// As given; `dirty_budget` says what applies when it was not.
    pub max_dirty_pages: Option<usize>,
    pub max_file_size: u64,
    pub dictionary_size: usize,
    /// Journal bytes that trigger a checkpoint (store.rs; the default write buffer may raise
    /// it, `buffer_policy`).
    pub checkpoint_bytes: u64,
    pub checkpoint_bytes_given: bool,
    /// The memory the file's pages may take (`Pager::exceeds_memory`): as given, else what the
    /// machine and its memory cgroups allow, read at open (read once, with the default
    /// cache's size); None when neither is known.
    pub memory_bytes: Option<u64>,
    /// The memory that batches waiting to be applied may take (write_buffer.rs), as given;
    /// None: `default_write_buffer_bytes`, and then only while the file is larger than half
    /// the memory (`buffer_policy`).
    pub write_buffer_bytes: Option<usize>,
}

impl TreeOptions {
    pub fn parse(params: &Params) -> Result<TreeOptions> {
        params.check_known("tree", PARAMS)?;
        let codec_name = params.get("record_comp").or_else(|| params.get("page_comp"));
        let max_page_size = params.get_u64("max_page_size")?;
        if let Some(size) = max_page_size {
            if !(MIN_PAGE_SIZE..=MAX_PAGE_SIZE).contains(&size) {
                return Err(Error::invalid(format!(
                    "max_page_size {size} is outside {MIN_PAGE_SIZE}..={MAX_PAGE_SIZE}"
                )));
            }
        }
        let max_dirty_pages = params.get_u64("max_dirty_pages")?;
        let given_cache_bytes = params.get_u64("cache_bytes")?;
        let given_memory_bytes = params.get_u64("memory_bytes")?;
        let available = match (given_cache_bytes, given_memory_bytes) {
            (Some(_), Some(_)) => None,
            _ => crate::memory_budget::available_bytes(),
        };
        Ok(TreeOptions {
            codec: codec_name.map(CodecKind::from_name).transpose()?.unwrap_or(CodecKind::None),
            codec_given: codec_name.is_some(),
            comparator: params.get("key_comparator").map(Comparator::from_name).transpose()?.unwrap_or_default(),
            comparator_given: params.get("key_comparator").is_some(),
            max_page_size: max_page_size.map_or(DEFAULT_MAX_PAGE_SIZE, |s| s as u32),
            max_page_size_given: max_page_size.is_some(),
            cache_bytes: match given_cache_bytes {
                Some(bytes) => usize::try_from(bytes).unwrap_or(usize::MAX),
                None => default_cache_bytes(available),
            },
            cache_bytes_given: params.get("cache_bytes").is_some(),
            max_dirty_pages: max_dirty_pages.map(|pages| usize::try_from(pages).unwrap_or(usize::MAX)),
            max_file_size: params.get_u64("max_file_size")?.unwrap_or(DEFAULT_MAX_FILE_SIZE),
            dictionary_size: usize::try_from(
                params.get_u64("dict_size")?.unwrap_or(crate::codec::DEFAULT_DICTIONARY_SIZE as u64),
            )
            .unwrap_or(usize::MAX),
            checkpoint_bytes: params.get_u64("checkpoint_bytes")?.unwrap_or(super::store::DEFAULT_CHECKPOINT_BYTES),
            checkpoint_bytes_given: params.get("checkpoint_bytes").is_some(),
            memory_bytes: given_memory_bytes.or(available),
            write_buffer_bytes: params
                .get_u64("write_buffer_bytes")?
                .map(|bytes| usize::try_from(bytes).unwrap_or(usize::MAX)),
        })
    }

    /// How many modified pages may wait for a checkpoint: `max_dirty_pages` as given, else
    /// as many as fill half of `cache_bytes` at one and a half times `max_page_size` each (a
    /// decoded page of 8 KiB takes about 12 KiB), and never fewer than `MIN_DIRTY_PAGES`.
    /// Modified pages are what a log-structured store keeps in its memtable: memory the
    /// process holds beside the cache, so they share `cache_bytes` with it
    /// (`clean_cache_bytes`), or a cgroup's limit meets pages the cache never counted (a
    /// 24 MiB cache held 18 MB of modified pages beside it, and a read phase's thread then
    /// grew glibc an arena of its own: 96 MiB did not hold 1M records). With a fixed floor of
    /// 10,000 pages a bulk load under 128 MiB was OOM-killed; with too few, random batches
    /// checkpoint often and rewrite most of the tree each time.
    pub fn dirty_budget(&self, max_page_size: usize) -> usize {
        let decoded_page = decoded_page_bytes(max_page_size);
        self.max_dirty_pages.unwrap_or_else(|| (self.cache_bytes / 2 / decoded_page).max(MIN_DIRTY_PAGES))
    }

    /// The page cache's budget: `cache_bytes`, less the half the modified pages may take when
    /// their budget comes from it (`dirty_budget`).
    pub fn clean_cache_bytes(&self) -> usize {
        match self.max_dirty_pages {
            Some(_) => self.cache_bytes,
            None => self.cache_bytes - self.cache_bytes / 2,
        }
    }

    /// When write batches wait in the write buffer (`write_buffer_bytes`): by default only in a
    /// file larger than half the memory, with `default_write_buffer_bytes`. Unless
    /// `checkpoint_bytes` was given, the journal may grow to the buffer's budget while the
    /// buffer is in use, since it holds the buffered batches until a checkpoint applies them.
    pub fn buffer_policy(&self) -> BufferPolicy {
        let (budget, beyond_memory_only) = match self.write_buffer_bytes {
            Some(budget) => (budget, false),
            None => (default_write_buffer_bytes(self.cache_bytes, self.memory_bytes), true),
        };
        let journal_bytes = if self.checkpoint_bytes_given { 0 } else { budget as u64 };
        BufferPolicy { budget, journal_bytes, beyond_memory_only }
    }

    pub fn pager_options(&self) -> PagerOptions {
        PagerOptions {
            codec: self.codec,
            dictionary: Vec::new(),
            comparator: self.comparator,
            max_page_size: self.max_page_size,
            cache_bytes: self.clean_cache_bytes(),
            memory_bytes: self.memory_bytes,
            max_file_size: self.max_file_size,
        }
    }
}

#[cfg(test)]
mod tests {
    #![expect(clippy::unwrap_used, reason = "a test fails loudly on the first broken expectation")]
    use super::*;

    const MIB: u64 = 1 << 20;

    fn policy(params: &str) -> BufferPolicy {
        TreeOptions::parse(&Params::parse(params).unwrap()).unwrap().buffer_policy()
    }

    /// The default write buffer takes a third of the memory, at most its cap and at least a
    /// quarter of the cache, and the journal may grow as far unless `checkpoint_bytes` is given.
    #[test]
    fn the_default_write_buffer_is_a_third_of_the_memory_within_bounds() {
        let under_512 = policy(&format!("cache_bytes={},memory_bytes={}", 128 * MIB, 512 * MIB));
        assert_eq!(under_512.budget as u64, 512 * MIB / 3);
        assert_eq!(under_512.journal_bytes, 512 * MIB / 3);
        assert!(under_512.beyond_memory_only);
        let large = policy(&format!("cache_bytes={},memory_bytes={}", 256 * MIB, 24u64 << 30));
        assert_eq!(large.budget, MAX_DEFAULT_WRITE_BUFFER_BYTES);
        let small = policy(&format!("cache_bytes={},memory_bytes={}", 64 * MIB, 30 * MIB));
        assert_eq!(small.budget as u64, 16 * MIB, "never less than a quarter of the cache");
        assert_eq!(default_write_buffer_bytes(64 << 20, None), 16 << 20, "the memory unknown");
        let checkpoints_given =
            policy(&format!("cache_bytes={},memory_bytes={},checkpoint_bytes=8192", 128 * MIB, 512 * MIB));
        assert_eq!(checkpoints_given.journal_bytes, 0, "a given checkpoint_bytes is kept");
        let given = policy("write_buffer_bytes=6000");
        assert_eq!((given.budget, given.journal_bytes, given.beyond_memory_only), (6000, 6000, false));
    }
}
