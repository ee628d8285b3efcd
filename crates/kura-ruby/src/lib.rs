//! The native half of the Ruby library `kura` (`require "kura"`), loaded as
//! `kura/kura_ext.so` by ruby/lib/kura.rb, which adds the Ruby half of the API.
//!
//! - `database.rs`: `Kura::DB`, one open database, and its native methods;
//! - `walk.rs`: reading records in chunks for `each` and `range`;
//! - `batch.rs`: `Kura::Batch`, the operations of `db.batch { |b| ... }`;
//! - `check.rs`: `Kura.check`, reading and verifying a whole database;
//! - `convert.rs`: keys and values between Ruby Strings and bytes;
//! - `gvl.rs`: running engine calls with the GVL released;
//! - `errors.rs`: the `Kura::Error` classes and the mapping from `kura::ErrorKind`.

mod batch;
mod check;
mod convert;
mod database;
mod errors;
mod gvl;
mod walk;

use kura::registry::Fact;
use magnus::{function, method, prelude::*, Error, RHash, Ruby};

use crate::batch::Batch;
use crate::database::Database;

#[magnus::init(name = "kura_ext")]
fn init(ruby: &Ruby) -> Result<(), Error> {
    let module = ruby.define_module("Kura")?;
    errors::define(ruby, module)?;
    module.const_set("ENGINES", engines(ruby)?)?;
    // The crate's (workspace's) version; lib/kura/version.rb's VERSION is checked against it.
    module.const_set("NATIVE_VERSION", env!("CARGO_PKG_VERSION"))?;
    module.define_module_function("_sized_params", function!(sized_params, 2))?;
    module.define_module_function("_check", function!(check::check, 2))?;

    let db = module.define_class("DB", ruby.class_object())?;
    db.define_singleton_method("_open", function!(Database::open, 5))?;
    db.define_method("[]", method!(Database::aref, 1))?;
    db.define_method("[]=", method!(Database::aset, 2))?;
    db.define_method("_get_many", method!(Database::get_many, 1))?;
    db.define_method("key?", method!(Database::has_key, 1))?;
    db.define_method("_delete", method!(Database::remove, 1))?;
    db.define_method("size", method!(Database::size, 0))?;
    db.define_method("_walk", method!(Database::walk, 6))?;
    db.define_method("_increment", method!(Database::increment, 3))?;
    db.define_method("compare_exchange", method!(Database::compare_exchange, 3))?;
    db.define_method("write", method!(Database::write, 1))?;
    db.define_method("clear", method!(Database::clear, 0))?;
    db.define_method("_sync", method!(Database::sync, 1))?;
    db.define_method("_rebuild", method!(Database::rebuild, 1))?;
    db.define_method("stats", method!(Database::stats, 0))?;
    db.define_method("file_size", method!(Database::file_size, 0))?;
    db.define_method("close", method!(Database::close, 0))?;
    db.define_method("closed?", method!(Database::is_closed, 0))?;
    db.define_method("path", method!(Database::path, 0))?;
    db.define_method("engine", method!(Database::engine, 0))?;
    db.define_method("ordered?", method!(Database::is_ordered, 0))?;
    db.define_method("writable?", method!(Database::is_writable, 0))?;
    db.define_method("mode", method!(Database::mode, 0))?;
    db.define_method("encoding", method!(Database::encoding, 0))?;
    db.define_method("release_gvl?", method!(Database::releases_gvl, 0))?;

    let batch = module.define_class("Batch", ruby.class_object())?;
    batch.define_singleton_method("new", function!(Batch::new, 0))?;
    batch.define_method("_put", method!(Batch::put, 2))?;
    batch.define_method("_delete", method!(Batch::delete, 1))?;
    batch.define_method("size", method!(Batch::size, 0))?;
    Ok(())
}

/// The parameters the registry gives a new database of engine `name` sized for `records`
/// records where the user gives none (`import_params`: HashDbm's bucket count;
/// `bench_params`: CacheDbm's record cap), as [name, value] pairs.
fn sized_params(ruby: &Ruby, name: String, records: u64) -> Result<Vec<(String, String)>, Error> {
    let engine = kura::registry::engine(&name).map_err(|e| errors::to_ruby(ruby, e))?;
    let params = engine.import_params(records).or_defaults(&engine.bench_params(records));
    Ok(params.names().filter_map(|n| params.get(n).map(|v| (n.to_string(), v.to_string()))).collect())
}

/// `Kura::ENGINES`: the engine registry, one frozen Hash per engine (name, class,
/// extension, storage, ordered, params), for `Kura.engines` and the tests.
fn engines(ruby: &Ruby) -> Result<magnus::RArray, Error> {
    let list = ruby.ary_new();
    for engine in kura::engines() {
        let entry: RHash = ruby.hash_new();
        for (name, fact) in engine.description() {
            let key = ruby.to_symbol(name);
            match fact {
                Fact::Text(text) => entry.aset(key, text)?,
                Fact::Flag(flag) => entry.aset(key, flag)?,
                Fact::Names(names) => entry.aset(key, ruby.ary_from_iter(names.iter().copied()))?,
                // [offset, binary String] pairs.
                Fact::Marks(marks) => entry.aset(
                    key,
                    ruby.ary_from_iter(marks.iter().map(|mark| (mark.offset, ruby.str_from_slice(mark.bytes)))),
                )?,
                Fact::Nothing => entry.aset(key, ruby.qnil())?,
            }
        }
        entry.freeze();
        list.push(entry)?;
    }
    list.freeze();
    Ok(list)
}
