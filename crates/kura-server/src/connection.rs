//! One client connection: reads requests, carries them out in order, writes the replies.
//!
//! Pipelined requests already received are all carried out before one write of their
//! replies; a reply bigger than `output_flush_bytes` (a huge multi-get) is written out as it
//! is built, so a connection holds at most about a request line, one data block and
//! `output_flush_bytes` of replies, whatever the client sends. A client that stops reading
//! stalls only its own connection (its task waits on the socket), never the server.

use std::io::Write as _;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::watch;

use crate::auth;
use crate::failure;
use crate::item::Header;
use crate::meta_command::{self, MetaReturn};
use crate::protocol::reply;
use crate::protocol::text::{self, Limits, Request, StoreRequest};
use crate::shared::Shared;
use crate::stats::{add, bump};
use crate::store::{ArithmeticOutcome, CasShown, Found, StoreOutcome};
use crate::verbose::Log;

/// Bytes read from the socket at once.
const READ_CHUNK: usize = 16 << 10;

/// How long the end of a connection may wait on a client that reads nothing.
const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(1);

/// What the connection is waiting for.
enum Pending {
    /// A request of a connection that must authenticate first (`-Y`, `auth.rs`).
    Unauthenticated,
    /// A request line.
    Line,
    /// The data block of a storage command (`ms` too, with what its reply echoes).
    Data(StoreRequest, Option<MetaReturn>),
    /// Bytes to skip: the data block of a refused storage command.
    Swallow(usize),
    /// The rest of a retrieval line longer than `max_get_line`, whose keys so far were
    /// answered (as memcached answers a multi-get of any length, a part at a time): the
    /// command words the rest belongs to (`get `, `gat 60 `), whether a part was refused
    /// (then the rest is skipped up to the end of the line), and whether a part held a NUL
    /// (the rest is skipped too, but `END` still ends the reply: memcached reads the whole
    /// line as a C string, so its keys stop at the NUL).
    GetRest { command: Vec<u8>, refused: bool, ended: bool },
}

/// How processing the buffered input ended.
enum Next {
    /// Read more.
    Read,
    /// Write what is pending, then close (`quit`).
    Quit,
    /// Close at once (an oversized line, an HTTP request).
    Close,
}

/// Why the connection ends early: the socket failed or timed out.
type Ended = std::io::Error;

/// What a client connects over: TCP, TLS over TCP or a unix socket. The loop below is
/// generic over it, so each kind gets its own compiled copy and plain TCP pays nothing for
/// the others (no boxing, no dynamic call per read or write). Reads and writes never run at
/// once (a connection reads, carries out, writes, reads again), so the stream is not split.
pub(crate) trait Stream: AsyncRead + AsyncWrite + Unpin + Send {}

impl<S: AsyncRead + AsyncWrite + Unpin + Send> Stream for S {}

struct Output<S> {
    /// The client's stream; None when replaying input with the replies discarded (`replay`).
    stream: Option<S>,
    buffer: Vec<u8>,
    flush_bytes: usize,
    idle_timeout: Option<Duration>,
    shared: Arc<Shared>,
    log: Log,
}

/// Logs the end of a connection (`-vv`) however it ends.
struct Closing(Log);

impl Drop for Closing {
    fn drop(&mut self) {
        self.0.event("connection closed.");
    }
}

impl<S: Stream> Output<S> {
    fn push(&mut self, bytes: &[u8]) {
        self.buffer.extend_from_slice(bytes);
    }

    /// A reply unless the request said `noreply`: then nothing at all, errors included.
    fn reply(&mut self, noreply: bool, bytes: &[u8]) {
        if !noreply {
            self.push(bytes);
        }
    }

    async fn flush(&mut self) -> Result<(), Ended> {
        if self.buffer.is_empty() {
            return Ok(());
        }
        if let Some(stream) = &mut self.stream {
            // A TLS stream may keep the last record until flushed; for TCP this is a no-op.
            let write = async {
                stream.write_all(&self.buffer).await?;
                stream.flush().await
            };
            let written = match self.idle_timeout {
                Some(limit) => tokio::time::timeout(limit, write).await.unwrap_or_else(|_| {
                    Err(std::io::Error::new(std::io::ErrorKind::TimedOut, "the client reads nothing"))
                }),
                None => write.await,
            };
            if let Err(e) = written {
                self.log.connection_error(&format!("write failed: {e}"));
                return Err(e);
            }
        }
        add(&self.shared.store.counters.bytes_written, self.buffer.len() as u64);
        self.buffer.clear();
        Ok(())
    }

    /// Writes out when enough replies are waiting (the streaming bound).
    async fn flush_if_full(&mut self) -> Result<(), Ended> {
        if self.buffer.len() >= self.flush_bytes {
            self.flush().await?;
        }
        Ok(())
    }
}

/// Serves one client until it quits, fails, idles out or the server stops.
pub(crate) async fn serve<S: Stream>(stream: S, shared: Arc<Shared>, mut stopping: watch::Receiver<bool>) {
    let config = &shared.config;
    let mut output = Output {
        stream: Some(stream),
        buffer: Vec::with_capacity(READ_CHUNK),
        flush_bytes: config.output_flush_bytes,
        idle_timeout: config.idle_timeout,
        shared: Arc::clone(&shared),
        log: Log::new(config.verbosity),
    };
    output.log.event("new client connection");
    let _closing = Closing(output.log);
    let mut input = Vec::with_capacity(READ_CHUNK);
    let mut chunk = vec![0u8; READ_CHUNK];
    let mut pending = if shared.auth.is_some() { Pending::Unauthenticated } else { Pending::Line };
    loop {
        let next = match process(&shared, &mut input, &mut pending, &mut output).await {
            Ok(next) => next,
            Err(_) => break,
        };
        match next {
            Next::Read => {}
            Next::Quit => {
                let _ = output.flush().await;
                break;
            }
            Next::Close => break,
        }
        if output.flush().await.is_err() || *stopping.borrow() {
            break;
        }
        let log = output.log;
        let Some(stream) = output.stream.as_mut() else { break };
        match read(stream, &mut chunk, config.idle_timeout, &mut stopping, log).await {
            Some(read) => {
                add(&shared.store.counters.bytes_read, read as u64);
                input.extend_from_slice(chunk.get(..read).unwrap_or_default());
            }
            None => break,
        }
    }
    // Ends the stream in order: a TLS client gets its close_notify (as from memcached) and
    // can tell the end from a cut connection; for TCP it is the FIN the close sends anyway.
    if let Some(mut stream) = output.stream.take() {
        let _ = tokio::time::timeout(SHUTDOWN_TIMEOUT, stream.shutdown()).await;
    }
}

/// Carries out `input` as if it arrived in pieces of `piece` bytes, with the replies
/// discarded, and returns the bytes of replies; what `crate::fuzz::session` drives. Checks on
/// the way the bounds the file header promises: the replies waiting never exceed
/// `output_flush_bytes` by more than one reply, and the input waiting never exceeds a
/// request line or one data block.
pub(crate) async fn replay(shared: &Arc<Shared>, input: &[u8], piece: usize) -> u64 {
    let config = &shared.config;
    let mut output = Output::<tokio::net::TcpStream> {
        stream: None,
        buffer: Vec::new(),
        flush_bytes: config.output_flush_bytes,
        idle_timeout: None,
        shared: Arc::clone(shared),
        log: Log::new(0),
    };
    let most_input = config.max_line.max(config.max_get_line).max(config.max_item_size) + piece + 2;
    let most_output = config.output_flush_bytes + config.max_item_size + config.max_get_line + 1024;
    let (mut pending_input, mut pending, mut replied) = (Vec::new(), Pending::Line, 0u64);
    for arrived in input.chunks(piece.max(1)) {
        pending_input.extend_from_slice(arrived);
        let next = process(shared, &mut pending_input, &mut pending, &mut output).await;
        assert!(output.buffer.len() <= most_output, "{} bytes of replies wait unwritten", output.buffer.len());
        replied += output.buffer.len() as u64;
        output.buffer.clear();
        if !matches!(next, Ok(Next::Read)) {
            break;
        }
        assert!(pending_input.len() <= most_input, "{} bytes of input wait unparsed", pending_input.len());
    }
    replied
}

/// Reads some bytes; None at the end of the stream, on an error, an idle timeout or a stop.
async fn read<S: Stream>(
    reader: &mut S,
    chunk: &mut [u8],
    idle_timeout: Option<Duration>,
    stopping: &mut watch::Receiver<bool>,
    log: Log,
) -> Option<usize> {
    let receive = async {
        let read = match idle_timeout {
            Some(limit) => match tokio::time::timeout(limit, reader.read(chunk)).await {
                Ok(read) => read,
                Err(_) => {
                    log.connection_error("idle timeout, closing");
                    return None;
                }
            },
            None => reader.read(chunk).await,
        };
        read.map_err(|e| log.connection_error(&format!("read failed: {e}"))).ok()
    };
    tokio::select! {
        read = receive => read.filter(|n| *n > 0),
        _ = stopping.changed() => None,
    }
}

/// Whether a line (still without its newline) is a retrieval, which may be long.
fn is_retrieval(line: &[u8]) -> bool {
    let start = line.iter().position(|b| *b != b' ').unwrap_or(line.len());
    let line = line.get(start..).unwrap_or_default();
    [&b"get "[..], b"gets ", b"gat ", b"gats "].iter().any(|p| line.starts_with(p))
}

/// Where a retrieval line too long to wait for can be cut: its command words with their
/// trailing space (`get `, `gat 60 `) and the end of its last complete key (the last space
/// after them). None when no key is complete yet.
fn retrieval_split(line: &[u8]) -> Option<(Vec<u8>, usize)> {
    let start = line.iter().position(|b| *b != b' ')?;
    let words = if line.get(start..)?.starts_with(b"gat") { 2 } else { 1 };
    // The end of the command words: after `words` words and the spaces that follow them.
    let mut at = start;
    for _ in 0..words {
        at += line.get(at..)?.iter().position(|b| *b == b' ')?;
        at += line.get(at..)?.iter().position(|b| *b != b' ')?;
    }
    let keys_end = at + line.get(at..)?.iter().rposition(|b| *b == b' ')?;
    let command = line.get(start..at)?.to_vec();
    Some((command, keys_end))
}

/// Answers a retrieval line (`get`/`gets`/`gat`/`gats` and keys) without its `END`; false
/// when the line was refused (its error is the reply).
async fn answer_retrieval<S: Stream>(shared: &Arc<Shared>, line: &[u8], output: &mut Output<S>) -> Result<bool, Ended> {
    match text::parse(line, Limits { max_item_size: shared.config.max_item_size }) {
        Request::Get { keys, with_cas, touch } => answer_keys(shared, &keys, with_cas, touch, output).await,
        Request::Reply { bytes, noreply } => {
            output.reply(noreply, bytes);
            Ok(false)
        }
        _ => {
            debug_assert!(false, "a retrieval line parsed as another request");
            output.push(reply::ERROR);
            Ok(false)
        }
    }
}

/// Writes a `VALUE` for each of `keys` that has an item (touching it for `gat`/`gats`);
/// false when the engine failed on a key (its `SERVER_ERROR` ends the reply, no `END`).
async fn answer_keys<S: Stream>(
    shared: &Arc<Shared>,
    keys: &[&[u8]],
    with_cas: bool,
    touch: Option<i64>,
    output: &mut Output<S>,
) -> Result<bool, Ended> {
    if touch.is_none() && keys.len() > 1 {
        let mut rest = keys;
        while !rest.is_empty() {
            let chunk = rest.get(..rest.len().min(MULTI_GET_CHUNK)).unwrap_or(rest);
            let Some(answered) = retrieve_many(shared, chunk, with_cas, output) else { return Ok(false) };
            rest = rest.get(answered..).unwrap_or_default();
            output.flush_if_full().await?;
        }
    } else {
        for key in keys {
            if !retrieve(shared, key, with_cas, touch, output) {
                return Ok(false);
            }
            output.flush_if_full().await?;
        }
    }
    Ok(true)
}

/// Carries out every complete request in `input`, leaving the incomplete rest there.
async fn process<S: Stream>(
    shared: &Arc<Shared>,
    input: &mut Vec<u8>,
    pending: &mut Pending,
    output: &mut Output<S>,
) -> Result<Next, Ended> {
    let mut consumed = 0;
    let next = loop {
        let available = input.get(consumed..).unwrap_or_default();
        match pending {
            Pending::Unauthenticated => {
                let Some(authenticator) = &shared.auth else {
                    *pending = Pending::Line;
                    continue;
                };
                match auth::gate(available, shared.config.max_line, authenticator) {
                    auth::Gate::NeedMore => break Next::Read,
                    auth::Gate::Close => {
                        output.log.connection_error("an unauthenticated request over the limit, closing");
                        break Next::Close;
                    }
                    auth::Gate::Reply { consumed: used, reply, attempt } => {
                        consumed += used;
                        // The request is not logged: it may hold a password.
                        output.log.request(b"(a request before authentication)", reply);
                        // Always answered, `noreply` or not, as memcached answers.
                        output.push(reply);
                        if let Some(accepted) = attempt {
                            bump(&shared.store.counters.auth_cmds);
                            if accepted {
                                *pending = Pending::Line;
                            } else {
                                bump(&shared.store.counters.auth_errors);
                            }
                        }
                    }
                }
            }
            Pending::Swallow(remaining) => {
                let skipped = (*remaining).min(available.len());
                consumed += skipped;
                *remaining -= skipped;
                if *remaining > 0 {
                    break Next::Read;
                }
                *pending = Pending::Line;
            }
            Pending::Data(request, meta) => {
                let Some(block) = available.get(..request.length + 2) else {
                    break Next::Read;
                };
                let (data, end) = block.split_at(request.length);
                if end != b"\r\n" {
                    output.log.request(b"(a data block)", reply::BAD_DATA_CHUNK);
                    output.reply(request.noreply, reply::BAD_DATA_CHUNK);
                } else if let Some(meta) = meta {
                    meta_command::set_data(&shared.store, request, meta, data, &mut output.buffer);
                } else {
                    store(shared, request, data, output);
                }
                consumed += request.length + 2;
                *pending = Pending::Line;
                output.flush_if_full().await?;
            }
            Pending::GetRest { command, refused, ended } => {
                let newline = available.iter().position(|b| *b == b'\n');
                let part = match newline {
                    Some(newline) => available.get(..newline).map(|l| l.strip_suffix(b"\r").unwrap_or(l)),
                    None if available.len() > shared.config.max_get_line => {
                        available.iter().rposition(|b| *b == b' ').and_then(|space| available.get(..space))
                    }
                    None => break Next::Read,
                };
                // A key longer than the whole buffer: no memcached key, and nothing to split at.
                let Some(part) = part else { break Next::Close };
                consumed += newline.map_or(part.len() + 1, |newline| newline + 1);
                if !*refused && !*ended {
                    let nul = part.iter().position(|b| *b == 0);
                    let keys = part.get(..nul.unwrap_or(part.len())).unwrap_or_default();
                    if keys.iter().any(|b| *b != b' ') {
                        let mut line = command.clone();
                        line.extend_from_slice(keys);
                        *refused = !answer_retrieval(shared, &line, output).await?;
                    }
                    *ended = nul.is_some();
                }
                if newline.is_some() {
                    if !*refused {
                        output.push(reply::END);
                    }
                    *pending = Pending::Line;
                }
            }
            Pending::Line => {
                let Some(newline) = available.iter().position(|b| *b == b'\n') else {
                    if !is_retrieval(available) {
                        // memcached closes a connection whose line outgrows its buffer, too.
                        if available.len() > shared.config.max_line {
                            output.log.connection_error("a line over the limit without its end, closing");
                            break Next::Close;
                        }
                        break Next::Read;
                    }
                    if available.len() <= shared.config.max_get_line {
                        break Next::Read;
                    }
                    // A long multi-get: answer the keys so far and read the line on (as memcached).
                    let Some((command, keys_end)) = retrieval_split(available) else { break Next::Close };
                    let line = available.get(..keys_end).unwrap_or_default();
                    let refused = !answer_retrieval(shared, line, output).await?;
                    // `parse` stopped at a NUL in this part; the parts after it are skipped.
                    let ended = line.contains(&0);
                    *pending = Pending::GetRest { command, refused, ended };
                    consumed += keys_end + 1;
                    continue;
                };
                let line = available.get(..newline).unwrap_or_default();
                let line = line.strip_suffix(b"\r").unwrap_or(line);
                consumed += newline + 1;
                let limits = Limits { max_item_size: shared.config.max_item_size };
                let replies_before = output.buffer.len();
                match text::parse(line, limits) {
                    Request::Store(request) => *pending = Pending::Data(request, None),
                    Request::Meta { command: b's', words } => {
                        match meta_command::set(&words, shared.config.max_item_size) {
                            meta_command::MetaSet::Store(request, meta) => {
                                *pending = Pending::Data(request, Some(meta))
                            }
                            meta_command::MetaSet::Refused(bytes, swallow, drop_key) => {
                                if bytes == reply::TOO_LARGE {
                                    bump(&shared.store.counters.store_too_large);
                                }
                                // As after a refused `set`: the old item must not outlive a
                                // write the client meant to replace it.
                                let dropped = drop_key
                                    .map_or(Ok(false), |key| shared.store.delete(&key).map_err(|e| (key.len(), e)));
                                match dropped {
                                    Ok(_) => output.push(bytes),
                                    Err((key_len, e)) => {
                                        let failed = failure::reply(&shared.store.counters, "ms", key_len, &e);
                                        output.push(&failed);
                                    }
                                }
                                if let Some(bytes) = swallow {
                                    *pending = Pending::Swallow(bytes);
                                }
                            }
                        }
                    }
                    Request::RefusedStore { reply, noreply, swallow, drop_key } => {
                        output.reply(noreply, reply);
                        if reply == reply::TOO_LARGE {
                            bump(&shared.store.counters.store_too_large);
                        }
                        if let Some(key) = drop_key {
                            if let Err(e) = shared.store.delete(&key) {
                                output.reply(noreply, &failure::reply(&shared.store.counters, "set", key.len(), &e));
                            }
                        }
                        if let Some(bytes) = swallow {
                            *pending = Pending::Swallow(bytes);
                        }
                    }
                    Request::Get { keys, with_cas, touch } => {
                        if answer_keys(shared, &keys, with_cas, touch, output).await? {
                            output.push(reply::END);
                        }
                    }
                    Request::Quit => break Next::Quit,
                    Request::Close => break Next::Close,
                    other => execute(shared, other, output),
                }
                if output.log.on() {
                    output.log.request(line, output.buffer.get(replies_before..).unwrap_or_default());
                }
                output.flush_if_full().await?;
            }
        }
    };
    input.drain(..consumed);
    Ok(next)
}

fn store<S: Stream>(shared: &Shared, request: &StoreRequest, data: &[u8], output: &mut Output<S>) {
    let bytes = match shared.store.store(request, data) {
        Ok(StoreOutcome::Stored) => reply::STORED,
        Ok(StoreOutcome::NotStored) => reply::NOT_STORED,
        Ok(StoreOutcome::Exists) => reply::EXISTS,
        Ok(StoreOutcome::NotFound) => reply::NOT_FOUND,
        Err(e) => {
            let failed = failure::reply(&shared.store.counters, request.mode.name(), request.key.len(), &e);
            output.reply(request.noreply, &failed);
            return;
        }
    };
    output.reply(request.noreply, bytes);
}

/// Keys of a multi-key `get` looked up in one batched read.
const MULTI_GET_CHUNK: usize = 64;

/// A value an ordered engine showed before its turn in a multi-get (None: a miss).
type EarlyValue = Option<(Header, Vec<u8>)>;

/// Writes the `VALUE` lines of the first keys of `keys` (a chunk of a multi-key get), in
/// their order, looked up with one batched read, and returns how many keys it answered (at
/// least one): it stops answering once `output_flush_bytes` of replies wait, so that the
/// caller writes them out before asking for the rest. A value the engine shows in the keys'
/// order is written straight from the engine's memory; one shown early (an ordered engine
/// visits in key order) is copied aside until its turn, at most `output_flush_bytes` of
/// them (the others are looked up again). So a connection never holds more than about
/// twice `output_flush_bytes` and one value, whatever the keys' values weigh.
fn retrieve_many<S: Stream>(shared: &Shared, keys: &[&[u8]], with_cas: bool, output: &mut Output<S>) -> Option<usize> {
    let counters = &shared.store.counters;
    let answer = |output: &mut Output<S>, key: &[u8], found: Option<Found<'_>>| {
        bump(&counters.cmd_get);
        match found {
            Some(found) => {
                bump(&counters.get_hits);
                write_value(output, key, found, with_cas);
            }
            None => bump(&counters.get_misses),
        }
    };
    // Early values by index: None not seen (or not kept), Some(None) a miss.
    let mut early: Vec<Option<EarlyValue>> = Vec::new();
    let (mut answered, mut early_bytes, mut full) = (0usize, 0usize, false);
    let looked_up = shared.store.get_many(keys, CasShown::when(with_cas), &mut |index, found| {
        if full {
            return;
        }
        if index != answered {
            let weight = found.as_ref().map_or(0, |f| f.data.len());
            if index > answered && early_bytes + weight <= output.flush_bytes {
                early.resize_with(early.len().max(index + 1), || None);
                if let Some(slot) = early.get_mut(index) {
                    *slot = Some(found.map(|f| (f.header, f.data.to_vec())));
                    early_bytes += weight;
                }
            }
            return;
        }
        answer(output, keys.get(index).copied().unwrap_or_default(), found);
        answered += 1;
        while let Some(kept) = early.get_mut(answered).and_then(Option::take) {
            let found = kept.as_ref().map(|(header, data)| Found { header: *header, data });
            answer(output, keys.get(answered).copied().unwrap_or_default(), found);
            answered += 1;
        }
        full = output.buffer.len() >= output.flush_bytes;
    });
    // After an engine error the keys not answered yet are asked again: the next batch starts
    // after the ones answered, and a first key that could not be answered is looked up on
    // its own, which reports the failure if it is this key's.
    debug_assert!(
        answered > 0 || keys.is_empty() || looked_up.is_err(),
        "get_many visits every index, the first one included"
    );
    if answered == 0 {
        if let Some(key) = keys.first() {
            return retrieve(shared, key, with_cas, None, output).then_some(1);
        }
    }
    Some(answered)
}

/// Appends `VALUE key flags length [cas]\r\ndata\r\n`.
fn write_value<S: Stream>(output: &mut Output<S>, key: &[u8], found: Found<'_>, with_cas: bool) {
    let buffer = &mut output.buffer;
    buffer.extend_from_slice(b"VALUE ");
    buffer.extend_from_slice(key);
    let header = found.header;
    // Written in place: no intermediate String per value of a multi-get.
    let _ = if with_cas {
        write!(buffer, " {} {} {}\r\n", header.flags, found.data.len(), header.cas)
    } else {
        write!(buffer, " {} {}\r\n", header.flags, found.data.len())
    };
    buffer.extend_from_slice(found.data);
    buffer.extend_from_slice(b"\r\n");
}

/// Writes `VALUE key flags length [cas]\r\ndata\r\n` for one key of a retrieval, if live;
/// false when the engine failed (its `SERVER_ERROR` is written instead and the retrieval
/// ends there, without `END`, as memcached ends a get it cannot complete).
fn retrieve<S: Stream>(
    shared: &Shared,
    key: &[u8],
    with_cas: bool,
    touch: Option<i64>,
    output: &mut Output<S>,
) -> bool {
    let counters = &shared.store.counters;
    let mut hit = false;
    let mut write = |found: Option<Found<'_>>| {
        let Some(found) = found else { return };
        hit = true;
        write_value(output, key, found, with_cas);
    };
    let done = match touch {
        Some(exptime) => shared.store.touch(key, exptime, CasShown::when(with_cas), &mut write),
        None => shared.store.get(key, CasShown::when(with_cas), &mut write),
    };
    bump(if touch.is_some() { &counters.cmd_touch } else { &counters.cmd_get });
    if let Err(e) = done {
        let command = if touch.is_some() { "gat" } else { "get" };
        output.push(&failure::reply(counters, command, key.len(), &e));
        return false;
    }
    match (touch.is_some(), hit) {
        (true, true) => bump(&counters.touch_hits),
        (true, false) => bump(&counters.touch_misses),
        (false, true) => bump(&counters.get_hits),
        (false, false) => bump(&counters.get_misses),
    }
    true
}

/// The requests that need no data block and no streaming.
fn execute<S: Stream>(shared: &Arc<Shared>, request: Request<'_>, output: &mut Output<S>) {
    let store = &shared.store;
    let counters = &store.counters;
    match request {
        Request::Delete { key, noreply } => {
            let bytes = match store.delete(key) {
                Ok(true) => {
                    bump(&counters.delete_hits);
                    reply::DELETED
                }
                Ok(false) => {
                    bump(&counters.delete_misses);
                    reply::NOT_FOUND
                }
                Err(e) => return output.reply(noreply, &failure::reply(counters, "delete", key.len(), &e)),
            };
            output.reply(noreply, bytes);
        }
        Request::Arithmetic { key, delta, incr, noreply } => match store.arithmetic(key, delta, incr) {
            Ok(ArithmeticOutcome::Value(value, _)) => output.reply(noreply, format!("{value}\r\n").as_bytes()),
            Ok(ArithmeticOutcome::NotFound) => output.reply(noreply, reply::NOT_FOUND),
            Ok(ArithmeticOutcome::NonNumeric) => output.reply(noreply, reply::NON_NUMERIC),
            Ok(ArithmeticOutcome::Exists | ArithmeticOutcome::Created(..)) => {
                debug_assert!(false, "incr/decr compares no CAS and creates nothing");
                output.reply(noreply, reply::ERROR);
            }
            Err(e) => {
                let command = if incr { "incr" } else { "decr" };
                output.reply(noreply, &failure::reply(counters, command, key.len(), &e));
            }
        },
        Request::Touch { key, exptime, noreply } => {
            let touched = match store.touch_only(key, exptime) {
                Ok(touched) => touched,
                Err(e) => {
                    bump(&counters.cmd_touch);
                    return output.reply(noreply, &failure::reply(counters, "touch", key.len(), &e));
                }
            };
            bump(&counters.cmd_touch);
            bump(if touched { &counters.touch_hits } else { &counters.touch_misses });
            output.reply(noreply, if touched { reply::TOUCHED } else { reply::NOT_FOUND });
        }
        Request::FlushAll { delay, noreply } => {
            bump(&counters.cmd_flush);
            match shared.flush_all(delay) {
                Ok(()) => output.reply(noreply, reply::OK),
                Err(e) => output.reply(noreply, &failure::reply(counters, "flush_all", 0, &e)),
            }
        }
        Request::Stats(group) => {
            let text = shared.stats(group);
            output.push(text.as_bytes());
        }
        Request::Version => output.push(format!("VERSION {}\r\n", reply::VERSION).as_bytes()),
        Request::Verbosity { noreply } => output.reply(noreply, reply::OK),
        Request::Meta { command, words } => {
            bump(&counters.cmd_meta);
            let out = &mut output.buffer;
            match command {
                b'n' => out.extend_from_slice(b"MN\r\n"),
                b'g' => meta_command::get(store, &words, out),
                b'd' => meta_command::delete(store, &words, out),
                b'a' => meta_command::arithmetic(store, &words, out),
                b'e' => meta_command::debug(store, &words, out),
                _ => out.extend_from_slice(reply::ERROR),
            }
        }
        Request::Reply { bytes, noreply } => output.reply(noreply, bytes),
        // Handled by `process` before it gets here.
        Request::Store(_) | Request::RefusedStore { .. } | Request::Get { .. } | Request::Quit | Request::Close => {}
    }
}
