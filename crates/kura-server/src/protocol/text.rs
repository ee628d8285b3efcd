//! A request line of memcached's text protocol turned into a typed `Request`.
//!
//! The rules are memcached 1.6's (`proto_text.c`): words are separated by spaces only (runs
//! of them count as one; a tab or any other byte belongs to a word); a NUL ends the line;
//! the first word picks the command; a wrong number of words is `ERROR`; `noreply` is
//! recognised as the last word; a key is any word of 1 to 250 bytes. Where this parser is
//! stricter or safer than memcached it says so (docs/server.md lists the differences).

use super::numbers::{parse_i32, parse_u32, parse_u64};
use super::reply;

/// The longest key memcached accepts.
pub const MAX_KEY_LEN: usize = 250;

/// The five storage commands and `cas`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreMode {
    Set,
    Add,
    Replace,
    Append,
    Prepend,
    Cas,
}

impl StoreMode {
    /// The text command of this mode, as logs name it.
    pub fn name(self) -> &'static str {
        match self {
            StoreMode::Set => "set",
            StoreMode::Add => "add",
            StoreMode::Replace => "replace",
            StoreMode::Append => "append",
            StoreMode::Prepend => "prepend",
            StoreMode::Cas => "cas",
        }
    }
}

/// A storage command whose data block is still to be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreRequest {
    pub mode: StoreMode,
    pub key: Vec<u8>,
    pub flags: u32,
    pub exptime: i64,
    /// Bytes of data before the closing `\r\n`.
    pub length: usize,
    /// The CAS unique a `cas` command compares with (0 otherwise).
    pub cas: u64,
    pub noreply: bool,
    /// Meta `ms I`: a compare against an item with a newer CAS unique still stores, but
    /// marks the item stale (as memcached 1.6 does).
    pub invalidate: bool,
}

/// `stats` and its groups.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatsGroup {
    General,
    Settings,
    Reset,
    /// `items`, `slabs`, `sizes`: the served database as one slab class (`monitoring.rs`).
    Items,
    Slabs,
    Sizes,
    /// `conns`, `cachedump`: memcached's per-connection and per-slab details, which have no
    /// counterpart here; answered with an empty list.
    Empty,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request<'l> {
    /// A storage command: its data block (`length` bytes and `\r\n`) follows.
    Store(StoreRequest),
    /// A storage command refused before its data. `swallow` bytes (the data block) are
    /// skipped when the declared length was readable, so the data is never taken for a
    /// command; with `drop_key`, the key's old value is removed (memcached does that for a
    /// `set` too large to store, so a stale value does not outlive the failed update).
    RefusedStore {
        reply: &'static [u8],
        noreply: bool,
        swallow: Option<usize>,
        drop_key: Option<Vec<u8>>,
    },
    /// `get`/`gets`/`gat`/`gats`: `keys` are the key words, checked already.
    Get {
        keys: Vec<&'l [u8]>,
        with_cas: bool,
        touch: Option<i64>,
    },
    Delete {
        key: &'l [u8],
        noreply: bool,
    },
    Arithmetic {
        key: &'l [u8],
        delta: u64,
        incr: bool,
        noreply: bool,
    },
    Touch {
        key: &'l [u8],
        exptime: i64,
        noreply: bool,
    },
    FlushAll {
        delay: i64,
        noreply: bool,
    },
    Stats(StatsGroup),
    Version,
    Verbosity {
        noreply: bool,
    },
    Quit,
    /// A meta command (`mg ms md ma mn me`), parsed by `meta.rs`: the words after the name.
    Meta {
        command: u8,
        words: Vec<&'l [u8]>,
    },
    /// A fixed reply: an error found while parsing.
    Reply {
        bytes: &'static [u8],
        noreply: bool,
    },
    /// Close the connection without a reply (an HTTP request, as memcached does).
    Close,
}

/// What the parser needs to know of the server's limits.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_item_size: usize,
}

/// Whether `key` is a key memcached 1.6 stores: 1 to 250 bytes, whatever they are. memcached
/// checks a key's length only, so clients use any other byte: memcaslap begins every key
/// with eight 0x10 bytes, and refusing control bytes failed all its requests. A text key
/// cannot hold a space (it separates words), a LF (it ends the line) or a NUL (it ends the
/// line too, see `parse`); a CR is a key byte but for the one before the LF, which goes
/// with it. A base64 meta key can hold any byte.
pub fn is_valid_key(key: &[u8]) -> bool {
    !key.is_empty() && key.len() <= MAX_KEY_LEN
}

fn error(bytes: &'static [u8]) -> Request<'static> {
    Request::Reply { bytes, noreply: false }
}

/// Parses one request line, without its `\n` (and `\r`, which the caller strips).
pub fn parse(line: &[u8], limits: Limits) -> Request<'_> {
    // memcached reads the line as a C string: a NUL ends it, and the bytes from the NUL to
    // the LF are ignored (`get a\0b` is `get a`), so a text key never holds a NUL.
    let line = line.split(|b| *b == 0).next().unwrap_or_default();
    let words: Vec<&[u8]> = line.split(|b| *b == b' ').filter(|w| !w.is_empty()).collect();
    let Some((&command, args)) = words.split_first() else {
        return error(reply::ERROR);
    };
    if command.len() < 2 {
        return error(reply::ERROR);
    }
    let noreply = args.last().is_some_and(|w| *w == b"noreply");
    if command.len() == 2 && command.first() == Some(&b'm') {
        return match command.get(1) {
            Some(&letter) if b"gsdnae".contains(&letter) => Request::Meta { command: letter, words: args.to_vec() },
            _ => error(reply::ERROR),
        };
    }
    match command {
        b"get" | b"gets" | b"gat" | b"gats" => parse_get(command, args),
        b"set" => parse_store(StoreMode::Set, args, noreply, limits),
        b"add" => parse_store(StoreMode::Add, args, noreply, limits),
        b"replace" => parse_store(StoreMode::Replace, args, noreply, limits),
        b"append" => parse_store(StoreMode::Append, args, noreply, limits),
        b"prepend" => parse_store(StoreMode::Prepend, args, noreply, limits),
        b"cas" => parse_store(StoreMode::Cas, args, noreply, limits),
        b"delete" => parse_delete(args, noreply),
        b"incr" | b"decr" => parse_arithmetic(command == b"incr", args, noreply),
        b"touch" => parse_touch(args, noreply),
        b"flush_all" => parse_flush_all(args, noreply),
        b"stats" => Request::Stats(match args.first().copied() {
            None => StatsGroup::General,
            Some(b"settings") => StatsGroup::Settings,
            Some(b"reset") => StatsGroup::Reset,
            Some(b"items") => StatsGroup::Items,
            Some(b"slabs") => StatsGroup::Slabs,
            Some(b"sizes") => StatsGroup::Sizes,
            Some(b"conns" | b"cachedump") => StatsGroup::Empty,
            Some(_) => return error(reply::ERROR),
        }),
        // memcached resizes its slab memory; the engine's cap is fixed when it opens, so
        // the request is checked and acknowledged but changes nothing (docs/server.md).
        b"cache_memlimit" => match args.len() {
            1 | 2 => match args.first().and_then(|w| parse_u32(w)) {
                Some(_) => Request::Reply { bytes: reply::OK, noreply },
                None => Request::Reply { bytes: reply::BAD_FORMAT, noreply },
            },
            _ => error(reply::ERROR),
        },
        b"version" => Request::Version,
        b"quit" => Request::Quit,
        b"verbosity" => match args.len() {
            1 | 2 => match args.first().and_then(|w| parse_u32(w)) {
                Some(_) => Request::Verbosity { noreply },
                None => Request::Reply { bytes: reply::BAD_FORMAT, noreply },
            },
            _ => error(reply::ERROR),
        },
        _ if words.last().is_some_and(|w| w.starts_with(b"HTTP/")) => Request::Close,
        _ => error(reply::ERROR),
    }
}

fn parse_get<'l>(command: &[u8], args: &[&'l [u8]]) -> Request<'l> {
    let (touch, keys) = match command {
        b"gat" | b"gats" => {
            let Some((exptime, keys)) = args.split_first() else {
                return error(reply::ERROR);
            };
            match parse_i32(exptime) {
                Some(exptime) => (Some(i64::from(exptime)), keys),
                None => return error(reply::BAD_EXPTIME),
            }
        }
        _ => (None, args),
    };
    if args.is_empty() {
        return error(reply::ERROR);
    }
    // Every key is checked before any is looked up: memcached answers a bad key in a
    // multi-get with the error alone, not the values found before it.
    if !keys.iter().all(|key| is_valid_key(key)) {
        return error(reply::BAD_FORMAT);
    }
    Request::Get { keys: keys.to_vec(), with_cas: command.ends_with(b"s"), touch }
}

fn parse_store<'l>(mode: StoreMode, args: &[&'l [u8]], noreply: bool, limits: Limits) -> Request<'l> {
    let expected = if mode == StoreMode::Cas { 5 } else { 4 };
    if args.len() != expected && args.len() != expected + 1 {
        return error(reply::ERROR);
    }
    let word = |index: usize| args.get(index).copied().unwrap_or_default();
    let refused = |reply: &'static [u8], swallow: Option<usize>| Request::RefusedStore {
        reply,
        noreply,
        swallow,
        drop_key: None,
    };
    let length = parse_i32(word(3)).and_then(|l| usize::try_from(l).ok()).filter(|l| *l <= i32::MAX as usize - 2);
    let key = word(0);
    if !is_valid_key(key) {
        // memcached does not skip the data here, so it is read as commands; skipping it
        // keeps the stream in step (a `noreply` client never learns of the error).
        return refused(reply::BAD_FORMAT, length.map(|l| l + 2));
    }
    let (Some(flags), Some(exptime), Some(length)) = (parse_u32(word(1)), parse_i32(word(2)), length) else {
        return refused(reply::BAD_FORMAT, None);
    };
    let cas = if mode == StoreMode::Cas {
        match parse_u64(word(4)) {
            Some(cas) => cas,
            None => return refused(reply::BAD_FORMAT, None),
        }
    } else {
        0
    };
    if length > limits.max_item_size {
        return Request::RefusedStore {
            reply: reply::TOO_LARGE,
            noreply,
            swallow: Some(length + 2),
            drop_key: (mode == StoreMode::Set).then(|| key.to_vec()),
        };
    }
    Request::Store(StoreRequest {
        mode,
        key: key.to_vec(),
        flags,
        exptime: i64::from(exptime),
        length,
        cas,
        noreply,
        invalidate: false,
    })
}

fn parse_delete<'l>(args: &[&'l [u8]], noreply: bool) -> Request<'l> {
    let Some((&key, rest)) = args.split_first() else {
        return error(reply::ERROR);
    };
    let hold_is_zero = rest.first().is_some_and(|w| *w == b"0");
    let valid = match rest.len() {
        0 => true,
        1 => hold_is_zero || noreply,
        2 => hold_is_zero && noreply,
        _ => return error(reply::ERROR),
    };
    if !valid {
        return Request::Reply { bytes: reply::BAD_DELETE, noreply };
    }
    if !is_valid_key(key) {
        return Request::Reply { bytes: reply::BAD_FORMAT, noreply };
    }
    Request::Delete { key, noreply }
}

fn parse_arithmetic<'l>(incr: bool, args: &[&'l [u8]], noreply: bool) -> Request<'l> {
    let [key, delta, ..] = args else {
        return error(reply::ERROR);
    };
    if args.len() > 3 {
        return error(reply::ERROR);
    }
    if !is_valid_key(key) {
        return Request::Reply { bytes: reply::BAD_FORMAT, noreply };
    }
    match parse_u64(delta) {
        Some(delta) => Request::Arithmetic { key, delta, incr, noreply },
        None => Request::Reply { bytes: reply::BAD_DELTA, noreply },
    }
}

fn parse_touch<'l>(args: &[&'l [u8]], noreply: bool) -> Request<'l> {
    let [key, exptime, ..] = args else {
        return error(reply::ERROR);
    };
    if args.len() > 3 {
        return error(reply::ERROR);
    }
    if !is_valid_key(key) {
        return Request::Reply { bytes: reply::BAD_FORMAT, noreply };
    }
    match parse_i32(exptime) {
        Some(exptime) => Request::Touch { key, exptime: i64::from(exptime), noreply },
        None => Request::Reply { bytes: reply::BAD_EXPTIME, noreply },
    }
}

fn parse_flush_all<'l>(args: &[&'l [u8]], noreply: bool) -> Request<'l> {
    if args.len() > 2 {
        return error(reply::ERROR);
    }
    let delay = if args.len() == usize::from(noreply) {
        0
    } else {
        match args.first().and_then(|w| parse_i32(w)) {
            Some(delay) => i64::from(delay),
            None => return Request::Reply { bytes: reply::BAD_EXPTIME, noreply },
        }
    };
    Request::FlushAll { delay, noreply }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: Limits = Limits { max_item_size: 1 << 20 };

    #[test]
    fn word_counts_and_noreply_follow_memcached() {
        assert_eq!(parse(b"", LIMITS), error(reply::ERROR));
        assert_eq!(parse(b"x", LIMITS), error(reply::ERROR));
        assert_eq!(parse(b"set a 0 0", LIMITS), error(reply::ERROR));
        assert_eq!(parse(b"set a 0 0 1 2 3", LIMITS), error(reply::ERROR));
        assert_eq!(parse(b"get", LIMITS), error(reply::ERROR));
        assert_eq!(parse(b"gat 10", LIMITS), Request::Get { keys: vec![], with_cas: false, touch: Some(10) });
        assert_eq!(parse(b"delete a 0", LIMITS), Request::Delete { key: b"a", noreply: false });
        assert_eq!(parse(b"delete a 5", LIMITS), Request::Reply { bytes: reply::BAD_DELETE, noreply: false });
        assert_eq!(parse(b"flush_all noreply", LIMITS), Request::FlushAll { delay: 0, noreply: true });
        assert_eq!(parse(b"GET / HTTP/1.1", LIMITS), Request::Close);
        match parse(b"  set   k 5 -1 3 noreply ", LIMITS) {
            Request::Store(s) => {
                assert_eq!((s.key.as_slice(), s.flags, s.exptime, s.length, s.noreply), (&b"k"[..], 5, -1, 3, true));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn bad_storage_lines_skip_their_data_when_its_length_is_known() {
        let long = [b'k'; MAX_KEY_LEN + 1];
        let line = [&b"set "[..], &long, b" 0 0 3"].concat();
        assert!(matches!(parse(&line, LIMITS), Request::RefusedStore { swallow: Some(5), .. }));
        assert!(matches!(parse(b"set a 0 0 -1", LIMITS), Request::RefusedStore { swallow: None, .. }));
        let too_large = parse(b"set a 0 0 1048577", LIMITS);
        assert!(matches!(
            too_large,
            Request::RefusedStore { reply: reply::TOO_LARGE, swallow: Some(1048579), drop_key: Some(_), .. }
        ));
        assert!(matches!(parse(b"append a 0 0 1048577", LIMITS), Request::RefusedStore { drop_key: None, .. }));
    }

    #[test]
    fn a_key_is_any_bytes_but_a_space_and_a_nul_ends_the_line_as_in_memcached() {
        // LF never reaches `parse` (it ends the line); a CR inside a line is a key byte.
        for byte in (1..=255u8).filter(|b| ![b' ', b'\n'].contains(b)) {
            let key = [b'k', byte];
            let get = [&b"get "[..], &key].concat();
            assert_eq!(parse(&get, LIMITS), Request::Get { keys: vec![&key[..]], with_cas: false, touch: None });
            match parse(&[&b"set "[..], &key, b" 0 0 1"].concat(), LIMITS) {
                Request::Store(s) => assert_eq!(s.key, key),
                other => panic!("{byte:#04x}: {other:?}"),
            }
            let delete = [&b"delete "[..], &key].concat();
            assert_eq!(parse(&delete, LIMITS), Request::Delete { key: &key, noreply: false });
        }
        assert_eq!(parse(b"get a\tb", LIMITS), Request::Get { keys: vec![b"a\tb"], with_cas: false, touch: None });
        assert_eq!(parse(b"get a\0 b", LIMITS), Request::Get { keys: vec![b"a"], with_cas: false, touch: None });
        assert_eq!(parse(b"delete a\0 0 noreply", LIMITS), Request::Delete { key: b"a", noreply: false });
        assert_eq!(parse(b"set a\0 0 0 1", LIMITS), error(reply::ERROR));
        assert_eq!(parse(b"\0get a", LIMITS), error(reply::ERROR));
    }
}
