//! The meta commands carried out: `mg ms md ma me` (`mn` is answered by the connection).
//!
//! Replies follow memcached 1.6: `HD`/`VA`/`EN`/`NF`/`NS`/`EX` and the return flags in the
//! order asked; `q` hides the common answer (`EN` of `mg`, `HD` of `ms md ma`), never an error.
//! Stale items and win tokens (`mg N R`, `md I`, `ms I`; the `W X Z` flags of `mg`) are kept
//! in two bits of the item header (`item.rs`). Not supported (answered `CLIENT_ERROR invalid
//! flag`): `h`, `l` and `u` of `mg` (they need the item's fetched flag and last access time
//! updated on every read, which would turn every get into a write), and `E` (which
//! memcached 1.6.18 refuses too).

use crate::clock;
use crate::failure;
use crate::protocol::meta::{
    check_key_word, decode_key, write_returns, MetaFlags, BAD_FORMAT, DELETE_ARITHMETIC_FLAG_ERRORS,
    GET_SET_FLAG_ERRORS,
};
use crate::protocol::reply;
use crate::protocol::text::{StoreMode, StoreRequest};
use crate::store::{
    ArithmeticExtras, ArithmeticOutcome, CasShown, MetaFound, MetaGetChange, Store, StoreOutcome, Verdict,
};

/// Why a meta command is answered with an error line: a fixed reply (a bad flag, a non-numeric
/// value), or the engine failed on the key of this many bytes (`failure.rs` words it).
enum Refusal {
    Reply(&'static [u8]),
    Engine(kura::Error, usize),
}

impl From<&'static [u8]> for Refusal {
    fn from(reply: &'static [u8]) -> Refusal {
        Refusal::Reply(reply)
    }
}

impl<const N: usize> From<&'static [u8; N]> for Refusal {
    fn from(reply: &'static [u8; N]) -> Refusal {
        Refusal::Reply(reply)
    }
}

impl Refusal {
    fn write(self, store: &Store, command: &str, out: &mut Vec<u8>) {
        match self {
            Refusal::Reply(reply) => out.extend_from_slice(reply),
            Refusal::Engine(error, key_len) => {
                out.extend_from_slice(&failure::reply(&store.counters, command, key_len, &error));
            }
        }
    }
}

/// What an `ms` needs once its data has arrived, to write its reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetaReturn {
    /// The key as the request wrote it, for `k`.
    pub key_word: Vec<u8>,
    /// The request's flags that ask for something back (`k`, `O`, `b`, `c`), in its order.
    pub returned: Vec<(u8, Vec<u8>)>,
    pub quiet: bool,
}

/// An `ms` line: a store to carry out when its data arrives, or a refusal.
pub enum MetaSet {
    Store(StoreRequest, MetaReturn),
    /// The reply, how many bytes of data to skip (None: the length was unreadable), and the
    /// key whose item goes (an item too large to store removes the old one, as memcached's).
    Refused(&'static [u8], Option<usize>, Option<Vec<u8>>),
}

fn ttl_left(expiry: u32) -> i64 {
    if expiry == clock::NEVER {
        -1
    } else {
        i64::from(expiry).saturating_sub(i64::try_from(clock::now()).unwrap_or(i64::MAX)).max(0)
    }
}

/// `mg <key> <flags>*`.
pub fn get(store: &Store, words: &[&[u8]], out: &mut Vec<u8>) {
    let Some((&key_word, rest)) = words.split_first() else {
        out.extend_from_slice(reply::ERROR);
        return;
    };
    let result = (|| -> Result<(), Refusal> {
        check_key_word(key_word)?;
        let flags = MetaFlags::parse(rest, b"bcfkNOqRstvT", GET_SET_FLAG_ERRORS)?;
        let key = decode_key(key_word, flags.has(b'b'))?;
        let change = MetaGetChange {
            touch: flags.ttl(b'T')?,
            vivify: flags.ttl(b'N')?,
            recache: flags.unsigned(b'R')?.map(|seconds| u32::try_from(seconds).unwrap_or(u32::MAX)),
        };
        let changes = change.touch.is_some() || change.vivify.is_some() || change.recache.is_some();
        let shown = CasShown::when(flags.has(b'c'));
        let mut hit = false;
        let mut write = |found: MetaFound<'_>| {
            let Some((found, verdict)) = found else { return };
            hit = true;
            let value = flags.has(b'v');
            if value {
                out.extend_from_slice(format!("VA {}", found.data.len()).as_bytes());
            } else {
                out.extend_from_slice(b"HD");
            }
            // Return flags in the order asked, `k` and `O` among them (as memcached 1.6.18).
            out.extend_from_slice(&flags.returns(key_word, |letter| match letter {
                b'c' => Some(found.header.cas.to_string()),
                b'f' => Some(found.header.flags.to_string()),
                b's' => Some(found.data.len().to_string()),
                b't' => Some(ttl_left(found.header.expiry).to_string()),
                _ => None,
            }));
            for (shown, text) in [(verdict.already_won, " Z"), (verdict.stale, " X"), (verdict.win, " W")] {
                if shown {
                    out.extend_from_slice(text.as_bytes());
                }
            }
            out.extend_from_slice(b"\r\n");
            if value {
                out.extend_from_slice(found.data);
                out.extend_from_slice(b"\r\n");
            }
        };
        let done = if changes {
            store.meta_get(&key, change, shown, &mut write)
        } else {
            // The read path, unless the item is stale with its win not handed out yet: then
            // the get must record the win, which takes the writing path.
            let mut must_win = false;
            let read = store.get(&key, shown, &mut |found| match found {
                Some(found) if found.header.stale && !found.header.win_sent => must_win = true,
                Some(found) => {
                    let verdict = Verdict { win: false, already_won: found.header.win_sent, stale: found.header.stale };
                    write(Some((found, verdict)));
                }
                None => {}
            });
            if read.is_ok() && must_win {
                store.meta_get(&key, change, shown, &mut write)
            } else {
                read
            }
        };
        if let Err(e) = done {
            return Err(Refusal::Engine(e, key.len()));
        }
        if !hit && !flags.has(b'q') {
            // A miss echoes `O` and `k` too, so that pipelined replies can be matched.
            out.extend_from_slice(b"EN");
            out.extend_from_slice(&flags.echo(key_word));
            out.extend_from_slice(b"\r\n");
        }
        Ok(())
    })();
    if let Err(refusal) = result {
        refusal.write(store, "mg", out);
    }
}

/// `ms <key> <datalen> <flags>*`: parsed here, carried out by `set_data` with the data.
pub fn set(words: &[&[u8]], max_item_size: usize) -> MetaSet {
    let (Some(&key_word), Some(&length_word)) = (words.first(), words.get(1)) else {
        return MetaSet::Refused(BAD_FORMAT, None, None);
    };
    let Some(length) = crate::protocol::numbers::parse_u32(length_word).and_then(|l| usize::try_from(l).ok()) else {
        return MetaSet::Refused(BAD_FORMAT, None, None);
    };
    let swallow = Some(length + 2);
    let parsed = (|| -> Result<(StoreRequest, MetaReturn), &'static [u8]> {
        check_key_word(key_word)?;
        let flags = MetaFlags::parse(words.get(2..).unwrap_or_default(), b"bcCFIkOqTM", GET_SET_FLAG_ERRORS)?;
        let key = decode_key(key_word, flags.has(b'b'))?;
        let compare = flags.unsigned(b'C')?;
        // As memcached: a CAS turns set and replace into `cas` (a missing item is NF), and
        // gives append and prepend a CAS check (a missing item is NS); add ignores it.
        let mode = match (flags.mode(), compare) {
            (None | Some(b'S' | b's' | b'R' | b'r'), Some(_)) => StoreMode::Cas,
            (None | Some(b'S' | b's'), None) => StoreMode::Set,
            (Some(b'E' | b'e'), _) => StoreMode::Add,
            (Some(b'A' | b'a'), _) => StoreMode::Append,
            (Some(b'P' | b'p'), _) => StoreMode::Prepend,
            (Some(b'R' | b'r'), _) => StoreMode::Replace,
            (Some(_), _) => return Err(INVALID_MODE),
        };
        let request = StoreRequest {
            mode,
            key,
            flags: flags.flags32(b'F')?.unwrap_or(0),
            exptime: flags.ttl(b'T')?.unwrap_or(0),
            length,
            cas: compare.unwrap_or(0),
            noreply: false,
            invalidate: flags.has(b'I'),
        };
        let returned = flags
            .flags
            .iter()
            .filter(|(letter, _)| matches!(letter, b'k' | b'O' | b'b' | b'c'))
            .map(|(letter, argument)| (*letter, argument.to_vec()))
            .collect();
        let meta = MetaReturn { key_word: key_word.to_vec(), returned, quiet: flags.has(b'q') };
        Ok((request, meta))
    })();
    match parsed {
        Ok((request, _)) if length > max_item_size => MetaSet::Refused(reply::TOO_LARGE, swallow, Some(request.key)),
        Ok((request, meta)) => MetaSet::Store(request, meta),
        Err(error) => MetaSet::Refused(error, swallow, None),
    }
}

const INVALID_MODE: &[u8] = b"CLIENT_ERROR invalid mode for ms M token\r\n";

/// Carries out an `ms` with its data.
pub fn set_data(store: &Store, request: &StoreRequest, meta: &MetaReturn, data: &[u8], out: &mut Vec<u8>) {
    let shown = CasShown::when(meta.returned.iter().any(|(letter, _)| *letter == b'c'));
    let (code, cas) = match store.store_with_cas(request, data, shown) {
        Ok((StoreOutcome::Stored, cas)) => (&b"HD"[..], Some(cas)),
        Ok((StoreOutcome::NotStored, _)) => (&b"NS"[..], None),
        Ok((StoreOutcome::Exists, _)) => (&b"EX"[..], None),
        Ok((StoreOutcome::NotFound, _)) => (&b"NF"[..], None),
        Err(e) => {
            out.extend_from_slice(&failure::reply(&store.counters, "ms", request.key.len(), &e));
            return;
        }
    };
    if meta.quiet && code == b"HD" {
        return;
    }
    out.extend_from_slice(code);
    // `c` is the stored item's CAS, 0 when nothing was stored (as memcached answers).
    let flags = meta.returned.iter().map(|(letter, argument)| (*letter, argument.as_slice()));
    out.extend_from_slice(&write_returns(flags, &meta.key_word, |letter| {
        (letter == b'c').then(|| cas.unwrap_or(0).to_string())
    }));
    out.extend_from_slice(b"\r\n");
}

/// `md <key> <flags>*`.
pub fn delete(store: &Store, words: &[&[u8]], out: &mut Vec<u8>) {
    let Some((&key_word, rest)) = words.split_first() else {
        out.extend_from_slice(reply::ERROR);
        return;
    };
    let result = (|| -> Result<(), Refusal> {
        check_key_word(key_word)?;
        let flags = MetaFlags::parse(rest, b"bCIkOqT", DELETE_ARITHMETIC_FLAG_ERRORS)?;
        let key = decode_key(key_word, flags.has(b'b'))?;
        let compare = flags.unsigned(b'C')?;
        let outcome = if flags.has(b'I') {
            store.invalidate(&key, compare, flags.ttl(b'T')?)
        } else {
            store.delete_if(&key, compare)
        };
        let code: &[u8] = match outcome {
            Ok(StoreOutcome::Stored) => b"HD",
            Ok(StoreOutcome::Exists) => b"EX",
            Ok(_) => b"NF",
            Err(e) => return Err(Refusal::Engine(e, key.len())),
        };
        if !(flags.has(b'q') && code == b"HD") {
            out.extend_from_slice(code);
            out.extend_from_slice(&flags.echo(key_word));
            out.extend_from_slice(b"\r\n");
        }
        Ok(())
    })();
    if let Err(refusal) = result {
        refusal.write(store, "md", out);
    }
}

/// `ma <key> <flags>*`.
pub fn arithmetic(store: &Store, words: &[&[u8]], out: &mut Vec<u8>) {
    let Some((&key_word, rest)) = words.split_first() else {
        out.extend_from_slice(reply::ERROR);
        return;
    };
    let result = (|| -> Result<(), Refusal> {
        check_key_word(key_word)?;
        let flags = MetaFlags::parse(rest, b"bcCDJkMNOqTtv", DELETE_ARITHMETIC_FLAG_ERRORS)?;
        let key = decode_key(key_word, flags.has(b'b'))?;
        let incr = match flags.mode() {
            None | Some(b'I' | b'i' | b'+') => true,
            Some(b'D' | b'd' | b'-') => false,
            Some(_) => return Err(b"CLIENT_ERROR invalid mode for ma M token\r\n".into()),
        };
        let delta = flags.unsigned(b'D')?.unwrap_or(1);
        // memcached applies `N` (to an item it creates) and `T` in the order the flags come,
        // so a created item ends with the TTL of whichever of the two is last.
        let mut created_exptime = None;
        for (letter, _) in &flags.flags {
            match letter {
                b'N' => created_exptime = flags.ttl(b'N')?,
                b'T' if created_exptime.is_some() => created_exptime = flags.ttl(b'T')?,
                _ => {}
            }
        }
        let create = match created_exptime {
            Some(exptime) => Some((exptime, flags.unsigned(b'J')?.unwrap_or(0))),
            None => None,
        };
        let cas_shown = CasShown::when(flags.has(b'c'));
        let extras = ArithmeticExtras { create, compare: flags.unsigned(b'C')?, touch: flags.ttl(b'T')?, cas_shown };
        match store.arithmetic_or_create(&key, delta, incr, extras) {
            Ok(outcome @ (ArithmeticOutcome::Value(value, header) | ArithmeticOutcome::Created(value, header))) => {
                let value_text = value.to_string();
                let shows_value = flags.has(b'v');
                // Quiet mode hides a change of an item, the value with it; an item created
                // (`N`) is always answered, as memcached does.
                if flags.has(b'q') && matches!(outcome, ArithmeticOutcome::Value(..)) {
                    return Ok(());
                }
                let head = if shows_value { format!("VA {}", value_text.len()) } else { "HD".to_string() };
                out.extend_from_slice(head.as_bytes());
                out.extend_from_slice(&flags.returns(key_word, |letter| match letter {
                    b't' => Some(ttl_left(header.expiry).to_string()),
                    b'c' => Some(header.cas.to_string()),
                    _ => None,
                }));
                out.extend_from_slice(b"\r\n");
                if shows_value {
                    out.extend_from_slice(value_text.as_bytes());
                    out.extend_from_slice(b"\r\n");
                }
                Ok(())
            }
            Ok(outcome @ (ArithmeticOutcome::NotFound | ArithmeticOutcome::Exists)) => {
                out.extend_from_slice(if matches!(outcome, ArithmeticOutcome::Exists) { b"EX" } else { b"NF" });
                out.extend_from_slice(&flags.echo(key_word));
                out.extend_from_slice(b"\r\n");
                Ok(())
            }
            Ok(ArithmeticOutcome::NonNumeric) => Err(reply::NON_NUMERIC.into()),
            Err(e) => Err(Refusal::Engine(e, key.len())),
        }
    })();
    if let Err(refusal) = result {
        refusal.write(store, "ma", out);
    }
}

/// `me <key>`: memcached's debug line, with the fields that mean something here.
pub fn debug(store: &Store, words: &[&[u8]], out: &mut Vec<u8>) {
    let Some(&key_word) = words.first() else {
        out.extend_from_slice(reply::ERROR);
        return;
    };
    let base64 = words.get(1).is_some_and(|w| *w == b"b");
    let key = match check_key_word(key_word).and_then(|()| decode_key(key_word, base64)) {
        Ok(key) => key,
        Err(error) => {
            out.extend_from_slice(error);
            return;
        }
    };
    let mut line = None;
    // A debug line shows the CAS unique the item holds, 0 when none was shown yet: it gives
    // none (a debug command writes nothing).
    let found = store.get(&key, CasShown::No, &mut |found| {
        line = found.map(|found| {
            format!(
                " exp={} la=0 cas={} fetch=no cls=1 size={}\r\n",
                ttl_left(found.header.expiry),
                found.header.cas,
                key.len() + found.header.encoded_len() + found.data.len()
            )
        });
    });
    match (found, line) {
        (Ok(()), Some(line)) => {
            out.extend_from_slice(b"ME ");
            out.extend_from_slice(key_word);
            out.extend_from_slice(line.as_bytes());
        }
        (Ok(()), None) => out.extend_from_slice(b"EN\r\n"),
        (Err(e), _) => out.extend_from_slice(&failure::reply(&store.counters, "me", key.len(), &e)),
    }
}
