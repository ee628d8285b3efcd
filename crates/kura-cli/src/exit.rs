//! Exit statuses and how errors are shown: `kura: <error>` on stderr.

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

/// Prints the error and picks the status. A closed stdout (`kura list | head`) is not an
/// error worth a message: the reader simply wanted no more.
pub fn report(error: &Error) -> ExitCode {
    if is_broken_pipe(error) {
        return ExitCode::SUCCESS;
    }
    eprintln!("kura: {error}");
    ExitCode::from(code(error.kind()))
}

fn is_broken_pipe(error: &Error) -> bool {
    std::error::Error::source(error)
        .and_then(|source| source.downcast_ref::<std::io::Error>())
        .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
}
