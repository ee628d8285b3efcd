//! `Kura.check(path, **params)`: `kura check` from Ruby, with the GVL released while every
//! record is read.

use std::path::PathBuf;

use magnus::{Error, RHash, Ruby};

use crate::errors::OrRaise;
use crate::gvl::without_gvl;

/// `Kura._check(path, [[name, value], ...])`: a Hash with `:clean`, `:records`, `:pages`,
/// `:problems` (how many) and `:first_problems` (up to 20 Strings saying where and what).
pub fn check(ruby: &Ruby, path: String, params: Vec<(String, String)>) -> Result<RHash, Error> {
    let params = crate::database::params_of(params);
    let path = PathBuf::from(path);
    let report = without_gvl(|| kura::registry::check(&path, &params)).or_raise(ruby)?;
    let hash = ruby.hash_new();
    hash.aset(ruby.to_symbol("clean"), report.is_clean())?;
    hash.aset(ruby.to_symbol("records"), report.records)?;
    hash.aset(ruby.to_symbol("pages"), report.pages)?;
    hash.aset(ruby.to_symbol("problems"), report.problems)?;
    let problems = ruby.ary_new();
    for problem in &report.first_problems {
        problems.push(ruby.str_new(&problem.to_string()))?;
    }
    hash.aset(ruby.to_symbol("first_problems"), problems)?;
    Ok(hash)
}
