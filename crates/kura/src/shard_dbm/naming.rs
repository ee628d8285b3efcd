//! Shard file names (`BASE-00002-of-00004`, Tkrzw's scheme) and finding a set in a directory.
//!
//! The names carry the whole layout: a set opened without `num_shards` takes its shard count
//! from the files beside the base path, so nothing else (no manifest) is written. Reading the
//! directory is also where a damaged set shows: a missing shard, or files of two sets of
//! different sizes under one base name, are refused before any shard is opened.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::file::{FileLock, LockMode};

/// The most shards a set may have: every shard holds a file descriptor and its own caches,
/// and the five-digit names stop at 99999 anyway.
pub const MAX_SHARDS: usize = 4096;

/// The path of shard `index` of a set of `count` under `base`.
pub fn shard_path(base: &Path, index: usize, count: usize) -> PathBuf {
    let mut name = base.as_os_str().to_os_string();
    name.push(format!("-{index:05}-of-{count:05}"));
    PathBuf::from(name)
}

/// `(index, count)` if `file_name` is `base_name` followed by `-DDDDD-of-DDDDD`.
fn parse_shard_name(file_name: &str, base_name: &str) -> Option<(usize, usize)> {
    let suffix = file_name.strip_prefix(base_name)?.strip_prefix('-')?;
    let (index, count) = suffix.split_once("-of-")?;
    let digits = |text: &str| -> Option<usize> {
        if text.len() == 5 && text.bytes().all(|b| b.is_ascii_digit()) {
            text.parse().ok()
        } else {
            None
        }
    };
    Some((digits(index)?, digits(count)?))
}

/// Every shard file of `base` in its directory, as `(index, count, path)`, sorted.
pub fn existing_shards(base: &Path) -> Result<Vec<(usize, usize, PathBuf)>> {
    let Some(base_name) = base.file_name().and_then(|n| n.to_str()) else {
        return Ok(Vec::new());
    };
    let directory = match base.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent.to_path_buf(),
        _ => PathBuf::from("."),
    };
    // The set's own path leads the message: it is what the caller opened.
    let context = || format!("find the shards of {}: read directory {}", base.display(), directory.display());
    let entries = match std::fs::read_dir(&directory) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::io(context(), e)),
    };
    let mut found = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| Error::io(context(), e))?;
        let name = entry.file_name();
        if let Some((index, count)) = name.to_str().and_then(|n| parse_shard_name(n, base_name)) {
            found.push((index, count, shard_path(base, index, count)));
        }
    }
    found.sort();
    Ok(found)
}

/// Whether any shard file of `base` exists (what makes a plain path open as a shard set).
pub fn has_shards(base: &Path) -> bool {
    existing_shards(base).is_ok_and(|found| !found.is_empty())
}

/// The shard count of the complete set under `base`; `None` when there is no shard file.
/// Files of two set sizes, a shard index beyond its count, or a missing shard are BrokenData:
/// opening such a set would silently lose the missing shard's records.
pub fn find_set(base: &Path) -> Result<Option<usize>> {
    let found = existing_shards(base)?;
    let counts: BTreeSet<usize> = found.iter().map(|(_, count, _)| *count).collect();
    let Some(&count) = counts.first() else {
        return Ok(None);
    };
    if counts.len() > 1 {
        let sizes: Vec<String> = counts.iter().map(|c| format!("-of-{c:05}")).collect();
        return Err(Error::broken(format!(
            "{}: shard files of sets of different sizes lie side by side ({}); remove the stale set",
            base.display(),
            sizes.join(" beside ")
        )));
    }
    check_count(count).map_err(|e| Error::broken(format!("{}: {}", base.display(), e.message())))?;
    if let Some((index, _, path)) = found.iter().find(|(index, _, _)| *index >= count) {
        return Err(Error::broken(format!(
            "{}: shard index {index} is beyond the set's {count} shards",
            path.display()
        )));
    }
    let present: BTreeSet<usize> = found.iter().map(|(index, _, _)| *index).collect();
    if let Some(missing) = (0..count).find(|i| !present.contains(i)) {
        return Err(Error::broken(format!(
            "shard file {} is missing: the set has {count} shards and its records are split among all of them",
            shard_path(base, missing, count).display()
        )));
    }
    Ok(Some(count))
}

/// Checks a shard count given by the user or found in names.
pub fn check_count(count: usize) -> Result<usize> {
    if (1..=MAX_SHARDS).contains(&count) {
        Ok(count)
    } else {
        Err(Error::invalid(format!("num_shards {count} is outside 1..={MAX_SHARDS}")))
    }
}

/// Removes every shard file of `base`, of any set size (a new set replacing an old one, or a
/// benchmark cleaning up). Each file is locked first, all of them before any goes: a set that
/// a writer or reader holds open is a Locked error and loses no file, as a single database
/// opened in truncate mode is refused while another handle holds it (unlinking a file does
/// not wait for its lock, so the holder would go on writing into a file nobody can open).
pub fn remove_shards(base: &Path) -> Result<()> {
    let found = existing_shards(base)?;
    let mut held = Vec::with_capacity(found.len());
    for (_, _, path) in &found {
        let file = match std::fs::OpenOptions::new().read(true).open(path) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(Error::io(format!("open {}", path.display()), e)),
        };
        let lock = FileLock::acquire(&file, path, LockMode::Exclusive)?;
        held.push((file, lock));
    }
    for (_, _, path) in found {
        match std::fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::io(format!("remove {}", path.display()), e)),
        }
    }
    // The locks go with their files' descriptors, once every file is gone.
    drop(held);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_strangers_are_ignored() {
        let path = shard_path(Path::new("/d/casket.kuh"), 2, 4);
        assert_eq!(path, PathBuf::from("/d/casket.kuh-00002-of-00004"));
        assert_eq!(parse_shard_name("casket.kuh-00002-of-00004", "casket.kuh"), Some((2, 4)));
        assert_eq!(parse_shard_name("casket.kuh-2-of-4", "casket.kuh"), None);
        assert_eq!(parse_shard_name("casket.kuh-00002-of-00004.tmp", "casket.kuh"), None);
        assert_eq!(parse_shard_name("other.kuh-00002-of-00004", "casket.kuh"), None);
        assert!(check_count(0).is_err());
        assert!(check_count(MAX_SHARDS + 1).is_err());
    }
}
