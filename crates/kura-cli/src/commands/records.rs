//! Record-level subcommands: set, get, remove, list.

use std::cmp::Ordering;
use std::io::Write;
use std::path::Path;

use kura::Comparator;
use kura::{Dbm, Error, OpenMode, Params};

use super::{key_line, open, tsv_line, write_error};

/// `kura set`: a missing database is created, with the engine parameters given (`--params`),
/// as `import` and `serve` create theirs: the commands that write records make where they
/// write, the ones that read or remove need an existing database.
pub fn set(path: &Path, params: &Params, key: &str, value: &str, no_overwrite: bool) -> kura::Result<()> {
    let db = open(path, OpenMode::Create, params)?;
    db.set(key.as_bytes(), value.as_bytes(), !no_overwrite)
        .map_err(|e| Error::new(e.kind(), format!("set {key:?}: {}", e.message())))?;
    db.close()
}

/// `kura get PATH KEY...`: the keys are looked up as one batch (`Dbm::get_many`), and line
/// i of the output is the value of key i, or empty when that key has no record. Each
/// missing key is named on stderr; the last one is returned as the NotFound error (exit 1)
/// once every line is printed, the others printed here, so each is named exactly once.
pub fn get(path: &Path, params: &Params, keys: &[String]) -> kura::Result<()> {
    let db = open(path, OpenMode::ReadOnly, params)?;
    let raw: Vec<&[u8]> = keys.iter().map(|key| key.as_bytes()).collect();
    let values = db.get_many(&raw)?;
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let mut missing = None;
    for (key, value) in keys.iter().zip(&values) {
        out.write_all(value.as_deref().unwrap_or_default())
            .and_then(|()| out.write_all(b"\n"))
            .map_err(write_error("stdout"))?;
        if value.is_none() {
            if let Some(earlier) = missing.replace(key) {
                eprintln!("kura: {}", keyed(Error::not_found(""), earlier));
            }
        }
    }
    out.flush().map_err(write_error("stdout"))?;
    db.close()?;
    match missing {
        Some(key) => Err(keyed(Error::not_found(""), key)),
        None => Ok(()),
    }
}

pub fn remove(path: &Path, params: &Params, key: &str) -> kura::Result<()> {
    let db = open(path, OpenMode::Write, params)?;
    db.remove(key.as_bytes()).map_err(|e| keyed(e, key))?;
    db.close()
}

fn keyed(error: Error, key: &str) -> Error {
    if error.is_not_found() {
        Error::not_found(format!("no record for the key {key:?}"))
    } else {
        error
    }
}

/// What `kura list` prints.
pub struct Listing {
    pub keys_only: bool,
    pub from: Option<String>,
    pub to: Option<String>,
    /// Whether `to` itself is in the range (it is not by default).
    pub inclusive: bool,
    pub reverse: bool,
    pub limit: Option<u64>,
    /// Escape keys and values (`kura::import::escape`), so that any record fits one line.
    pub escape: bool,
}

pub fn list(path: &Path, params: &Params, listing: &Listing) -> kura::Result<()> {
    let db = open(path, OpenMode::ReadOnly, params)?;
    let limit = listing.limit.unwrap_or(u64::MAX);
    let mut out = std::io::BufWriter::with_capacity(1 << 16, std::io::stdout().lock());
    let mut printed = 0u64;
    let mut line = Vec::new();
    let mut print = |key: &[u8], value: &[u8]| -> kura::Result<bool> {
        if listing.keys_only {
            key_line(key, listing.escape, &mut line)?;
        } else {
            tsv_line(key, value, listing.escape, &mut line)?;
        }
        out.write_all(&line).map_err(write_error("stdout"))?;
        printed += 1;
        Ok(printed < limit)
    };
    let ranged = listing.from.is_some() || listing.to.is_some() || listing.reverse;
    if limit > 0 {
        if ranged {
            list_range(db.as_ref(), listing, &mut print)?;
        } else {
            let mut cursor = db.cursor()?;
            let mut moved = cursor.first()?;
            while moved {
                // Printed from the record as the engine lends it (TreeDbm's without a copy).
                let mut more = Ok(true);
                cursor.record_with(&mut |key, value| more = print(key, value))?;
                if !more? {
                    break;
                }
                moved = cursor.next()?;
            }
        }
    }
    out.flush().map_err(write_error("stdout"))?;
    drop(out);
    db.close()
}

/// The engine's key order, as its stats give it (bytewise for an engine that has none of
/// its own, such as BabyDbm).
fn key_order(db: &dyn Dbm) -> kura::Result<Comparator> {
    Ok(db.inspect()?.key_order.unwrap_or(Comparator::Lexical))
}

/// Prints one record; false once the limit is reached.
type Printer<'a> = dyn FnMut(&[u8], &[u8]) -> kura::Result<bool> + 'a;

/// Prints the records from `--from` (inclusive) to `--to` (exclusive, or inclusive with
/// `--inclusive`), forwards or backwards,
/// through the engine's ordered cursor. The bounds are located by the cursor itself, so the
/// engine's comparator (bytewise or numeric) decides what lies between them.
fn list_range(db: &dyn Dbm, listing: &Listing, print: &mut Printer<'_>) -> kura::Result<()> {
    let not_ordered = |e: Error| {
        // A usage error (exit 2), as the help documents: these options do not apply to the
        // database named, whatever its contents.
        if e.kind() == kura::ErrorKind::Infeasible {
            Error::invalid(
                "--from, --to and --reverse need an ordered engine (tree, baby): this one keeps no key order",
            )
        } else {
            e
        }
    };
    let mut cursor = db.ordered_cursor().map_err(not_ordered)?;
    let mut fence = db.ordered_cursor()?;
    let (from, to) = (listing.from.as_deref().map(str::as_bytes), listing.to.as_deref().map(str::as_bytes));
    // A range whose start is not below its end holds nothing (the walk below would never
    // meet its fence, which lies behind the start).
    if let (Some(from), Some(to)) = (from, to) {
        let empty = match key_order(db)?.compare(from, to) {
            Ordering::Less => false,
            Ordering::Equal => !listing.inclusive,
            Ordering::Greater => true,
        };
        if empty {
            return Ok(());
        }
    }
    // The first key beyond the range in the direction of travel, if any: the walk stops there.
    let (mut moved, stop) = if listing.reverse {
        let moved = match to {
            Some(to) => cursor.jump_lower(to, listing.inclusive)?,
            None => cursor.last()?,
        };
        let stop = match from {
            Some(from) if fence.jump_lower(from, false)? => fence.key()?,
            _ => None,
        };
        (moved, stop)
    } else {
        let moved = match from {
            Some(from) => cursor.jump_upper(from, true)?,
            None => cursor.first()?,
        };
        // The first key at or past the end: past it with --inclusive.
        let stop = match to {
            Some(to) if fence.jump_upper(to, !listing.inclusive)? => fence.key()?,
            _ => None,
        };
        (moved, stop)
    };
    while moved {
        // Printed from the record as the engine lends it, as the unranged listing is.
        let mut more = Ok(true);
        let found = cursor.record_with(&mut |key, value| {
            more = if stop.as_deref() == Some(key) { Ok(false) } else { print(key, value) };
        })?;
        if !found || !more? {
            break;
        }
        moved = if listing.reverse { cursor.previous()? } else { cursor.next()? };
    }
    Ok(())
}
