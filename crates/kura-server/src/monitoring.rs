//! `stats items`, `stats slabs` and `stats sizes` in memcached 1.6.18's exact format, so that
//! the tools that scrape them (`memcached-tool`, Prometheus' `memcached_exporter`) work.
//!
//! memcached keeps items in slab classes of fixed chunk sizes, each with its own LRU. Kura
//! has no slabs: the engine stores each record as it is. So the served database is reported
//! as one class, number 1, and every field is either something the engine really knows
//! (items, bytes, evictions, the hit counters) or a fixed value documented as such in
//! docs/server.md ("Monitoring"). As in memcached, a class without items is not listed.

use std::fmt::Write as _;
use std::sync::atomic::Ordering;

use kura::Dbm;

use crate::stats::Counters;

/// The number the one class is listed under (memcached's classes start at 1).
const CLASS: u32 = 1;

/// What the engine can honestly say about its records, read once per `stats` request.
struct Class {
    /// Live records (`count`).
    items: u64,
    /// The engine's size: memory in use for an in-memory engine, the file's size otherwise
    /// (what `stats bytes` reports too).
    bytes: u64,
    /// Records the engine evicted (CacheDbm), else 0.
    evictions: u64,
    /// Expired records whose memory the engine took back (SegCacheDbm's `expired`), else 0.
    reclaimed: u64,
    /// Further records of the current average size that fit under the engine's caps; 0 for
    /// an engine without caps (nothing to count up to).
    free: u64,
}

impl Class {
    fn of(db: &dyn Dbm) -> Class {
        let stats = db.inspect().ok();
        let caps = stats.as_ref().and_then(|stats| stats.caps);
        let items = db.count().unwrap_or(0);
        let bytes = db.file_size().unwrap_or(0);
        let average = bytes.checked_div(items).unwrap_or(0).max(1);
        // Room under whichever cap the engine has; both must allow a record.
        let by_memory = caps.and_then(|caps| caps.memory).map(|cap| cap.saturating_sub(bytes) / average);
        let by_count = caps.map(|caps| caps.records.saturating_sub(items));
        let free = match (by_memory, by_count) {
            (Some(memory), Some(count)) => memory.min(count),
            (Some(one), None) | (None, Some(one)) => one,
            (None, None) => 0,
        };
        Class {
            items,
            bytes,
            evictions: caps.map_or(0, |caps| caps.evictions),
            reclaimed: stats.as_ref().and_then(|stats| stats.number("expired")).unwrap_or(0),
            free,
        }
    }

    /// The average bytes a record takes, listed as the class's chunk size.
    fn chunk_size(&self) -> u64 {
        self.bytes.div_ceil(self.items.max(1))
    }
}

/// `stats items`: memcached's 28 fields per class, in its order.
pub(crate) fn items(db: &dyn Dbm, counters: &Counters, text: &mut String) {
    let class = Class::of(db);
    if class.items == 0 {
        return;
    }
    let hits = counters.get_hits.load(Ordering::Relaxed);
    let fields: [(&str, u64); 28] = [
        ("number", class.items),
        ("number_hot", 0),
        ("number_warm", 0),
        // One LRU (CacheDbm's), the one evictions come from: memcached's cold one.
        ("number_cold", class.items),
        ("age_hot", 0),
        ("age_warm", 0),
        ("age", 0),
        ("mem_requested", class.bytes),
        ("evicted", class.evictions),
        ("evicted_nonzero", 0),
        ("evicted_time", 0),
        ("outofmemory", 0),
        ("tailrepairs", 0),
        ("reclaimed", class.reclaimed),
        ("expired_unfetched", 0),
        ("evicted_unfetched", 0),
        ("evicted_active", 0),
        ("crawler_reclaimed", 0),
        ("crawler_items_checked", 0),
        ("lrutail_reflocked", 0),
        ("moves_to_cold", 0),
        ("moves_to_warm", 0),
        ("moves_within_lru", 0),
        ("direct_reclaims", 0),
        ("hits_to_hot", 0),
        ("hits_to_warm", 0),
        ("hits_to_cold", hits),
        ("hits_to_temp", 0),
    ];
    for (name, value) in fields {
        let _ = write!(text, "STAT items:{CLASS}:{name} {value}\r\n");
    }
}

/// `stats slabs`: memcached's 15 fields per class, then `active_slabs` and `total_malloced`.
pub(crate) fn slabs(db: &dyn Dbm, counters: &Counters, text: &mut String) {
    let class = Class::of(db);
    let active = u8::from(class.items > 0);
    if class.items > 0 {
        let counter = |counter: &std::sync::atomic::AtomicU64| counter.load(Ordering::Relaxed);
        let total = class.items.saturating_add(class.free);
        let fields: [(&str, u64); 15] = [
            ("chunk_size", class.chunk_size()),
            ("chunks_per_page", total),
            ("total_pages", 1),
            ("total_chunks", total),
            ("used_chunks", class.items),
            ("free_chunks", class.free),
            ("free_chunks_end", 0),
            ("get_hits", counter(&counters.get_hits)),
            ("cmd_set", counter(&counters.cmd_set)),
            ("delete_hits", counter(&counters.delete_hits)),
            ("incr_hits", counter(&counters.incr_hits)),
            ("decr_hits", counter(&counters.decr_hits)),
            ("cas_hits", counter(&counters.cas_hits)),
            ("cas_badval", counter(&counters.cas_badval)),
            ("touch_hits", counter(&counters.touch_hits)),
        ];
        for (name, value) in fields {
            let _ = write!(text, "STAT {CLASS}:{name} {value}\r\n");
        }
    }
    let _ = write!(text, "STAT active_slabs {active}\r\n");
    let _ = write!(text, "STAT total_malloced {}\r\n", if class.items > 0 { class.bytes } else { 0 });
}

/// `stats sizes`: memcached 1.6.18 answers this unless started with `-o track_sizes`, which
/// Kura has no counterpart of (it would need a histogram kept on every write).
pub(crate) fn sizes(text: &mut String) {
    text.push_str("STAT sizes_status disabled\r\n");
}

#[cfg(test)]
mod tests {
    #![expect(clippy::unwrap_used, reason = "a test fails loudly on the first broken expectation")]

    use super::*;
    use kura::Params;

    fn cache(cap_rec_num: u64) -> Box<dyn Dbm> {
        let params = Params::new().with("cap_rec_num", cap_rec_num).with("cap_mem_bytes", 1 << 20);
        kura::registry::engine("cache")
            .unwrap()
            .open(std::path::Path::new(""), kura::OpenMode::Create, &params)
            .unwrap()
    }

    #[test]
    fn an_empty_store_lists_no_class_as_memcached() {
        let (db, counters) = (cache(100), Counters::default());
        let mut text = String::new();
        items(db.as_ref(), &counters, &mut text);
        assert_eq!(text, "");
        slabs(db.as_ref(), &counters, &mut text);
        assert_eq!(text, "STAT active_slabs 0\r\nSTAT total_malloced 0\r\n");
    }

    #[test]
    fn one_class_holds_every_record_and_its_room_is_bounded_by_the_caps() {
        let (db, counters) = (cache(10), Counters::default());
        for key in ["a", "b", "c"] {
            db.set(key.as_bytes(), b"value", true).unwrap();
        }
        let mut text = String::new();
        items(db.as_ref(), &counters, &mut text);
        assert!(text.starts_with("STAT items:1:number 3\r\n"), "{text}");
        assert_eq!(text.lines().count(), 28);
        text.clear();
        slabs(db.as_ref(), &counters, &mut text);
        // Room for 7 more records by count; the memory cap allows far more.
        assert!(text.contains("STAT 1:total_chunks 10\r\nSTAT 1:used_chunks 3\r\nSTAT 1:free_chunks 7\r\n"), "{text}");
        assert!(text.ends_with(&format!("STAT active_slabs 1\r\nSTAT total_malloced {}\r\n", db.file_size().unwrap())));
    }
}
