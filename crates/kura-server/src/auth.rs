//! memcached's text-protocol authentication (`-Y FILE`), as memcached 1.6.18 does it: the file
//! holds `user:password` lines; until a connection authenticates, every request is answered
//! `CLIENT_ERROR unauthenticated` except a `set` whose data is `user password`, answered
//! `STORED` (any key, flags, exptime; `noreply` is ignored) or `CLIENT_ERROR authentication
//! failure`. The replies and the parsing follow memcached's `try_read_command_asciiauth` and
//! `authfile_load` byte for byte (`tests/auth.rs` compares them with a running memcached).
//!
//! Where memcached is weak, this does better: passwords are compared in constant time (memcached
//! uses `memcmp`), every line of the file counts (memcached keeps the first 8 and ignores the
//! rest silently), a reload that fails on SIGHUP is logged (memcached keeps the old list
//! silently), a declared length over `MAX_CREDENTIALS` closes the connection instead of
//! buffering it, and each pipelined request gets its own reply (memcached overwrites the reply
//! of one unauthenticated request with the next one's when they arrive together).

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use kura::{Error, Result};

pub const UNAUTHENTICATED: &[u8] = b"CLIENT_ERROR unauthenticated\r\n";
pub const FAILURE: &[u8] = b"CLIENT_ERROR authentication failure\r\n";
pub const BAD_TERMINATION: &[u8] = b"CLIENT_ERROR bad command line termination\r\n";
pub const BAD_TOKEN_FORMAT: &[u8] = b"CLIENT_ERROR bad authentication token format\r\n";
pub const STORED: &[u8] = b"STORED\r\n";

/// The longest `user password` data block taken: more closes the connection (memcached waits
/// for and buffers whatever length is declared; its file lines are at most 255 bytes).
pub const MAX_CREDENTIALS: usize = 2048;

/// The users of an auth file.
#[derive(Debug, Default)]
pub struct Users {
    entries: Vec<(Vec<u8>, Vec<u8>)>,
}

impl Users {
    /// Reads memcached's format: each line is `user:password` (the user up to the first `:`,
    /// the password up to the end of the line, a CR or a NUL). A line without `:` (an empty
    /// line, a comment) makes the whole file malformed, as memcached refuses it too.
    pub fn parse(text: &[u8]) -> std::result::Result<Users, String> {
        let mut entries = Vec::new();
        for (number, line) in text.split_inclusive(|b| *b == b'\n').enumerate() {
            let user_end = line.iter().position(|b| *b == b':' || *b == 0).filter(|at| line.get(*at) == Some(&b':'));
            let Some(user_end) = user_end else {
                return Err(format!(
                    "line {} is not user:password (memcached refuses such a file too; it takes no comments or empty lines)",
                    number + 1
                ));
            };
            let user = line.get(..user_end).unwrap_or_default();
            let rest = line.get(user_end + 1..).unwrap_or_default();
            let password_end = rest.iter().position(|b| matches!(b, b'\n' | b'\r' | 0)).unwrap_or(rest.len());
            entries.push((user.to_vec(), rest.get(..password_end).unwrap_or_default().to_vec()));
        }
        Ok(Users { entries })
    }

    pub fn load(path: &Path) -> Result<Users> {
        let text = std::fs::read(path).map_err(|e| Error::io(format!("-Y: reading {}", path.display()), e))?;
        Users::parse(&text).map_err(|e| Error::invalid(format!("-Y {}: {e}", path.display())))
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Whether `user` and `password` are one of the entries. Every entry is compared, each
    /// in time that depends on the lengths only, so the time taken says nothing about which
    /// bytes matched.
    pub fn check(&self, user: &[u8], password: &[u8]) -> bool {
        let mut found = false;
        for (known_user, known_password) in &self.entries {
            found |= same_bytes(user, known_user) & same_bytes(password, known_password);
        }
        found
    }
}

/// Compares two byte strings in constant time for their lengths: no early exit on the first
/// difference (which would tell an attacker how many leading bytes of a guess are right).
fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    let mut difference = a.len() ^ b.len();
    for i in 0..a.len().max(b.len()) {
        let x = a.get(i).copied().unwrap_or(0);
        let y = b.get(i).copied().unwrap_or(0);
        difference |= usize::from(x ^ y);
        // Keeps the compiler from turning the loop back into an early exit.
        difference = std::hint::black_box(difference);
    }
    difference == 0
}

/// The auth file and its users, reloadable (SIGHUP) while connections check against them.
#[derive(Debug)]
pub struct Authenticator {
    path: PathBuf,
    users: RwLock<Arc<Users>>,
}

impl Authenticator {
    /// Loads `path`; an unreadable or malformed file is an error (the server does not start).
    pub fn open(path: &Path) -> Result<Authenticator> {
        let users = Users::load(path)?;
        warn_if_empty(path, &users);
        Ok(Authenticator { path: path.to_path_buf(), users: RwLock::new(Arc::new(users)) })
    }

    /// Reads the file again; on an error the users loaded before stay (as memcached), and the
    /// error is returned for the log.
    pub fn reload(&self) -> Result<usize> {
        let users = Users::load(&self.path)?;
        warn_if_empty(&self.path, &users);
        let count = users.len();
        if let Ok(mut current) = self.users.write() {
            *current = Arc::new(users);
        }
        Ok(count)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn users(&self) -> Arc<Users> {
        self.users.read().map_or_else(|_| Arc::new(Users::default()), |users| Arc::clone(&users))
    }
}

fn warn_if_empty(path: &Path, users: &Users) {
    if users.is_empty() {
        eprintln!("kura serve: warning: the auth file {} holds no user: no client can authenticate", path.display());
    }
}

/// What an unauthenticated connection's input comes to.
#[derive(Debug, PartialEq, Eq)]
pub enum Gate {
    /// Not a whole request yet.
    NeedMore,
    /// Close the connection (a line over `max_line` without its end, as memcached; or
    /// credentials over `MAX_CREDENTIALS`).
    Close,
    /// `consumed` bytes were one request, answered `reply`; `attempt` says whether it was an
    /// authentication attempt and whether it succeeded.
    Reply { consumed: usize, reply: &'static [u8], attempt: Option<bool> },
}

/// The first request in `input` of a connection not yet authenticated, as memcached 1.6.18's
/// `try_read_command_asciiauth` reads it: a line; unless it is `set` with at least five words
/// and a length (`safe_strtoul`), it is refused; otherwise its data block (length + CR LF) must
/// be two words, a user and a password.
pub fn gate(input: &[u8], max_line: usize, authenticator: &Authenticator) -> Gate {
    let Some(newline) = input.iter().position(|b| *b == b'\n') else {
        return if input.len() > max_line { Gate::Close } else { Gate::NeedMore };
    };
    let line = input.get(..newline).unwrap_or_default();
    // memcached reads the line as a C string: a NUL ends it.
    let line = line.get(..line.iter().position(|b| *b == 0).unwrap_or(line.len())).unwrap_or_default();
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let words: Vec<&[u8]> = line.split(|b| *b == b' ').filter(|w| !w.is_empty()).collect();
    let length = match (words.first(), words.get(4)) {
        (Some(&b"set"), Some(length)) => strtoul(length),
        _ => None,
    };
    let Some(length) = length.and_then(|l| usize::try_from(l).ok()) else {
        return Gate::Reply { consumed: newline + 1, reply: UNAUTHENTICATED, attempt: None };
    };
    if length > MAX_CREDENTIALS {
        return Gate::Close;
    }
    let data_start = newline + 1;
    let Some(block) = input.get(data_start..data_start + length + 2) else {
        return Gate::NeedMore;
    };
    let consumed = data_start + length + 2;
    let (data, end) = block.split_at(length);
    if end != b"\r\n" {
        return Gate::Reply { consumed, reply: BAD_TERMINATION, attempt: None };
    }
    let data = data.get(..data.iter().position(|b| *b == 0).unwrap_or(data.len())).unwrap_or_default();
    let tokens: Vec<&[u8]> = data.split(|b| *b == b' ').filter(|w| !w.is_empty()).collect();
    // Words after the second are ignored, as memcached ignores them.
    let (Some(user), Some(password)) = (tokens.first(), tokens.get(1)) else {
        return Gate::Reply { consumed, reply: BAD_TOKEN_FORMAT, attempt: None };
    };
    let accepted = authenticator.users().check(user, password);
    Gate::Reply { consumed, reply: if accepted { STORED } else { FAILURE }, attempt: Some(accepted) }
}

/// A length as memcached's `safe_strtoul` reads it here: C's `strtoul` (leading whitespace,
/// a sign, digits) followed by whitespace or the end; a negative number is refused, except
/// `-0`. Looser than the protocol's own numbers (`numbers.rs`), as memcached's auth path
/// keeps the CR and anything after it in the token: `12\rx` is 12 there.
fn strtoul(token: &[u8]) -> Option<u64> {
    let is_space = |b: &u8| matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r');
    let start = token.iter().position(|b| !is_space(b)).unwrap_or(token.len());
    let rest = token.get(start..).unwrap_or_default();
    let (negative, rest) = match rest.first() {
        Some(b'-') => (true, rest.get(1..).unwrap_or_default()),
        Some(b'+') => (false, rest.get(1..).unwrap_or_default()),
        _ => (false, rest),
    };
    let end = rest.iter().position(|b| !b.is_ascii_digit()).unwrap_or(rest.len());
    let (digits, after) = rest.split_at(end);
    if digits.is_empty() || after.first().is_some_and(|b| !is_space(b)) {
        return None;
    }
    let value =
        digits.iter().try_fold(0u64, |value, digit| value.checked_mul(10)?.checked_add(u64::from(digit - b'0')))?;
    (!negative || value == 0).then_some(value)
}

#[cfg(test)]
mod tests {
    #![expect(clippy::unwrap_used, reason = "a test fails loudly on the first broken expectation")]

    use super::*;

    #[test]
    fn the_file_is_read_as_memcached_reads_it() {
        let users = Users::parse(b"alice:secret\nbob:a:b\r\ncarol:pw\0junk\ndave:").unwrap();
        assert!(users.check(b"alice", b"secret"));
        assert!(users.check(b"bob", b"a:b"), "the password runs to the end of the line, colons included");
        assert!(users.check(b"carol", b"pw"), "a NUL ends the password");
        assert!(users.check(b"dave", b""));
        assert!(!users.check(b"alice", b"secre"));
        assert!(!users.check(b"alice", b"secret2"));
        assert!(!users.check(b"alic", b"secret"));
        assert_eq!(Users::parse(b"").unwrap().len(), 0);
        for bad in [&b"# users\nalice:secret\n"[..], b"alice:secret\n\n", b"alice:secret\nbob\n", b"al\0ice:pw\n"] {
            assert!(Users::parse(bad).is_err(), "{:?} accepted", bad.escape_ascii().to_string());
        }
        let error = Users::parse(b"alice:secret\nbob\n").unwrap_err();
        assert!(error.starts_with("line 2 "), "{error}");
    }

    #[test]
    fn lengths_read_as_memcached_reads_them() {
        for (token, value) in [
            (&b"12"[..], Some(12)),
            (b"+12", Some(12)),
            (b"012", Some(12)),
            (b"12\rx", Some(12)),
            (b"\t12", Some(12)),
            (b"-0", Some(0)),
            (b"-5", None),
            (b"1a", None),
            (b"", None),
            (b"+", None),
            (b"99999999999999999999", None),
        ] {
            assert_eq!(strtoul(token), value, "{}", token.escape_ascii());
        }
    }

    #[test]
    fn comparison_is_exact() {
        assert!(same_bytes(b"", b""));
        assert!(same_bytes(b"abc", b"abc"));
        assert!(!same_bytes(b"abc", b"abd"));
        assert!(!same_bytes(b"abc", b"abc\0"), "a longer string padded with NULs is not the same");
        assert!(!same_bytes(b"", b"a"));
    }
}
