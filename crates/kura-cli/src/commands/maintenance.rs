//! Whole-database subcommands: create, rebuild, restore, inspect.

use std::io::Write;
use std::path::Path;
use std::time::Instant;

use kura::{Error, ErrorKind, OpenMode, Params};

use super::{open, print_line, write_error};

/// Creates an empty database; one that exists already, a single file or any file of a shard
/// set (`PATH-0000i-of-0000N`, which has no file at PATH itself), is replaced only when
/// `truncate` (`--force`) asks for it.
pub fn create(path: &Path, params: &Params, truncate: bool) -> kura::Result<()> {
    if !truncate {
        if let Some(what) = existing_database(path)? {
            return Err(Error::new(ErrorKind::Duplicate, format!("{what} already exists (use --force to replace it)")));
        }
    }
    let db = open(path, OpenMode::Truncate, params)?;
    db.close()
}

/// What lies at `path` that a new database would replace: its file, or the files of a shard
/// set under it.
pub fn existing_database(path: &Path) -> kura::Result<Option<String>> {
    if path.exists() {
        return Ok(Some(path.display().to_string()));
    }
    let shards = kura::shard_dbm::existing_shards(path)?;
    Ok(shards.first().map(|(_, _, first)| {
        format!("the shard set {} ({} files: {} ...)", path.display(), shards.len(), first.display())
    }))
}

pub fn rebuild(path: &Path, params: &Params) -> kura::Result<()> {
    let started = Instant::now();
    // The engine choice is for opening; the rest describes the new layout.
    let engine = kura::registry::resolve(path, params)?;
    let db = open(path, OpenMode::Write, &Params::new().with("engine", engine.name))?;
    let size_before = db.file_size()?;
    db.rebuild(&params.without("engine"))?;
    let (count, size_after) = (db.count()?, db.file_size()?);
    db.close()?;
    print_line(format_args!(
        "rebuilt records={count} file_size_before={size_before} file_size={size_after} seconds={:.3}",
        started.elapsed().as_secs_f64()
    ))
}

pub fn restore(path: &Path, new_path: &Path, params: &Params) -> kura::Result<()> {
    if let Some(what) = existing_database(new_path)? {
        return Err(Error::new(ErrorKind::Duplicate, format!("{what} already exists; restore writes a new file")));
    }
    if let Some(name) = params.without("engine").names().next() {
        return Err(Error::invalid(format!(
            "restore takes no engine parameters ({name} given): it writes the records as the damaged file \
             held them; rebuild the restored file to change its settings"
        )));
    }
    let engine = kura::registry::resolve(path, params)?;
    // A shard set's base path carries its shards' extension (`casket.kut-00000-of-00004`).
    let sharded = engine.shard_set;
    if let Some(other) = kura::registry::engine_of_path(new_path).filter(|other| *other != engine && !sharded) {
        return Err(Error::invalid(format!(
            "{} is a {} file and {} names a {}: restore writes the same engine (use .{})",
            path.display(),
            engine.class,
            new_path.display(),
            other.class,
            engine.extension
        )));
    }
    let report = engine.restore(path, new_path)?;
    print_line(format_args!("restored records={} path={}", report.records, new_path.display()))?;
    for (index, shard) in report.shards.iter().enumerate() {
        print_line(format_args!("shard {index}: records={} dropped_records={}", shard.records, shard.dropped_records))?;
    }
    for damage in &report.dropped {
        print_line(format_args!("dropped: {damage}"))?;
    }
    Ok(())
}

pub fn inspect(path: &Path, params: &Params) -> kura::Result<()> {
    let db = open(path, OpenMode::ReadOnly, params)?;
    let mut out = std::io::stdout().lock();
    for (name, value) in db.inspect()?.entries() {
        writeln!(out, "{name}={value}").map_err(write_error("stdout"))?;
    }
    out.flush().map_err(write_error("stdout"))?;
    db.close()
}
