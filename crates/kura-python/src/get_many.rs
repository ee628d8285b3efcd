//! `db.get_many(keys)`: many lookups in one call, the batch run with the GIL released.
//!
//! The keys are converted while the GIL is held (a key that is not bytes or str is a
//! TypeError before anything is looked up); then the engine looks the batch up with the GIL
//! released (`Dbm::get_many_with`, which the hash engines and the tree run as one pipelined
//! or sorted pass), copying the values end to end into one buffer, one allocation for the
//! whole batch; the Python objects are made from that buffer once the GIL is back.

use crate::engine::Engine;

/// The values of a batch, in the caller's order, in one buffer.
pub struct Fetched {
    bytes: Vec<u8>,
    /// Where each key's value lies in `bytes`; None for a key with no record.
    spans: Vec<Option<(usize, usize)>>,
}

impl Fetched {
    /// The values in the order of the keys; None where a key has no record.
    pub fn values(&self) -> impl Iterator<Item = Option<&[u8]>> {
        self.spans.iter().map(|span| span.and_then(|(start, end)| self.bytes.get(start..end)))
    }
}

/// Looks up `keys` in `engine`; runs without the GIL.
pub fn fetch(engine: &Engine, keys: &[&[u8]]) -> kura::Result<Fetched> {
    let mut fetched = Fetched { bytes: Vec::new(), spans: vec![None; keys.len()] };
    let Fetched { bytes, spans } = &mut fetched;
    engine.get_many_with(keys, &mut |index, value| {
        if let (Some(value), Some(span)) = (value, spans.get_mut(index)) {
            let start = bytes.len();
            bytes.extend_from_slice(value);
            *span = Some((start, bytes.len()));
        }
    })?;
    Ok(fetched)
}
