//! The file layer: memory-mapped database files, the inter-process lock, and atomic
//! replacement of a file by a rebuilt one.

mod advice_thread;
mod append_order;
mod appender;
mod lock;
mod mapped;
mod open;
mod prefetch;
mod replace;
#[cfg(feature = "internals")]
pub mod sync_probe;
#[cfg(not(feature = "internals"))]
pub(crate) mod sync_probe;

pub use advice_thread::AdviceThread;
pub use appender::{AppendWrite, Exclusive, MappedAppender, Published};
pub use lock::{FileLock, LockMode};
pub use mapped::{allocate, LentBytes, MappedFile};
pub use open::{not_regular, open_regular_file};
pub use prefetch::{prefetch, prefetch_range, prefetch_slice};
pub use replace::{remove_if_exists, replace_file, sibling_path, sync_existing, sync_parent};
