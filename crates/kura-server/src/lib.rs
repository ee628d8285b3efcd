//! `kura serve`: memcached's text protocol over any Kura engine.
//!
//! - `protocol/`: request lines parsed into typed requests, numbers, the exact reply bytes;
//! - `item.rs`: how flags, expiry and CAS are kept with the data inside a Kura value;
//! - `clock.rs`: memcached's expiry rules (relative, absolute, negative);
//! - `store.rs`: each command as one atomic operation on the database;
//! - `meta_command.rs`: the meta commands (`mg ms md ma me`);
//! - `connection.rs`: one client: pipelining, streaming replies, bounded memory;
//! - `server.rs`: accepting under a connection limit, shared state, `stats`, clean stop;
//! - `listener.rs`: TCP, TLS over TCP or a unix socket, all into the one connection loop;
//! - `tls.rs`: rustls from memcached's `ssl_*` files, the bounded handshake;
//! - `stats.rs`, `config.rs`: counters and settings;
//! - `monitoring.rs`: `stats items`, `stats slabs`, `stats sizes` (the database as one slab class);
//! - `verbose.rs`: what `-v`/`-vv` write to stderr;
//! - `failure.rs`: an engine error as the client, the log and `stats` see it;
//! - `auth.rs`: memcached's text-protocol authentication (`-Y`);
//! - `fuzz.rs`: a whole conversation from arbitrary bytes, for the fuzz target.
//!
//! docs/server.md describes the design, the item format byte by byte, and where this server
//! differs from memcached.

pub mod auth;
pub mod clock;
pub mod config;
mod connection;
pub mod failure;
pub mod fuzz;
pub mod item;
pub mod listener;
mod meta_command;
mod monitoring;
pub mod protocol;
pub mod server;
mod shared;
pub mod stats;
pub mod store;
pub mod tls;
pub mod unix_socket;
mod verbose;

pub use config::Config;
pub use listener::Address;
pub use server::{run_until_signal, Server};
pub use tls::TlsConfig;
pub use unix_socket::UnixSocket;
