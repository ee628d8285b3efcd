//! What `kura serve` can be told: address, limits, timeouts. The defaults are memcached's
//! where memcached has one (port 11211, 1024 connections, 1 MiB items, 64 MiB of memory).

use std::path::PathBuf;
use std::time::Duration;

use crate::tls::TlsConfig;
use crate::unix_socket::UnixSocket;

/// memcached's default memory limit (`-m 64`).
pub const DEFAULT_MEMORY_LIMIT: u64 = 64 << 20;

#[derive(Debug, Clone)]
pub struct Config {
    /// Address to bind, `127.0.0.1` unless told otherwise.
    pub host: String,
    /// TCP port; 0 picks a free one (the tests do).
    pub port: u16,
    /// `-s`: listen on this unix socket instead of TCP (as memcached's -s).
    pub unix_socket: Option<UnixSocket>,
    /// `-Z`: TLS on the TCP port, with these certificates.
    pub tls: Option<TlsConfig>,
    /// The largest data block a storage command may carry, in bytes. Unlike memcached's
    /// `-I`, it counts the value alone, not the key and item header.
    pub max_item_size: usize,
    /// Open connections allowed at once; one more is told `ERROR Too many open connections`.
    pub max_connections: usize,
    /// Close a connection that sends nothing (or reads nothing we send) for this long.
    pub idle_timeout: Option<Duration>,
    /// Force the database to the device this often (`synchronize(hard)`), for a served file.
    pub sync_every: Option<Duration>,
    /// The bound of a request line other than a retrieval (memcached's 2048).
    pub max_line: usize,
    /// The bound of a `get`/`gets`/`gat`/`gats` line, which may carry many keys.
    pub max_get_line: usize,
    /// Replies are written out whenever this many bytes are waiting: the bound on what one
    /// connection holds for a huge multi-get or pipeline.
    pub output_flush_bytes: usize,
    /// Worker threads of the runtime; 0 means one per CPU.
    pub threads: usize,
    /// Reported as `limit_maxbytes` (the engine enforces it, e.g. CacheDbm's cap_mem_bytes).
    pub memory_limit: u64,
    /// False with `-M`: the engine refuses writes when full instead of evicting (CacheDbm's
    /// `policy=noevict`, which the CLI asks for); `stats settings` says `evictions off`.
    pub evictions: bool,
    /// False with `-C`: every item's CAS unique is 0 and CAS comparisons of storage commands
    /// never match, as in memcached -C.
    pub cas_enabled: bool,
    /// memcached's `-v` count: 1 logs connection and protocol errors, 2 each command too.
    pub verbosity: u8,
    /// `-Y`: the `user:password` file clients must authenticate against (text protocol
    /// authentication as memcached's, `auth.rs`); None serves everyone.
    pub auth_file: Option<PathBuf>,
}

impl Config {
    /// Whether connections are encrypted, for the start-up line and the exposure warning:
    /// `-Z` on the TCP port. A unix socket (`-s`, which turns TCP off) is never encrypted,
    /// as in memcached.
    pub fn tls_enabled(&self) -> bool {
        self.tls.is_some() && self.unix_socket.is_none()
    }

    /// Whether anyone who can reach the address gets in: neither authentication nor TLS.
    pub fn unprotected(&self) -> bool {
        self.auth_file.is_none() && !self.tls_enabled()
    }
}

impl Default for Config {
    fn default() -> Config {
        Config {
            host: "127.0.0.1".to_string(),
            port: 11211,
            unix_socket: None,
            tls: None,
            max_item_size: 1 << 20,
            max_connections: 1024,
            idle_timeout: None,
            sync_every: None,
            max_line: 2048,
            max_get_line: 64 << 10,
            output_flush_bytes: 64 << 10,
            threads: 0,
            memory_limit: DEFAULT_MEMORY_LIMIT,
            evictions: true,
            cas_enabled: true,
            verbosity: 0,
            auth_file: None,
        }
    }
}
