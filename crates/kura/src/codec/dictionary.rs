//! Training the zstd dictionary of the `zstd-dict` codec from a sample of the records.
//!
//! Small records compress poorly on their own because each starts with an empty window; a
//! dictionary built from typical records gives every record that shared history. The sample
//! is taken evenly over the records seen (reservoir sampling), so a data set sorted by key
//! or by time does not train only on its head.

use crate::error::{Error, Result};
use crate::split_mix::SplitMix64;

/// Default dictionary size. Measured on the dictionary data set (JSON values of ~540 bytes):
/// larger dictionaries keep shrinking the file a little, while every open pays for loading it.
pub const DEFAULT_DICTIONARY_SIZE: usize = 256 * 1024;
/// zstd recommends about 100 times the dictionary size of samples.
const SAMPLE_BUDGET_FACTOR: usize = 100;
/// Fewer samples than this make a useless dictionary; training is skipped.
const MIN_SAMPLES: usize = 16;

/// Collects samples, then trains. Feed it every record (or a prefix), then call `train`.
pub struct DictionaryTraining {
    dictionary_size: usize,
    budget: usize,
    samples: Vec<Vec<u8>>,
    sample_bytes: usize,
    seen: u64,
    /// Picks the samples to replace; seeded with a constant, so that the same input always
    /// trains the same dictionary.
    rng: SplitMix64,
}

impl DictionaryTraining {
    /// A training that will make a dictionary of at most `dictionary_size` bytes.
    pub fn new(dictionary_size: usize) -> DictionaryTraining {
        DictionaryTraining {
            dictionary_size,
            budget: dictionary_size.saturating_mul(SAMPLE_BUDGET_FACTOR),
            samples: Vec::new(),
            sample_bytes: 0,
            seen: 0,
            rng: SplitMix64::new(0),
        }
    }

    /// Offers one record value as a sample.
    pub fn add(&mut self, value: &[u8]) {
        if value.is_empty() {
            return;
        }
        self.seen += 1;
        if self.sample_bytes + value.len() <= self.budget {
            self.sample_bytes += value.len();
            self.samples.push(value.to_vec());
            return;
        }
        // Reservoir step: replace a random sample with probability len/seen.
        let slot = self.rng.below(self.seen);
        if let Some(old) = self.samples.get_mut(slot as usize) {
            self.sample_bytes = self.sample_bytes - old.len() + value.len();
            *old = value.to_vec();
        }
    }

    /// Bytes of samples held.
    pub fn sample_bytes(&self) -> usize {
        self.sample_bytes
    }

    /// True once the sample budget is full (the caller may stop feeding a prefix).
    pub fn is_full(&self) -> bool {
        self.sample_bytes >= self.budget / 2 && self.samples.len() >= 1000
    }

    /// Trains the dictionary; an empty vector when there is too little to learn from.
    pub fn train(self) -> Result<Vec<u8>> {
        train_dictionary(&self.samples, self.dictionary_size)
    }
}

/// Trains a zstd dictionary of at most `dictionary_size` bytes from `samples`.
pub fn train_dictionary(samples: &[Vec<u8>], dictionary_size: usize) -> Result<Vec<u8>> {
    let total: usize = samples.iter().map(Vec::len).sum();
    if samples.len() < MIN_SAMPLES || total < 1024 {
        return Ok(Vec::new());
    }
    // A dictionary larger than a tenth of the sample learns nothing more.
    let size = dictionary_size.min(total / 10).max(256);
    match zstd::dict::from_samples(samples, size) {
        Ok(dictionary) => Ok(dictionary),
        // zstd refuses samples it cannot learn from (all identical, too few): no dictionary.
        Err(e) if e.kind() == std::io::ErrorKind::Other => Ok(Vec::new()),
        Err(e) => Err(Error::invalid(format!("zstd dictionary training: {e}"))),
    }
}
