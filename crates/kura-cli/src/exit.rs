//! Exit statuses and how errors are shown: `kura: <error>` on stderr, and for damaged data a
//! second line saying what to do next.

use std::path::Path;
use std::process::ExitCode;

use kura::{Error, ErrorKind};

pub const SUCCESS: u8 = 0;
pub const NOT_FOUND: u8 = 1;
pub const USAGE: u8 = 2;
pub const OTHER: u8 = 3;

/// The status for an error kind; the table is repeated in `kura --help`.
pub fn code(kind: ErrorKind) -> u8 {
    match kind {
        ErrorKind::NotFound | ErrorKind::Duplicate => NOT_FOUND,
        ErrorKind::InvalidArgument => USAGE,
        _ => OTHER,
    }
}

/// What the command that failed was doing to the database at its path, for the hint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Doing {
    /// `kura check`: it has printed the damage already; a restore is the next step.
    Checking,
    /// `kura restore`: the salvage itself failed; a check says what is damaged.
    Restoring,
    /// Anything else: a check finds all the damage, a restore copies what survives.
    Using,
}

/// Prints the error and picks the status. A closed stdout (`kura list | head`) is not an
/// error worth a message: the reader simply wanted no more. Damaged data (BrokenData) names
/// the database's file, and a hint line says how to find the rest of the damage and how to
/// save the intact records.
pub fn report(error: Error, database: Option<&Path>, doing: Doing, salvageable: bool) -> ExitCode {
    if is_broken_pipe(&error) {
        return ExitCode::SUCCESS;
    }
    let status = code(error.kind());
    match database.filter(|_| error.kind() == ErrorKind::BrokenData) {
        Some(path) => {
            eprintln!("kura: {}", error.in_file(path));
            eprintln!("kura: hint: {}", hint(path, doing, salvageable));
        }
        None => eprintln!("kura: {error}"),
    }
    ExitCode::from(status)
}

/// The next step after damage was found in the database at `path`; `salvageable` says
/// whether its engine has a restore (the registry's `Restore`).
pub fn hint(path: &Path, doing: Doing, salvageable: bool) -> String {
    let shown = path.display();
    let restore = if salvageable {
        format!("`kura restore {shown} NEW_PATH` copies every intact record into a new database")
    } else {
        "its engine has no restore (see `kura engines`): recover it from a copy".to_string()
    };
    match doing {
        Doing::Checking => restore,
        Doing::Restoring => format!("`kura check {shown}` lists what is damaged"),
        Doing::Using => format!("`kura check {shown}` finds all the damage; {restore}"),
    }
}

fn is_broken_pipe(error: &Error) -> bool {
    std::error::Error::source(error)
        .and_then(|source| source.downcast_ref::<std::io::Error>())
        .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
}
