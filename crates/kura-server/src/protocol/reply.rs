//! The reply lines, byte for byte as memcached 1.6 sends them (checked against Debian's
//! memcached 1.6.18 by `tests/against_memcached.rs`, which runs both side by side).

pub const STORED: &[u8] = b"STORED\r\n";
pub const NOT_STORED: &[u8] = b"NOT_STORED\r\n";
pub const EXISTS: &[u8] = b"EXISTS\r\n";
pub const NOT_FOUND: &[u8] = b"NOT_FOUND\r\n";
pub const DELETED: &[u8] = b"DELETED\r\n";
pub const TOUCHED: &[u8] = b"TOUCHED\r\n";
pub const END: &[u8] = b"END\r\n";
pub const OK: &[u8] = b"OK\r\n";
pub const RESET: &[u8] = b"RESET\r\n";
pub const ERROR: &[u8] = b"ERROR\r\n";
pub const BAD_FORMAT: &[u8] = b"CLIENT_ERROR bad command line format\r\n";
pub const BAD_DELETE: &[u8] = b"CLIENT_ERROR bad command line format.  Usage: delete <key> [noreply]\r\n";
pub const BAD_DATA_CHUNK: &[u8] = b"CLIENT_ERROR bad data chunk\r\n";
pub const BAD_EXPTIME: &[u8] = b"CLIENT_ERROR invalid exptime argument\r\n";
pub const BAD_DELTA: &[u8] = b"CLIENT_ERROR invalid numeric delta argument\r\n";
pub const NON_NUMERIC: &[u8] = b"CLIENT_ERROR cannot increment or decrement non-numeric value\r\n";
pub const TOO_LARGE: &[u8] = b"SERVER_ERROR object too large for cache\r\n";
pub const TOO_MANY_CONNECTIONS: &[u8] = b"ERROR Too many open connections\r\n";

/// The version this server reports: memcached's protocol level, then who answers.
pub const VERSION: &str = "1.6.18-kura";
