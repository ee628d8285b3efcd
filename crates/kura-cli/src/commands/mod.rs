//! The subcommands other than `bench`, grouped by what they do to a database (and `serve`,
//! which puts one behind the memcached protocol).

pub mod engines;
pub mod import;
pub mod maintenance;
pub mod records;
pub mod serve;
pub mod transfer;

use std::path::Path;

use kura::{Dbm, OpenMode, Params};

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

/// Wraps a failed write to stdout or an output file.
pub fn write_error(target: &str) -> impl Fn(std::io::Error) -> kura::Error + '_ {
    move |e| kura::Error::io(format!("write {target}"), e)
}
