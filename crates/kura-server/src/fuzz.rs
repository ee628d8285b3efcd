//! The entry point the `memcached_session` fuzz target (fuzz/) calls, and the corpus replay
//! in `tests/fuzz_corpus.rs` on stable: arbitrary bytes as one client's whole conversation.
//!
//! The bytes go through the same request loop as a socket's (`connection::process`), cut
//! into pieces as TCP might deliver them, against a small in-memory CacheDbm. Any reply is a
//! fine outcome; a panic, a hang, or buffered input or replies beyond the bounds the
//! connection promises (checked in `connection::replay`) is the finding. docs/fuzzing.md
//! describes the input layout.

use std::sync::Arc;

use kura::CacheDbm;
use kura::Params;

use crate::config::Config;
use crate::connection;
use crate::shared::Shared;

/// Small limits, so that short inputs reach them: the item size, the reply buffer that
/// triggers a write, the request lines.
const FUZZ_ITEM_SIZE: usize = 4096;
const FUZZ_FLUSH_BYTES: usize = 1024;
const FUZZ_MAX_LINE: usize = 256;
const FUZZ_MAX_GET_LINE: usize = 2048;
/// The cache's memory cap: small, so that evictions happen.
const FUZZ_MEMORY_BYTES: u64 = 256 << 10;

/// `data[0]`: the size of the pieces the rest arrives in (plus one); `data[1..]`: what the
/// client sends.
pub fn session(data: &[u8]) {
    let Some((&piece, conversation)) = data.split_first() else { return };
    let config = Config {
        max_item_size: FUZZ_ITEM_SIZE,
        output_flush_bytes: FUZZ_FLUSH_BYTES,
        max_line: FUZZ_MAX_LINE,
        max_get_line: FUZZ_MAX_GET_LINE,
        idle_timeout: None,
        sync_every: None,
        ..Config::default()
    };
    let params = Params::new().with("cap_rec_num", 4096).with("cap_mem_bytes", FUZZ_MEMORY_BYTES);
    let Ok(db) = CacheDbm::new(&params) else { return };
    let Ok(runtime) = tokio::runtime::Builder::new_current_thread().enable_time().build() else { return };
    runtime.block_on(async {
        let shared = Shared::new(config, Arc::new(db), 0, 1, None, 1);
        connection::replay(&shared, conversation, usize::from(piece) + 1).await;
    });
}
