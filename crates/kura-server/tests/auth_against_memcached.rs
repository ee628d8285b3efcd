//! `-Y` authentication side by side with memcached 1.6.18 `-Y`: the same byte sequences sent
//! to both, every reply compared byte for byte: before and after authenticating, wrong
//! passwords, malformed attempts, credentials split across writes, an empty file (nobody
//! gets in), and files memcached refuses (comments, empty lines, lines without `:`), which
//! `kura serve` refuses too. Then `stats` counts the attempts, and SIGHUP reloads the file.
//!
//! Requests are sent one at a time and their replies read before the next: memcached
//! overwrites the reply of one unauthenticated request with the next one's when several
//! arrive in one read (docs/server.md), which Kura does not copy.

#![expect(clippy::unwrap_used, reason = "a test fails loudly on the first broken expectation")]

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::Duration;

use kura_server::Config;

/// One step of a session: bytes sent, then the number of reply lines both must send (0: none,
/// checked by the next step's reply).
type Step = (&'static [u8], usize);

/// A long line with no end: both servers close the connection.
const CLOSES: &[u8] = &[b'x'; 2100];

const SESSIONS: &[&[Step]] = &[
    // Everything before authenticating is refused, whatever the command.
    &[
        (b"get foo\r\n", 1),
        (b"version\r\n", 1),
        (b"stats\r\n", 1),
        (b"bogus\r\n", 1),
        (b"mn\r\n", 1),
        (b"mg foo v\r\n", 1),
        (b"quit\r\n", 1),
        (b"\r\n", 1),
        (b"verbosity 1\r\n", 1),
        (b"add a 0 0 12\r\n", 1),
        (b"alice secret\r\n", 1),
        (b"SET a 0 0 12\r\n", 1),
        (b"set a 0 0\r\n", 1),
        (b"set a 0 0 -1\r\n", 1),
        (b"set a 0 0 1a\r\n", 1),
        (b"set\ta 0 0 12\r\n", 1),
        // Then the right credentials: STORED, and the connection is served.
        (b"set a 0 0 12\r\nalice secret\r\n", 1),
        (b"get a\r\n", 1),
        (b"set a 0 0 1\r\nx\r\n", 1),
        (b"get a\r\n", 3),
        (b"delete a\r\n", 1),
        (b"mn\r\n", 1),
    ],
    // Wrong credentials, then right ones split across writes.
    &[
        (b"set a 0 0 11\r\nalice wrong\r\n", 1),
        (b"get a\r\n", 1),
        (b"set a 0 0 11\r\nalice secre\r\n", 1),
        (b"set a 0 0 12\r\nalicx secret\r\n", 1),
        (b"set a 0 0 11\r\nbob secrett\r\n", 1),
        (b"set a 0 0 7\r\nbob:pw2\r\n", 1),
        (b"set a 0 0 1\r\na\r\n", 1),
        (b"set a 0 0 0\r\n\r\n", 1),
        (b"set a 0 0 1\r\n \r\n", 1),
        (b"set a 0 0 12\r\nalice\tsecret\r\n", 1),
        (b"set a 0 0 13\r\nalice\0 secret\r\n", 1),
        (b"set a 0 0 12\r\nalice secretXX", 1),
        (b"get a\r\n", 1),
        (b"set a 0 0 13\r\nalice secret\r\r\n", 1),
        (b"set k 0 0 12\r\n", 0),
        (b"alice ", 0),
        (b"secret\r\n", 1),
        (b"version\r\n", 0),
    ],
    // Looser forms memcached takes: extra words, noreply (still answered), spaces, a NUL.
    &[(b"set a 0 0 12 noreply\r\nalice secret\r\n", 1), (b"get a\r\n", 1)],
    &[(b"   set  k  0 0 +12 x y z\r\nalice secret\r\n", 1), (b"get k\r\n", 1)],
    &[(b"set k 0 0 12\0zz\r\nalice secret\r\n", 1), (b"get k\r\n", 1)],
    &[(b"set k 0 0 12\rx\r\nalice secret\r\n", 1), (b"get k\r\n", 1)],
    &[(b"set k 0 0 18\r\nalice secret extra\r\n", 1), (b"get k\r\n", 1)],
    &[(b"set k 0 0 14\r\n alice secret \r\n", 1), (b"get k\r\n", 1)],
    &[(b"set k 0 0 14\r\nalice secret\0x\r\n", 1), (b"get k\r\n", 1)],
    &[(b"set k 0 0 7\r\nbob pw2\r\n", 1), (b"get k\r\n", 1)],
    &[(b"set k 0 0 13\r\nalice  secret\r\n", 1), (b"get k\r\n", 1)],
    // A line with no end past 2,048 bytes closes the connection on both.
    &[(b"get a\r\n", 1), (CLOSES, 0)],
];

struct Connection {
    stream: TcpStream,
}

impl Connection {
    fn open(port: u16) -> Connection {
        let stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
        stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        Connection { stream }
    }

    fn lines(&mut self, count: usize) -> Vec<u8> {
        let mut reply = Vec::new();
        let mut byte = [0u8];
        while reply.iter().filter(|b| **b == b'\n').count() < count {
            let read = self.stream.read(&mut byte);
            let read = read.unwrap_or_else(|e| panic!("{e}: after {:?}", reply.escape_ascii().to_string()));
            if read == 0 {
                reply.extend_from_slice(b"<closed>");
                break;
            }
            reply.push(byte[0]);
        }
        reply
    }

    /// True once the peer has closed the connection (a reset counts).
    fn closed(&mut self) -> bool {
        let mut sink = [0u8; 64];
        matches!(self.stream.read(&mut sink), Ok(0) | Err(_))
    }
}

fn kura_with(auth_file: &Path) -> support::Running {
    support::start(Config { auth_file: Some(auth_file.to_path_buf()), ..Config::default() }, support::cache())
}

/// Runs every session on both servers and compares the replies step by step.
fn compare_sessions(kura_port: u16, memcached_port: u16, sessions: &[&[Step]]) {
    for (number, session) in sessions.iter().enumerate() {
        let mut kura = Connection::open(kura_port);
        let mut memcached = Connection::open(memcached_port);
        for (request, lines) in session.iter() {
            kura.stream.write_all(request).unwrap();
            memcached.stream.write_all(request).unwrap();
            if *request == CLOSES {
                assert!(memcached.closed() && kura.closed(), "session {number}: a line with no end stays open");
                continue;
            }
            let expected = memcached.lines(*lines);
            let got = kura.lines(*lines);
            assert_eq!(
                got.escape_ascii().to_string(),
                expected.escape_ascii().to_string(),
                "session {number}, after {}",
                request.escape_ascii()
            );
        }
    }
}

#[test]
fn authentication_answers_as_memcached_does() {
    if support::memcached::binary().is_none() {
        eprintln!("memcached is not installed: the side-by-side authentication test is skipped");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("users");
    std::fs::write(&file, "alice:secret\nbob:pw2\n").unwrap();
    let memcached = support::memcached::start(&["-Y", file.to_str().unwrap()]).unwrap();
    let kura = kura_with(&file);
    compare_sessions(kura.address.port(), memcached.port, SESSIONS);

    // An empty file starts both, and nobody gets in.
    let empty = dir.path().join("empty");
    std::fs::write(&empty, "").unwrap();
    let memcached = support::memcached::start(&["-Y", empty.to_str().unwrap()]).unwrap();
    let kura = kura_with(&empty);
    let nobody: &[Step] = &[(b"set a 0 0 12\r\nalice secret\r\n", 1), (b"set a 0 0 1\r\nx\r\n", 1), (b"get a\r\n", 1)];
    compare_sessions(kura.address.port(), memcached.port, &[nobody]);
}

#[test]
fn files_memcached_refuses_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    for (name, text) in [
        ("commented", "# the users\nalice:secret\n"),
        ("blank", "alice:secret\n\nbob:pw2\n"),
        ("bad", "alice:secret\nbob\n"),
    ] {
        let file = dir.path().join(name);
        std::fs::write(&file, text).unwrap();
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let config = Config { auth_file: Some(file.clone()), port: 0, ..Config::default() };
        let refused = runtime.block_on(kura_server::Server::bind(config, support::cache(), 1));
        let error = refused.err().unwrap_or_else(|| panic!("{name}: kura serve started"));
        assert!(error.to_string().contains("is not user:password"), "{name}: {error}");
        if let Some(binary) = support::memcached::binary() {
            let mut command = std::process::Command::new(binary);
            command.args(["-l", "127.0.0.1", "-p", &support::listening::free_port().to_string(), "-U", "0"]);
            // SAFETY: geteuid has no preconditions.
            if unsafe { libc::geteuid() } == 0 {
                command.args(["-u", "root"]);
            }
            let status =
                command.args(["-Y", file.to_str().unwrap()]).stderr(std::process::Stdio::null()).status().unwrap();
            assert!(!status.success(), "{name}: memcached started");
        }
    }
}

#[test]
fn attempts_are_counted_and_sighup_reloads_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("users");
    std::fs::write(&file, "alice:secret\n").unwrap();
    let kura = kura_with(&file);
    let mut client = support::Client::connect(kura.address);
    // Pipelined requests each get their reply (memcached answers only the last of a batch).
    client.roundtrip(b"get a\r\nget b\r\n", b"CLIENT_ERROR unauthenticated\r\nCLIENT_ERROR unauthenticated\r\n");
    client.roundtrip(b"set a 0 0 7\r\nbob pw2\r\n", b"CLIENT_ERROR authentication failure\r\n");
    client.roundtrip(b"set a 0 0 12\r\nalice secret\r\n", b"STORED\r\n");
    client.send(b"stats\r\n");
    let mut stats = String::new();
    while !stats.ends_with("END\r\n") {
        stats.push_str(&String::from_utf8(client.line()).unwrap());
    }
    assert!(stats.contains("STAT auth_cmds 2\r\n") && stats.contains("STAT auth_errors 1\r\n"), "{stats}");

    std::fs::write(&file, "bob:pw2\n").unwrap();
    // SAFETY: sends SIGHUP to this very process, whose server task handles it.
    assert_eq!(unsafe { libc::kill(libc::getpid(), libc::SIGHUP) }, 0);
    let started = std::time::Instant::now();
    loop {
        let mut fresh = support::Client::connect(kura.address);
        fresh.send(b"set a 0 0 7\r\nbob pw2\r\n");
        if fresh.line() == b"STORED\r\n" {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(10), "SIGHUP did not reload the auth file");
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut old = support::Client::connect(kura.address);
    old.roundtrip(b"set a 0 0 12\r\nalice secret\r\n", b"CLIENT_ERROR authentication failure\r\n");
    // A file that no longer reads keeps the users loaded before.
    std::fs::write(&file, "no colon here\n").unwrap();
    // SAFETY: as above.
    assert_eq!(unsafe { libc::kill(libc::getpid(), libc::SIGHUP) }, 0);
    std::thread::sleep(Duration::from_millis(200));
    let mut still = support::Client::connect(kura.address);
    still.roundtrip(b"set a 0 0 7\r\nbob pw2\r\n", b"STORED\r\n");
}
