//! The subcommands other than `bench`, grouped by what they do to a database (and `serve`,
//! which puts one behind the memcached protocol).

pub mod check;
pub mod docs;
pub mod engines;
pub mod import;
pub mod maintenance;
pub mod records;
pub mod serve;
pub mod serve_listen;
pub mod serve_options;
pub mod transfer;

use std::path::Path;

use kura::import::escape::escape;
use kura::{Dbm, Error, OpenMode, Params};

/// Opens a database, naming the path in the error.
pub fn open(path: &Path, mode: OpenMode, params: &Params) -> kura::Result<Box<dyn Dbm>> {
    kura::open(path, mode, params).map_err(|e| {
        // Name the file unless the engine's message already does.
        let shown = path.display().to_string();
        if e.message().contains(&shown) {
            e
        } else {
            kura::Error::new(e.kind(), format!("{shown}: {}", e.message()))
        }
    })
}

/// Writes the line of one record into `line`: escaped, or plain if plain TSV holds it.
pub fn tsv_line(key: &[u8], value: &[u8], escaped: bool, line: &mut Vec<u8>) -> kura::Result<()> {
    line.clear();
    if escaped {
        escape(key, line);
        line.push(b'\t');
        escape(value, line);
    } else {
        if key.contains(&b'\t') || key.contains(&b'\n') || value.contains(&b'\n') {
            return Err(Error::invalid(format!(
                "the record of key {:?} holds a tab or a line break that plain TSV cannot: give --escape \
                 (and import such an export with --escape)",
                String::from_utf8_lossy(key)
            )));
        }
        line.extend_from_slice(key);
        line.push(b'\t');
        line.extend_from_slice(value);
    }
    line.push(b'\n');
    Ok(())
}

/// Writes the line of one key into `line`: escaped, or plain if it holds no line break.
pub fn key_line(key: &[u8], escaped: bool, line: &mut Vec<u8>) -> kura::Result<()> {
    line.clear();
    if escaped {
        escape(key, line);
    } else if key.contains(&b'\n') {
        return Err(Error::invalid(format!(
            "the key {:?} holds a line break that a line per key cannot: give --escape",
            String::from_utf8_lossy(key)
        )));
    } else {
        line.extend_from_slice(key);
    }
    line.push(b'\n');
    Ok(())
}

/// Writes `line` and a line break to stdout. A failed write (a full disk, a closed
/// descriptor) is an I/O error like any other, where `println!` would panic.
pub fn print_line(line: impl std::fmt::Display) -> kura::Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}").and_then(|()| out.flush()).map_err(write_error("stdout"))
}

/// Wraps a failed write to stdout or an output file.
pub fn write_error(target: &str) -> impl Fn(std::io::Error) -> kura::Error + '_ {
    move |e| kura::Error::io(format!("write {target}"), e)
}
