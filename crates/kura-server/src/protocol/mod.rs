//! memcached's text protocol: splitting a request line into a typed request (`text.rs`), the
//! numbers it carries (`numbers.rs`), and the exact reply lines (`reply.rs`). Nothing here
//! touches a socket or the database: the connection (`connection.rs`) drives it.

pub mod meta;
pub mod numbers;
pub mod reply;
pub mod text;
