//! Whole-database subcommands: create, rebuild, restore, inspect.

use std::io::Write;
use std::path::Path;
use std::time::Instant;

use kura::{Error, ErrorKind, OpenMode, Params};

use super::{open, print_line, write_error};

pub fn create(path: &Path, params: &Params, truncate: bool) -> kura::Result<()> {
    if path.exists() && !truncate {
        return Err(Error::new(
            ErrorKind::Duplicate,
            format!("{} already exists (use --truncate to replace it)", path.display()),
        ));
    }
    let db = open(path, OpenMode::Truncate, params)?;
    db.close()
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
    if new_path.exists() {
        return Err(Error::new(
            ErrorKind::Duplicate,
            format!("{} already exists; restore writes a new file", new_path.display()),
        ));
    }
    if let Some(name) = params.without("engine").names().next() {
        return Err(Error::invalid(format!(
            "restore takes no engine parameters ({name} given): it writes the records as the damaged file \
             held them; rebuild the restored file to change its settings"
        )));
    }
    let engine = kura::registry::resolve(path, params)?;
    // A shard set's base path carries its shards' extension (`casket.kut-00000-of-00004`).
    let sharded = engine.name == "shard";
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
    for damage in &report.dropped {
        print_line(format_args!("dropped: {damage}"))?;
    }
    Ok(())
}

pub fn inspect(path: &Path, params: &Params) -> kura::Result<()> {
    let db = open(path, OpenMode::ReadOnly, params)?;
    let mut out = std::io::stdout().lock();
    for (name, value) in db.inspect()? {
        writeln!(out, "{name}={value}").map_err(write_error("stdout"))?;
    }
    out.flush().map_err(write_error("stdout"))?;
    db.close()
}
