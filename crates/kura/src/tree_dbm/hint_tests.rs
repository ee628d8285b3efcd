//! Tests of the slot hints (slot_hint.rs) on the read path of a file larger than memory
//! (pager.rs, `with_slot_read`): a writer gives every child a hint, and a page read with any
//! hint (its own, one far too small, the largest, or none) is the same page, so that a wrong
//! hint costs a second read and never a record.

#![expect(clippy::unwrap_used, reason = "a test fails loudly on the first broken expectation")]

use super::format::SLOT_HEADER_SIZE;
use super::options::DEFAULT_MAX_FILE_SIZE;
use super::page::Page;
use super::pager::Pager;
use super::slot_hint::SlotHint;
use super::TreeDbm;
use crate::dbm::{Dbm, OpenMode, Params};

#[test]
fn every_hint_reads_the_same_page_and_every_child_has_one() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("hints.kut");
    let max_page_size = 1024u32;
    let db = TreeDbm::open(&path, OpenMode::Create, &Params::new().with("max_page_size", max_page_size)).unwrap();
    // Values of 0 to 199 bytes, in an order that splits leaves all over the tree.
    for n in 0..3_000u32 {
        let key = format!("key{:06}", n * 7919 % 3_000);
        db.set(key.as_bytes(), &vec![b'v'; (n % 200) as usize], true).unwrap();
    }
    db.close().unwrap();
    let mut pager = Pager::open(&path, false, 4096, DEFAULT_MAX_FILE_SIZE).unwrap();
    pager.limit_memory(Some(4096));
    assert!(pager.exceeds_memory(), "the test reads with `pread`, the path the hints size");
    let unit = pager.hint_unit().unwrap();
    let smallest = unit.hint(1);
    let largest = unit.hint((SLOT_HEADER_SIZE as u64) + u64::from(max_page_size));
    let mut stack = vec![(pager.header().root, SlotHint::UNKNOWN)];
    let mut children = 0;
    while let Some((offset, hint)) = stack.pop() {
        let (page, _) = pager.decode_page_sized(offset, hint).unwrap();
        let expected = format!("{page:?}");
        for other in [SlotHint::UNKNOWN, smallest, largest] {
            let (again, _) = pager.decode_page_sized(offset, other).unwrap();
            assert_eq!(format!("{again:?}"), expected, "page {offset} read with hint {other:?}");
        }
        if let Page::Branch(branch) = page {
            for index in 0..branch.len() {
                let (child, hint) = branch.child_hinted(index).unwrap();
                assert_ne!(hint, SlotHint::UNKNOWN, "child {child} of branch {offset} has no hint");
                stack.push((child, hint));
                children += 1;
            }
        }
    }
    assert!(children > 100, "{children} children: too few pages to test");
}
