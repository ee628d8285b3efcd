//! `kura restore` of a shard set: each shard is salvaged by its engine's restore into a new set
//! of as many shards, and reported shard by shard. A shard file that is missing, or that its
//! engine cannot restore at all, becomes an empty shard of the new set (so the new set opens
//! and keeps every other shard's records), with its siblings' caps where the engine has caps,
//! and its report says why. A restore that fails leaves no part of a new set behind.

use std::path::Path;

use super::{inner, naming, ShardDbm};
use crate::dbm::{OpenMode, Params};
use crate::engine::{Engine, RestoreReport};
use crate::error::{Error, ErrorKind, Result};
use crate::stats::Stat;

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
        let written = |index| naming::shard_path(dest, index, count);
        let restored = restore_shards(inner, source, dest, count).inspect_err(|_| {
            // No part of a new set is left behind by a restore that failed: a set missing
            // shards is what the user came to repair.
            for index in 0..count {
                let _ = std::fs::remove_file(written(index));
            }
        })?;
        let mut report = RestoreReport::default();
        for (index, shard) in restored.into_iter().enumerate() {
            report.records = report.records.saturating_add(shard.records);
            report.dropped_records = report.dropped_records.saturating_add(shard.dropped_records);
            report.dropped.extend(shard.dropped.iter().map(|why| format!("shard {index}: {why}")));
            report.shards.push(shard);
        }
        Ok(report)
    }
}

/// Each shard of the set under `source` restored into its place under `dest`, in shard
/// order; a shard that is missing or that its engine cannot restore at all becomes an empty
/// one, made after the others so that it can take their caps.
fn restore_shards(inner: &Engine, source: &Path, dest: &Path, count: usize) -> Result<Vec<RestoreReport>> {
    let mut shards: Vec<Option<RestoreReport>> = Vec::with_capacity(count);
    let mut unrestorable = Vec::new();
    for index in 0..count {
        let from = naming::shard_path(source, index, count);
        match inner.restore(&from, &naming::shard_path(dest, index, count)) {
            Ok(shard) => shards.push(Some(shard)),
            Err(e) if e.kind() == ErrorKind::BrokenData || e.is_not_found() => {
                shards.push(None);
                unrestorable.push((index, e));
            }
            Err(e) => return Err(e),
        }
    }
    if !unrestorable.is_empty() {
        let params = empty_shard_params(inner, dest, count, &shards)?;
        for (index, why) in unrestorable {
            inner.open(&naming::shard_path(dest, index, count), OpenMode::Truncate, &params)?.close()?;
            if let Some(slot) = shards.get_mut(index) {
                *slot = Some(RestoreReport {
                    dropped: vec![format!("nothing restored ({}), an empty shard written in its place", why.message())],
                    ..RestoreReport::default()
                });
            }
        }
    }
    shards
        .into_iter()
        .map(|shard| shard.ok_or_else(|| Error::internal("restore_shards gives every shard a report")))
        .collect()
}

/// The parameters of an empty shard put in place of one that could not be restored: the
/// caps its restored siblings have (`Engine::shared_caps`: a cache cannot be made without its
/// record cap, and each shard holds its share of the set's), none for an engine without caps.
fn empty_shard_params(inner: &Engine, dest: &Path, count: usize, shards: &[Option<RestoreReport>]) -> Result<Params> {
    let mut params = Params::new();
    if inner.shared_caps.is_empty() {
        return Ok(params);
    }
    let Some(sibling) = shards.iter().position(Option::is_some) else {
        return Err(Error::new(
            ErrorKind::BrokenData,
            format!(
                "{}: no shard of the set could be restored, so nothing tells the caps ({}) of the \
                 empty shards that would replace them",
                dest.display(),
                inner.shared_caps.join(", ")
            ),
        ));
    };
    let stats = inner.open(&naming::shard_path(dest, sibling, count), OpenMode::ReadOnly, &Params::new())?.inspect()?;
    for (name, stat) in stats.entries() {
        if let (true, Stat::Number(value)) = (inner.shared_caps.contains(&name.as_str()), stat) {
            params = params.with(&name, value);
        }
    }
    Ok(params)
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
