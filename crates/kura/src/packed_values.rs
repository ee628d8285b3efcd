//! The values of a batched lookup copied end to end into one buffer, for callers that must
//! hand them on after the engine's locks are released: the Python and Ruby bindings, which
//! look a batch up with their interpreter lock released and build the interpreter's strings
//! once it is back.
//!
//! Why one buffer: a batch of a thousand small values as a thousand `Vec`s costs a thousand
//! allocations, more than the lookups themselves take; here the whole batch costs two.

use crate::error::Result;

/// The values of a batch in the order of its keys; `None` for a key with no record.
#[derive(Debug, Default)]
pub struct PackedValues {
    bytes: Vec<u8>,
    /// Invariant: one per key; each `Some` span lies within `bytes`.
    spans: Vec<Option<(usize, usize)>>,
}

impl PackedValues {
    /// Collects the values of a batch of `count` keys from `lookup`, which shows each key's
    /// value to its visitor with the key's index (as `Dbm::get_many_with` does, whose
    /// visitor runs under the engine's locks: this one only copies). An index at or beyond
    /// `count` is ignored; an index visited twice keeps its last value.
    pub fn collect(
        count: usize,
        lookup: impl FnOnce(&mut dyn FnMut(usize, Option<&[u8]>)) -> Result<()>,
    ) -> Result<PackedValues> {
        let mut packed = PackedValues { bytes: Vec::new(), spans: vec![None; count] };
        let PackedValues { bytes, spans } = &mut packed;
        lookup(&mut |index, value| {
            if let Some(span) = spans.get_mut(index) {
                *span = value.map(|value| {
                    let start = bytes.len();
                    bytes.extend_from_slice(value);
                    (start, bytes.len())
                });
            }
        })?;
        Ok(packed)
    }

    /// The number of keys of the batch.
    pub fn len(&self) -> usize {
        self.spans.len()
    }

    /// Whether the batch had no keys.
    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    /// The values in the order of the keys; `None` where a key has no record.
    pub fn values(&self) -> impl ExactSizeIterator<Item = Option<&[u8]>> {
        self.spans.iter().map(|span| span.and_then(|(start, end)| self.bytes.get(start..end)))
    }
}

#[cfg(test)]
mod tests {
    #![expect(clippy::unwrap_used, reason = "a test fails loudly on the first broken expectation")]
    use super::*;
    use crate::split_mix::SplitMix64;

    /// Random visits (any order, repeats, absent values, indices out of range) leave each
    /// key's last visited value, and `None` for keys never visited.
    #[test]
    fn keeps_each_index_last_value_in_key_order() {
        let mut rng = SplitMix64::new(20);
        for _ in 0..200 {
            let count = rng.below(40) as usize;
            let visits: Vec<(usize, Option<Vec<u8>>)> = (0..rng.below(80))
                .map(|_| {
                    let index = rng.below(count as u64 + 3) as usize;
                    let value = (rng.below(4) != 0).then(|| vec![rng.below(256) as u8; rng.below(20) as usize]);
                    (index, value)
                })
                .collect();
            let mut model: Vec<Option<Vec<u8>>> = vec![None; count];
            for (index, value) in &visits {
                if let Some(slot) = model.get_mut(*index) {
                    slot.clone_from(value);
                }
            }
            let packed = PackedValues::collect(count, |visit| {
                for (index, value) in &visits {
                    visit(*index, value.as_deref());
                }
                Ok(())
            })
            .unwrap();
            assert_eq!(packed.len(), count);
            let got: Vec<Option<Vec<u8>>> = packed.values().map(|v| v.map(<[u8]>::to_vec)).collect();
            assert_eq!(got, model);
        }
    }

    #[test]
    fn an_error_of_the_lookup_is_returned() {
        let failed = PackedValues::collect(2, |_| Err(crate::Error::broken("test")));
        assert!(failed.is_err());
    }
}
