//! memcached's `-v` and `-vv` on stderr: at 1, connection errors (a failed read or write, an
//! idle timeout, a line too long, a connection refused over the limit) and protocol errors
//! (every `ERROR`, `CLIENT_ERROR` and `SERVER_ERROR` sent); at 2, also every connection
//! opened and closed, every request line and the first line of its reply. Lines start as
//! memcached's do: `<ID` for what a client sent or did, `>ID` for what it was sent, where ID
//! numbers the connections from 1 (memcached shows its file descriptor).
//!
//! At 2 request lines are logged as sent, keys included (as memcached logs them); bytes that
//! are not printable are escaped. Credentials of `-Y` are never logged.

use std::sync::atomic::{AtomicU64, Ordering};

/// Numbers the connections for the log.
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// The log of one connection.
#[derive(Debug, Clone, Copy)]
pub struct Log {
    id: u64,
    verbosity: u8,
}

impl Log {
    pub fn new(verbosity: u8) -> Log {
        let id = if verbosity > 0 { NEXT_ID.fetch_add(1, Ordering::Relaxed) } else { 0 };
        Log { id, verbosity }
    }

    /// Whether anything is logged: the hot path checks this before building a line.
    pub fn on(self) -> bool {
        self.verbosity > 0
    }

    /// A connection error (level 1).
    pub fn connection_error(self, what: &str) {
        if self.verbosity >= 1 {
            eprintln!("<{} {what}", self.id);
        }
    }

    /// A connection event (level 2): opened, closed.
    pub fn event(self, what: &str) {
        if self.verbosity >= 2 {
            eprintln!("<{} {what}", self.id);
        }
    }

    /// A request line and the replies it got: at level 2 both; at level 1 the reply only if it
    /// is an error.
    pub fn request(self, line: &[u8], replies: &[u8]) {
        if self.verbosity >= 2 {
            eprintln!("<{} {}", self.id, line.escape_ascii());
        }
        let first = replies.split(|b| *b == b'\n').next().unwrap_or_default();
        let first = first.strip_suffix(b"\r").unwrap_or(first);
        let error = [&b"ERROR"[..], b"CLIENT_ERROR", b"SERVER_ERROR"].iter().any(|p| first.starts_with(p));
        if !first.is_empty() && (self.verbosity >= 2 || error) {
            eprintln!(">{} {}", self.id, first.escape_ascii());
        }
    }
}
