//! `kura serve` as a process: acknowledged writes to a served HashDbm survive `kill -9`, a
//! SIGTERM stops it cleanly, and libmemcached's `memccapable` passes against it.
#![expect(clippy::unwrap_used, reason = "a test fails loudly on the first broken expectation")]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A `kura serve` child on a free port; killed (SIGKILL) when dropped if still running.
struct Served {
    child: Child,
    port: u16,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `kura serve ARGS --port 0` and reads the port from its "listening on" line.
fn serve(args: &[&str]) -> Served {
    let (child, port) = spawn_listening(Command::new(env!("CARGO_BIN_EXE_kura")).arg("serve").args(args));
    Served { child, port }
}

/// Spawns `command` (a `kura serve` without `--port`) on a free port and waits for its
/// "listening on" line; returns the child and its port.
fn spawn_listening(command: &mut Command) -> (Child, u16) {
    let mut child = command.args(["--port", "0"]).stdout(Stdio::piped()).spawn().unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.as_mut().unwrap()).read_line(&mut line).unwrap();
    let address = line.split_whitespace().nth(4).unwrap();
    let port = address.rsplit(':').next().unwrap().parse().unwrap();
    (child, port)
}

fn connect(port: u16) -> TcpStream {
    let stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    stream
}

fn roundtrip(stream: &mut TcpStream, request: &[u8], expected: &[u8]) {
    stream.write_all(request).unwrap();
    let mut got = vec![0u8; expected.len()];
    stream.read_exact(&mut got).unwrap();
    assert_eq!(String::from_utf8_lossy(&got), String::from_utf8_lossy(expected));
}

fn signal(child: &Child, signal: i32) {
    // SAFETY: `kill` on the pid of a child this test started and has not yet waited for.
    let sent = unsafe { libc::kill(i32::try_from(child.id()).unwrap(), signal) };
    assert_eq!(sent, 0);
}

#[test]
fn acknowledged_writes_to_a_served_hash_file_survive_kill_9() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("served.kuh");
    let path = path.to_str().unwrap();
    let served = serve(&[path]);
    let mut client = connect(served.port);
    for i in 0..500 {
        let request = format!("set key{i} {i} 0 {}\r\nvalue{i}\r\n", format!("value{i}").len());
        roundtrip(&mut client, request.as_bytes(), b"STORED\r\n");
    }
    roundtrip(
        &mut client,
        b"delete key7\r\nincr key8 1\r\n",
        b"DELETED\r\nCLIENT_ERROR cannot increment or decrement non-numeric value\r\n",
    );
    let mut served = served;
    served.child.kill().unwrap();
    served.child.wait().unwrap();
    drop(served);
    let again = serve(&[path]);
    let mut client = connect(again.port);
    for i in 0..500 {
        let expected = if i == 7 {
            "END\r\n".to_string()
        } else {
            format!("VALUE key{i} {i} {}\r\nvalue{i}\r\nEND\r\n", format!("value{i}").len())
        };
        roundtrip(&mut client, format!("get key{i}\r\n").as_bytes(), expected.as_bytes());
    }
}

#[test]
fn sigterm_stops_the_server_cleanly_and_the_file_reopens() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("stopped.kut");
    let path = path.to_str().unwrap();
    let mut served = serve(&[path]);
    let mut client = connect(served.port);
    // Pipelined writes in flight when the signal comes are finished and acknowledged.
    roundtrip(&mut client, b"set a 1 0 1\r\nx\r\nset b 2 0 1\r\ny\r\n", b"STORED\r\nSTORED\r\n");
    signal(&served.child, libc::SIGTERM);
    let status = served.child.wait().unwrap();
    assert!(status.success(), "{status:?}");
    let mut rest = String::new();
    served.child.stdout.as_mut().unwrap().read_to_string(&mut rest).unwrap();
    assert!(rest.contains("stopped, database closed"), "{rest}");
    let again = serve(&[path]);
    let mut client = connect(again.port);
    roundtrip(&mut client, b"get a b\r\n", b"VALUE a 1 1\r\nx\r\nVALUE b 2 1\r\ny\r\nEND\r\n");
}

#[test]
fn memccapable_ascii_tests_all_pass() {
    let binary = "/usr/bin/memccapable";
    if !Path::new(binary).exists() {
        println!("skipped: {binary} is absent (Debian package libmemcached-tools, installed by `make deps`)");
        return;
    }
    let served = serve(&[]);
    let output = Command::new(binary).args(["-h", "127.0.0.1", "-p", &served.port.to_string(), "-a"]).output().unwrap();
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && text.contains("All tests passed"),
        "{text}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(!text.contains("[FAIL]"), "{text}");
}

/// An in-memory engine without a memory cap (CompactDbm here) is served, and the server
/// says at start that `--memory-limit` does not bound it; the default cache says nothing.
#[test]
fn serving_an_unbounded_memory_engine_says_the_limit_does_not_bound_it() {
    for (params, warned) in [(Some("engine=compact,bucket_comp=lz4"), true), (None, false)] {
        let mut command = Command::new(env!("CARGO_BIN_EXE_kura"));
        command.arg("serve").stderr(Stdio::piped());
        if let Some(params) = params {
            command.args(["--params", params]);
        }
        let (child, port) = spawn_listening(&mut command);
        let mut stream = connect(port);
        roundtrip(&mut stream, b"set k 5 0 2\r\nhi\r\nget k\r\n", b"STORED\r\nVALUE k 5 2\r\nhi\r\nEND\r\n");
        drop(stream);
        signal(&child, libc::SIGTERM);
        let output = child.wait_with_output().unwrap();
        assert!(output.status.success());
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(stderr.contains("evicts nothing"), warned, "{params:?}: {stderr}");
    }
}
