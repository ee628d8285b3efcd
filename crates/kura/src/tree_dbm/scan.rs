//! Zero-copy scans: `TreeDbm::scan` lends each record of a key range to a callback as slices
//! of the decoded leaf, in key order, without copying a key or a value.
//!
//! Why a callback and not an iterator: `range()` yields owned pairs (two allocations and two
//! copies a record, plus a copy of each key to guard its end), which made a range read of 10
//! records cost more than LMDB's, whose cursor lends slices of its map. The scan holds the
//! leaf it walks (a shared, immutable snapshot: the tree's lock is not held while `visit`
//! runs), and moves to the next leaf by seeking past the leaf's last key, so it sees each
//! record at most once even while other threads write, as a cursor does.

use std::cmp::Ordering;
use std::ops::Bound;

use super::page::Page;
use super::range::KeyRange;
use super::seek::{Position, Seek};
use super::TreeDbm;
use crate::error::{Error, Result};

/// How many records ahead of the one visited a scan starts loading the next: a leaf's
/// records lie in its arena in key order only until it changes, so the processor's own
/// prefetcher, which follows addresses, misses them in a page written to; asked for two
/// records ahead, a range read of ten records took 5-8% less time (4 ahead: no better).
const SCAN_AHEAD: usize = 2;

impl TreeDbm {
    /// Visits the records whose keys lie in `range`, in key order, lending each key and value
    /// to `visit` from the decoded page; stops early when `visit` returns false. Returns how
    /// many records were visited.
    ///
    /// ```
    /// # fn main() -> kura::Result<()> {
    /// # let dir = tempfile::tempdir().map_err(|e| kura::Error::io("tempdir", e))?;
    /// use kura::{Dbm, OpenMode, Params, TreeDbm};
    /// let db = TreeDbm::open(dir.path().join("scan.kut"), OpenMode::Create, &Params::new())?;
    /// for key in ["a", "b", "c", "d"] {
    ///     db.set(key.as_bytes(), b"v", true)?;
    /// }
    /// let mut keys = Vec::new();
    /// db.scan("b".."d", &mut |key, _value| {
    ///     keys.push(String::from_utf8_lossy(key).into_owned());
    ///     true
    /// })?;
    /// assert_eq!(keys, ["b", "c"]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn scan(&self, range: impl KeyRange, visit: &mut dyn FnMut(&[u8], &[u8]) -> bool) -> Result<u64> {
        let (lower, upper) = range.bounds();
        let (comparator, mut position) = {
            let tree = self.read()?;
            let start = match &lower {
                Bound::Unbounded => Seek::First,
                Bound::Included(key) => Seek::AtLeast(key),
                Bound::Excluded(key) => Seek::Above(key),
            };
            (tree.comparator(), tree.seek(start)?)
        };
        let beyond = |key: &[u8]| match &upper {
            Bound::Unbounded => false,
            Bound::Included(end) => comparator.compare(key, end) == Ordering::Greater,
            Bound::Excluded(end) => comparator.compare(key, end) != Ordering::Less,
        };
        let mut visited = 0u64;
        while let Some(Position { leaf, index }) = position.take() {
            let Page::Leaf(records) = &*leaf else {
                return Err(Error::internal("TreeDbm::scan: a seek stops on a leaf page"));
            };
            for at in index..records.len() {
                records.prefetch_record(at + SCAN_AHEAD);
                let Some((key, value)) = records.record(at) else { break };
                if beyond(key) {
                    return Ok(visited);
                }
                visited += 1;
                if !visit(key, value) {
                    return Ok(visited);
                }
            }
            let Some(last) = records.len().checked_sub(1).and_then(|at| records.key(at)) else {
                break;
            };
            position = self.read()?.seek(Seek::Above(last))?;
        }
        Ok(visited)
    }
}

#[cfg(test)]
mod tests {
    #![expect(clippy::unwrap_used, reason = "a test fails loudly on the first broken expectation")]
    use std::collections::BTreeMap;

    use super::*;
    use crate::dbm::{Dbm, OpenMode, Params};
    use crate::split_mix::SplitMix64;

    /// Random ranges over a tree of small pages (many leaves), rewritten between scans, each
    /// checked against a `BTreeMap` of the same records; some scans stop early.
    #[test]
    fn scans_match_a_model_over_many_leaves() {
        let dir = tempfile::tempdir().unwrap();
        let params = Params::new().with("max_page_size", 512).with("max_dirty_pages", 8);
        let db = TreeDbm::open(dir.path().join("scan.kut"), OpenMode::Create, &params).unwrap();
        let mut model = BTreeMap::new();
        let mut rng = SplitMix64::new(47);
        let key = |n: u64| format!("k{n:05}").into_bytes();
        for round in 0..60 {
            for _ in 0..200 {
                let k = key(rng.below(3000));
                if rng.below(4) == 0 {
                    db.remove(&k).ok();
                    model.remove(&k);
                } else {
                    let v = format!("{round}:{}", rng.next_u64()).into_bytes();
                    db.set(&k, &v, true).unwrap();
                    model.insert(k, v);
                }
            }
            let (a, b) = (rng.below(3100), rng.below(3100));
            let (low, high) = (key(a.min(b)), key(a.max(b)));
            let limit = if rng.below(3) == 0 { 1 + rng.below(40) as usize } else { usize::MAX };
            let bounds = match rng.below(4) {
                0 => (Bound::Included(low), Bound::Excluded(high)),
                1 => (Bound::Excluded(low), Bound::Included(high)),
                2 => (Bound::Unbounded, Bound::Included(high)),
                _ => (Bound::Included(low), Bound::Unbounded),
            };
            let expected: Vec<(Vec<u8>, Vec<u8>)> =
                model.range(bounds.clone()).take(limit).map(|(k, v)| (k.clone(), v.clone())).collect();
            let mut seen = Vec::new();
            let visited = db
                .scan(bounds, &mut |k, v| {
                    seen.push((k.to_vec(), v.to_vec()));
                    seen.len() < limit
                })
                .unwrap();
            assert_eq!(seen, expected, "round {round}");
            assert_eq!(visited, expected.len() as u64);
        }
    }
}
