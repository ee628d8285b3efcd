//! memcached's `-s PATH -a MODE`: the unix socket `kura serve` listens on instead of TCP,
//! its mode and how `stats settings` shows it. Its own module so that the configuration can
//! name it without importing the listener, which takes the configuration.

use std::fmt;
use std::path::PathBuf;

use kura::{Error, Result};

/// memcached's default mode of its unix socket (`-a 0700`).
pub const DEFAULT_UNIX_MODE: u32 = 0o700;

/// `-s PATH -a MODE`: serve on a unix socket instead of TCP.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnixSocket {
    pub path: PathBuf,
    /// Permission bits of the socket file (only the low 9 are used).
    pub mode: u32,
}

impl UnixSocket {
    /// A socket at `path` with memcached's default mode.
    pub fn new(path: impl Into<PathBuf>) -> UnixSocket {
        UnixSocket { path: path.into(), mode: DEFAULT_UNIX_MODE }
    }
}

/// Parses `-a`'s mode as memcached does: octal digits (`700`, `0770`).
pub fn parse_mode(text: &str) -> Result<u32> {
    match u32::from_str_radix(text, 8) {
        Ok(mode) if mode <= 0o777 => Ok(mode),
        _ => Err(Error::invalid(format!("-a/--unix-mask {text:?}: an octal mode from 0 to 777 is expected"))),
    }
}

/// The lines of `stats settings` about the unix socket, as memcached names them.
pub(crate) fn settings(socket: Option<&UnixSocket>, line: &mut dyn FnMut(&str, &dyn fmt::Display)) {
    match socket {
        Some(socket) => {
            line("domain_socket", &socket.path.display());
            line("umask", &format_args!("{:o}", socket.mode));
        }
        None => {
            line("domain_socket", &"NULL");
            line("umask", &format_args!("{DEFAULT_UNIX_MODE:o}"));
        }
    }
}

#[cfg(test)]
mod tests {
    #![expect(clippy::unwrap_used, reason = "a test fails loudly on the first broken expectation")]

    use super::*;

    #[test]
    fn modes_are_octal_as_memcached_s() {
        assert_eq!(parse_mode("700").unwrap(), 0o700);
        assert_eq!(parse_mode("0777").unwrap(), 0o777);
        assert!(parse_mode("800").is_err());
        assert!(parse_mode("1777").is_err());
        assert!(parse_mode("").is_err());
    }
}
