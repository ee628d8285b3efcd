//! Expiry times: memcached's `exptime` turned into the absolute Unix second kept in an item.
//!
//! memcached's rule: 0 never expires; a negative value is already expired; up to 30 days
//! (2,592,000 s) counts from now; anything larger is an absolute Unix time (and one in the
//! past is already expired). Items keep absolute seconds, so a served file's expiry times
//! stay right across restarts, which memcached's process-relative clock cannot offer.

use std::time::{SystemTime, UNIX_EPOCH};

/// The largest relative exptime; above it a value is an absolute Unix time.
pub const MAX_RELATIVE_SECONDS: i64 = 30 * 24 * 60 * 60;

/// The expiry stored for "never".
pub const NEVER: u32 = 0;

/// The expiry stored for "already expired": one second after the epoch, always past.
pub const EXPIRED: u32 = 1;

/// Seconds since the Unix epoch (0 if the clock is before it).
pub fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// The stored expiry of a request's `exptime`, read at `now`.
pub fn expiry_of(exptime: i64, now: u64) -> u32 {
    let absolute = match exptime {
        0 => return NEVER,
        e if e < 0 => return EXPIRED,
        e if e <= MAX_RELATIVE_SECONDS => now.saturating_add(e.unsigned_abs()),
        e => e.unsigned_abs(),
    };
    if absolute <= now {
        EXPIRED
    } else {
        // Beyond 2106 the u32 saturates: still "far in the future", never "never".
        u32::try_from(absolute).unwrap_or(u32::MAX)
    }
}

/// Whether an item with this stored expiry is gone at `now`.
pub fn is_expired(expiry: u32, now: u64) -> bool {
    expiry != NEVER && u64::from(expiry) <= now
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_thirty_day_rule_and_negative_times_follow_memcached() {
        let now = 1_800_000_000;
        assert_eq!(expiry_of(0, now), NEVER);
        assert!(is_expired(expiry_of(-1, now), now));
        assert_eq!(u64::from(expiry_of(10, now)), now + 10);
        assert_eq!(u64::from(expiry_of(MAX_RELATIVE_SECONDS, now)), now + 2_592_000);
        assert!(is_expired(expiry_of(MAX_RELATIVE_SECONDS + 1, now), now), "1970 + 30 days is past");
        assert_eq!(u64::from(expiry_of(1_900_000_000, now)), 1_900_000_000);
        assert!(!is_expired(expiry_of(10, now), now + 9));
        assert!(is_expired(expiry_of(10, now), now + 10));
        assert!(!is_expired(NEVER, u64::MAX));
    }
}
