//! `kura restore` of a shard set: each shard is salvaged by its engine's restore into a new set
//! of as many shards, and reported shard by shard. A shard file that is missing, or that its
//! engine cannot restore at all, becomes an empty shard of the new set (so the new set opens
//! and keeps every other shard's records), and its report says why.

use std::path::Path;

use super::{inner, naming, ShardDbm};
use crate::dbm::{OpenMode, Params};
use crate::engine::{Engine, RestoreReport};
use crate::error::{Error, ErrorKind, Result};

impl ShardDbm {
    /// Salvages every shard of the set under `source` with its engine's restore into a new
    /// set of as many shards under `dest`; reports the records copied and dropped over the set
    /// and in `shards`, shard by shard (a `dropped` line of the set names its shard).
    pub fn restore_set(source: &Path, dest: &Path, engines: &'static [Engine]) -> Result<RestoreReport> {
        let count = shard_count(source)?;
        // Any shard file there, even of a damaged or mixed set, is a database not to overwrite.
        if naming::has_shards(dest) || dest.exists() {
            return Err(Error::new(
                ErrorKind::Duplicate,
                format!("{}: a database already exists there", dest.display()),
            ));
        }
        let inner = inner::engine_for_restore(engines, source, count)?;
        let mut report = RestoreReport::default();
        for index in 0..count {
            let from = naming::shard_path(source, index, count);
            let to = naming::shard_path(dest, index, count);
            let shard = match inner.restore(&from, &to) {
                Ok(shard) => shard,
                Err(e) if e.kind() == ErrorKind::BrokenData || e.is_not_found() => {
                    inner.open(&to, OpenMode::Truncate, &Params::new())?.close()?;
                    RestoreReport {
                        dropped: vec![format!(
                            "nothing restored ({}), an empty shard written in its place",
                            e.message()
                        )],
                        ..RestoreReport::default()
                    }
                }
                Err(e) => return Err(e),
            };
            report.records = report.records.saturating_add(shard.records);
            report.dropped_records = report.dropped_records.saturating_add(shard.dropped_records);
            report.dropped.extend(shard.dropped.iter().map(|why| format!("shard {index}: {why}")));
            report.shards.push(shard);
        }
        Ok(report)
    }
}

/// The shard count of the set under `source`, as `naming::find_set` gives it, or, when shard
/// files are missing, as the names of those present agree on (a restore keeps the others).
fn shard_count(source: &Path) -> Result<usize> {
    match naming::find_set(source) {
        Ok(Some(count)) => Ok(count),
        Ok(None) => Err(Error::not_found(format!("{}: no shard files", source.display()))),
        Err(e) => {
            let found = naming::existing_shards(source)?;
            let count = found.first().map(|(_, count, _)| *count);
            let agree = found.iter().all(|(index, of, _)| Some(*of) == count && *index < *of);
            match count {
                Some(count) if agree => Ok(count),
                _ => Err(e),
            }
        }
    }
}
