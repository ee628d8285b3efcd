//! Record expiry, for the engines that can drop a record once its time has passed
//! (SegCacheDbm): the typed instant a caller attaches to a write (`Dbm::process_expiring`)
//! and the clock an engine reads it against, which a test can replace by a hand-moved one.
//!
//! An expiry is a Unix second, as memcached's absolute `exptime` and kura-server's item
//! header keep it: a record is expired from that second on (`expiry <= now`), the rule
//! kura-server's `clock::is_expired` applies, so that the engine and the server never disagree
//! on whether an item is there. 32 bits reach the year 2106.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

/// The second a record expires at: from then on it is never returned. Invariant: not 0
/// (the server's "never"), so `Option<Expiry>` is "maybe never" with no second meaning.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Expiry(std::num::NonZeroU32);

impl Expiry {
    /// The expiry at Unix second `seconds`; None for 0, which means "never" where expiry is
    /// a number (memcached, the server's item header). Seconds beyond 32 bits saturate: still
    /// far in the future, never "never".
    pub fn at_unix_seconds(seconds: u64) -> Option<Expiry> {
        std::num::NonZeroU32::new(u32::try_from(seconds).unwrap_or(u32::MAX)).map(Expiry)
    }

    /// The Unix second it expires at.
    pub fn unix_seconds(self) -> u32 {
        self.0.get()
    }

    /// Whether a record with this expiry is gone at `now` (Unix seconds).
    pub fn has_passed(self, now: u64) -> bool {
        u64::from(self.0.get()) <= now
    }
}

/// Where an engine reads the time its records' expiry is compared with.
#[derive(Debug, Clone, Default)]
pub enum Clock {
    /// The system's wall clock, in Unix seconds (the default).
    #[default]
    System,
    /// A clock that stands still until moved (`ManualClock`), for tests.
    Manual(ManualClock),
}

impl Clock {
    /// Unix seconds now (0 if the system clock is before 1970).
    pub fn now(&self) -> u64 {
        match self {
            Clock::System => SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs()),
            Clock::Manual(clock) => clock.now(),
        }
    }
}

/// A clock shared by a test and the engine it drives: it shows what it was last set to.
#[derive(Debug, Clone, Default)]
pub struct ManualClock(Arc<AtomicU64>);

impl ManualClock {
    /// A clock showing Unix second `now`.
    pub fn new(now: u64) -> ManualClock {
        ManualClock(Arc::new(AtomicU64::new(now)))
    }

    /// The second it shows.
    pub fn now(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }

    /// Moves it forward by `seconds`.
    pub fn advance(&self, seconds: u64) {
        self.0.fetch_add(seconds, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_expiry_has_passed_from_its_second_on() {
        assert_eq!(Expiry::at_unix_seconds(0), None, "0 is never, not an instant");
        let expiry = Expiry::at_unix_seconds(100).unwrap_or_else(|| unreachable!());
        assert!(!expiry.has_passed(99));
        assert!(expiry.has_passed(100));
        assert_eq!(Expiry::at_unix_seconds(1 << 40).map(Expiry::unix_seconds), Some(u32::MAX));
        let manual = ManualClock::new(5);
        let clock = Clock::Manual(manual.clone());
        manual.advance(3);
        assert_eq!(clock.now(), 8);
        assert!(Clock::System.now() > 1_700_000_000);
    }
}
