//! `kura check PATH`: reads every record and page of a database and says what is damaged.
//!
//! Prints `checked records=N pages=P problems=M`, then one `problem: ...` line for each of
//! the first problems found. A clean database exits 0; a damaged one ends with a BrokenData
//! error, which exits 3 with the hint to restore it (exit.rs).

use std::path::Path;

use kura::{Error, Params};

use super::print_line;

pub fn check(path: &Path, params: &Params) -> kura::Result<()> {
    let report = kura::registry::check(path, params)?;
    print_line(format_args!("checked records={} pages={} problems={}", report.records, report.pages, report.problems))?;
    for problem in &report.first_problems {
        print_line(format_args!("problem: {problem}"))?;
    }
    if report.is_clean() {
        return Ok(());
    }
    let shown = report.first_problems.len() as u64;
    let more = if report.problems > shown { format!(" ({shown} shown)") } else { String::new() };
    let problems = if report.problems == 1 { "1 problem".to_string() } else { format!("{} problems", report.problems) };
    Err(Error::broken(format!("{}: damaged, {problems} found{more}", path.display())))
}
