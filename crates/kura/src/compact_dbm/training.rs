//! When CompactDbm trains its `zstd-dict` dictionary, and the facts it keeps about the
//! training that made the dictionary it has (shown by `inspect`, kept in the snapshot).
//!
//! A database made with `zstd-dict` (the default codec) starts without a dictionary and
//! compresses like `zstd` until it has records enough to learn from. Three things train one:
//! a `write_batch` large enough to be a sample on its own (before its buckets are encoded), a
//! `rebuild` (on every record), and, for tables filled by single writes, the table reaching
//! `AUTO_TRAIN` (checked by the write that crosses it; docs/compact.md, "zstd-dict").

use std::time::{SystemTime, UNIX_EPOCH};

/// The fewest records a batch must bring for the first dictionary to be trained on it: a
/// smaller sample would make a poor dictionary that every bucket then carries.
pub const MIN_BATCH_RECORDS: usize = 1000;

/// When a table filled by single writes (or small batches) trains its dictionary.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AutoTraining {
    /// Never on fewer records than this (as for a batch).
    pub min_records: u64,
    /// Once the raw records reach this many bytes (the sample the dictionary learns from:
    /// a dictionary is at most a tenth of its sample, `codec/dictionary.rs`),
    pub raw_bytes: u64,
    /// or once this many records arrived, whatever their size (short records).
    pub records: u64,
}

/// The default (parameters `train_bytes` and `train_records`): 8 MiB of records (a dictionary
/// of up to about 800 KiB; 15,000 records of the dictionary data set) or 65,536 records (3 MB
/// of 50-byte session records). Until then the table is small, and the buckets encoded without
/// a dictionary are re-encoded with it when it comes.
pub const AUTO_TRAIN: AutoTraining =
    AutoTraining { min_records: MIN_BATCH_RECORDS as u64, raw_bytes: 8 << 20, records: 1 << 16 };

impl AutoTraining {
    /// Whether a table of `records` records and `raw_bytes` raw bytes has enough to train on.
    pub fn is_due(&self, records: u64, raw_bytes: u64) -> bool {
        records >= self.min_records && (raw_bytes >= self.raw_bytes || records >= self.records)
    }

    /// The same test on one lock group's share of the table (the hash spreads records evenly
    /// over `groups` groups): cheap enough for every write to ask under its group's lock,
    /// before the whole table is counted.
    pub fn is_due_in_group(&self, records: u64, raw_bytes: u64, groups: u64) -> bool {
        self.is_due(records.saturating_mul(groups), raw_bytes.saturating_mul(groups))
    }
}

/// What started a training.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trigger {
    /// The table reached `AUTO_TRAIN` through single writes or small batches.
    Auto,
    /// A `write_batch` of `MIN_BATCH_RECORDS` or more (as `kura import` writes).
    Batch,
    /// `rebuild`.
    Rebuild,
}

impl Trigger {
    /// Its id in the snapshot's layout record (0 is "no training known").
    pub fn id(self) -> u8 {
        match self {
            Trigger::Auto => 1,
            Trigger::Batch => 2,
            Trigger::Rebuild => 3,
        }
    }

    /// The trigger of snapshot id `id`; None for 0 and unknown ids.
    pub fn from_id(id: u8) -> Option<Trigger> {
        [Trigger::Auto, Trigger::Batch, Trigger::Rebuild].into_iter().find(|t| t.id() == id)
    }

    /// Its name in `inspect` (`dict_trigger`).
    pub fn name(self) -> &'static str {
        match self {
            Trigger::Auto => "auto",
            Trigger::Batch => "batch",
            Trigger::Rebuild => "rebuild",
        }
    }
}

/// The training that made the database's dictionary.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Trained {
    /// When, in Unix seconds.
    pub at: u64,
    /// The records the table (or the batch) held: what the sample was drawn from.
    pub records: u64,
    pub trigger: Trigger,
}

impl Trained {
    /// A training that happens now.
    pub fn now(records: u64, trigger: Trigger) -> Trained {
        let at = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
        Trained { at, records, trigger }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_training_waits_for_enough_records_and_bytes() {
        let policy = AUTO_TRAIN;
        assert!(!policy.is_due(999, u64::MAX), "never on fewer than min_records");
        assert!(!policy.is_due(1000, (8 << 20) - 1));
        assert!(policy.is_due(1000, 8 << 20));
        assert!(policy.is_due(1 << 16, 0));
        assert!(!policy.is_due((1 << 16) - 1, 1 << 20));
        // A group's share: 1/256 of the table.
        assert!(policy.is_due_in_group(256, 1 << 15, 256));
        assert!(!policy.is_due_in_group(255, 1 << 14, 256));
    }

    #[test]
    fn triggers_round_trip_through_their_ids() {
        for trigger in [Trigger::Auto, Trigger::Batch, Trigger::Rebuild] {
            assert_eq!(Trigger::from_id(trigger.id()), Some(trigger));
        }
        assert_eq!(Trigger::from_id(0), None);
        assert_eq!(Trigger::from_id(9), None);
    }
}
