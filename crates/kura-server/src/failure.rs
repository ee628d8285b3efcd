//! What a failing engine looks like from outside: the client gets `SERVER_ERROR <kind>:
//! <message>` (never a miss or a made-up reason), stderr gets a line with the command and the
//! key's length (not the key, which may be private), and `stats engine_errors` counts it. A
//! served file going bad then shows as errors, not as a cold cache.
//!
//! One exception, memcached's own case: a Limit error (the cache is full under `-M`, or an
//! item is larger than the cache's memory share) is memcached's `SERVER_ERROR out of memory
//! storing object`, counted in `store_no_memory` as memcached counts it, and not logged.

use kura::{Error, ErrorKind};

use crate::stats::{bump, Counters};

/// memcached's reply when an item cannot be allocated.
pub const OUT_OF_MEMORY: &[u8] = b"SERVER_ERROR out of memory storing object\r\n";

/// The reply line to `command` on a key of `key_len` bytes that failed with `error`, after
/// counting and logging it.
pub fn reply(counters: &Counters, command: &str, key_len: usize, error: &Error) -> Vec<u8> {
    if error.kind() == ErrorKind::Limit {
        bump(&counters.store_no_memory);
        return OUT_OF_MEMORY.to_vec();
    }
    bump(&counters.engine_errors);
    let text = one_line(&error.to_string());
    eprintln!("kura serve: engine error on {command} (key of {key_len} bytes): {text}");
    format!("SERVER_ERROR {text}\r\n").into_bytes()
}

/// Logs and counts a failure no client waits for (a periodic sync, a delayed flush_all).
pub fn background(counters: &Counters, what: &str, error: &Error) {
    bump(&counters.engine_errors);
    eprintln!("kura serve: engine error on {what}: {}", one_line(&error.to_string()));
}

/// `text` with its line breaks made spaces: a reply line must not end early, and a log line
/// must stay one line.
pub(crate) fn one_line(text: &str) -> String {
    text.replace(['\r', '\n'], " ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_engine_error_is_a_server_error_with_its_kind_and_counted() {
        let counters = Counters::default();
        let broken = Error::broken("record checksum mismatch\nat 4096");
        assert_eq!(
            reply(&counters, "get", 3, &broken),
            b"SERVER_ERROR broken data: record checksum mismatch at 4096\r\n".to_vec()
        );
        assert_eq!(reply(&counters, "set", 3, &Error::new(ErrorKind::Limit, "full")), OUT_OF_MEMORY.to_vec());
        let values: std::collections::HashMap<_, _> = counters.values().into_iter().collect();
        assert_eq!((values.get("engine_errors"), values.get("store_no_memory")), (Some(&1), Some(&1)));
    }
}
