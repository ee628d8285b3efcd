//! A list of byte strings, each present or missing, copied end to end into one buffer: the
//! keys a batch is made of and the values it found, wherever they must outlive the memory
//! they were read from. The Python and Ruby bindings copy a batch's values out from under
//! the engine's locks with the interpreter's lock released and make the interpreter's
//! strings of them once it is back; the Ruby binding copies its keys out of Ruby strings
//! before releasing the GVL, and packs the records of each chunk its walks (`each`, `range`)
//! read; `kura bench` packs the keys it looks up.
//!
//! Why one buffer: a batch of a thousand small values as a thousand `Vec`s costs a thousand
//! allocations, more than the lookups themselves take; here a list costs a few (the buffer
//! doubles as it fills), none once a reused list has grown.

use crate::error::Result;

/// Byte strings in one buffer, in order; each item is a byte string or missing (`None`).
#[derive(Debug, Default, Clone)]
pub struct PackedBytes {
    bytes: Vec<u8>,
    /// Where each item lies in `bytes`; None for a missing item. Invariant: each span lies
    /// within `bytes`.
    spans: Vec<Option<(usize, usize)>>,
}

impl PackedBytes {
    /// An empty list with room for `items` items of `bytes` bytes in all.
    pub fn with_capacity(items: usize, bytes: usize) -> PackedBytes {
        PackedBytes { bytes: Vec::with_capacity(bytes), spans: Vec::with_capacity(items) }
    }

    /// The values of a batch of `count` keys, collected from `lookup`, which shows each key's
    /// value to its visitor with the key's index, in any order (as `Dbm::get_many_with`
    /// does, whose visitor runs under the engine's locks: this one only copies). An index at
    /// or beyond `count` is ignored; an index visited twice keeps its last value; one never
    /// visited is missing.
    pub fn collect(
        count: usize,
        lookup: impl FnOnce(&mut dyn FnMut(usize, Option<&[u8]>)) -> Result<()>,
    ) -> Result<PackedBytes> {
        let mut packed = PackedBytes { bytes: Vec::new(), spans: vec![None; count] };
        let PackedBytes { bytes, spans } = &mut packed;
        lookup(&mut |index, value| {
            if let Some(span) = spans.get_mut(index) {
                *span = value.map(|value| append(bytes, value));
            }
        })?;
        Ok(packed)
    }

    /// Adds `item` at the end of the list.
    pub fn push(&mut self, item: Option<&[u8]>) {
        let span = item.map(|item| append(&mut self.bytes, item));
        self.spans.push(span);
    }

    /// Empties the list, keeping its memory for the next one.
    pub fn clear(&mut self) {
        self.bytes.clear();
        self.spans.clear();
    }

    /// The number of items.
    pub fn len(&self) -> usize {
        self.spans.len()
    }

    /// The bytes of all items together.
    pub fn byte_len(&self) -> usize {
        self.bytes.len()
    }

    /// Whether the list has no items.
    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    /// Item `index`: None when it is missing or past the end.
    pub fn get(&self, index: usize) -> Option<&[u8]> {
        self.spans.get(index).copied().flatten().and_then(|(start, end)| self.bytes.get(start..end))
    }

    /// The items in order; None for a missing one.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = Option<&[u8]>> {
        self.spans.iter().map(|span| span.and_then(|(start, end)| self.bytes.get(start..end)))
    }

    /// The items as slices, a missing one as an empty slice: the keys of a batch, for
    /// `Dbm::get_many_with`.
    pub fn slices(&self) -> Vec<&[u8]> {
        self.iter().map(Option::unwrap_or_default).collect()
    }
}

/// Appends `item` to `bytes` and returns where it lies.
fn append(bytes: &mut Vec<u8>, item: &[u8]) -> (usize, usize) {
    let start = bytes.len();
    bytes.extend_from_slice(item);
    (start, bytes.len())
}

#[cfg(test)]
mod tests {
    #![expect(clippy::unwrap_used, reason = "a test fails loudly on the first broken expectation")]
    use super::*;
    use crate::split_mix::SplitMix64;

    fn random_item(rng: &mut SplitMix64) -> Option<Vec<u8>> {
        (rng.below(4) != 0).then(|| vec![rng.below(256) as u8; rng.below(20) as usize])
    }

    /// Random visits (any order, repeats, missing values, indices out of range) leave each
    /// index's last visited value, and None for indices never visited.
    #[test]
    fn collect_keeps_each_index_last_value_in_index_order() {
        let mut rng = SplitMix64::new(20);
        for _ in 0..200 {
            let count = rng.below(40) as usize;
            let visits: Vec<(usize, Option<Vec<u8>>)> =
                (0..rng.below(80)).map(|_| (rng.below(count as u64 + 3) as usize, random_item(&mut rng))).collect();
            let mut model: Vec<Option<Vec<u8>>> = vec![None; count];
            for (index, value) in &visits {
                if let Some(slot) = model.get_mut(*index) {
                    slot.clone_from(value);
                }
            }
            let packed = PackedBytes::collect(count, |visit| {
                for (index, value) in &visits {
                    visit(*index, value.as_deref());
                }
                Ok(())
            })
            .unwrap();
            assert_eq!(packed.len(), count);
            let got: Vec<Option<Vec<u8>>> = packed.iter().map(|v| v.map(<[u8]>::to_vec)).collect();
            assert_eq!(got, model);
        }
    }

    /// Pushed items (some missing, some empty) read back in order by `iter`, `get` and
    /// `slices`, also after `clear` and refilling.
    #[test]
    fn pushed_items_read_back_in_order() {
        let mut rng = SplitMix64::new(21);
        let mut packed = PackedBytes::default();
        for _ in 0..50 {
            packed.clear();
            let model: Vec<Option<Vec<u8>>> = (0..rng.below(30)).map(|_| random_item(&mut rng)).collect();
            for item in &model {
                packed.push(item.as_deref());
            }
            assert_eq!(packed.len(), model.len());
            assert_eq!(packed.is_empty(), model.is_empty());
            let got: Vec<Option<Vec<u8>>> = packed.iter().map(|v| v.map(<[u8]>::to_vec)).collect();
            assert_eq!(got, model);
            for (index, item) in model.iter().enumerate() {
                assert_eq!(packed.get(index), item.as_deref());
                assert_eq!(packed.slices().get(index).copied(), Some(item.as_deref().unwrap_or_default()));
            }
            assert_eq!(packed.get(model.len()), None);
        }
    }

    #[test]
    fn an_error_of_the_lookup_is_returned() {
        assert!(PackedBytes::collect(2, |_| Err(crate::Error::broken("test"))).is_err());
    }
}
