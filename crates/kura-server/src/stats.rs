//! The counters behind `stats`, shared by every connection (relaxed atomics: each counter is
//! exact, the set of them is not a snapshot, as in memcached).

use std::sync::atomic::{AtomicU64, Ordering};

macro_rules! counters {
    ($($name:ident),* $(,)?) => {
        /// One atomic per counter `stats` reports; the names are memcached's.
        #[derive(Debug, Default)]
        pub struct Counters {
            $(pub $name: AtomicU64,)*
        }

        impl Counters {
            /// Every counter as `(name, value)`, in declaration order.
            pub fn values(&self) -> Vec<(&'static str, u64)> {
                vec![$((stringify!($name), self.$name.load(Ordering::Relaxed)),)*]
            }

            /// Sets every counter back to 0 (`stats reset`).
            pub fn reset(&self) {
                $(self.$name.store(0, Ordering::Relaxed);)*
            }
        }
    };
}

counters!(
    cmd_get,
    cmd_set,
    cmd_flush,
    cmd_touch,
    cmd_meta,
    get_hits,
    get_misses,
    get_expired,
    delete_misses,
    delete_hits,
    incr_misses,
    incr_hits,
    decr_misses,
    decr_hits,
    cas_misses,
    cas_hits,
    cas_badval,
    touch_hits,
    touch_misses,
    store_too_large,
    store_no_memory,
    auth_cmds,
    auth_errors,
    engine_errors,
    bytes_read,
    bytes_written,
    total_items,
);

/// Connection counts, kept apart because the accept loop, not a command, moves them.
#[derive(Debug, Default)]
pub struct Connections {
    pub current: AtomicU64,
    pub total: AtomicU64,
    pub rejected: AtomicU64,
}

/// Adds one to a counter.
pub fn bump(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

/// Adds `n` to a counter.
pub fn add(counter: &AtomicU64, n: u64) {
    counter.fetch_add(n, Ordering::Relaxed);
}
