//! Engine errors are seen (issue 41, item 6): a damaged record of a served file and an I/O
//! error while writing one are answered `SERVER_ERROR <kind>: <message>` (never a miss, never
//! a made-up "out of memory"), logged on stderr with the key's length (not the key) and counted
//! in `stats engine_errors`; and `-v`/`-vv` log protocol errors and commands.
#![expect(
    clippy::unwrap_used,
    clippy::indexing_slicing,
    reason = "a test fails loudly on the first broken expectation"
)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// Starts `kura serve ARGS --port 0` with stderr captured; returns the child and its port.
fn serve(args: &[&str], command: &mut Command) -> (Child, u16) {
    let mut child = command
        .arg("serve")
        .args(args)
        .args(["--port", "0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.as_mut().unwrap()).read_line(&mut line).unwrap();
    let address = line.split_whitespace().nth(4).unwrap_or_else(|| panic!("no address in {line:?}"));
    (child, address.rsplit(':').next().unwrap().parse().unwrap())
}

fn kura() -> Command {
    Command::new(env!("CARGO_BIN_EXE_kura"))
}

/// Stops the server with SIGTERM and returns what it wrote on stderr.
fn stop(mut child: Child) -> String {
    // SAFETY: `kill` on the pid of a child this test started and has not yet waited for.
    assert_eq!(unsafe { libc::kill(i32::try_from(child.id()).unwrap(), libc::SIGTERM) }, 0);
    child.wait().unwrap();
    let mut stderr = String::new();
    child.stderr.as_mut().unwrap().read_to_string(&mut stderr).unwrap();
    stderr
}

struct Client(TcpStream);

impl Client {
    fn connect(port: u16) -> Client {
        let stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
        stream.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        Client(stream)
    }

    /// Sends `request` and reads `lines` reply lines.
    fn ask(&mut self, request: &[u8], lines: usize) -> String {
        self.0.write_all(request).unwrap();
        let mut reply = Vec::new();
        let mut byte = [0u8];
        while reply.iter().filter(|b| **b == b'\n').count() < lines {
            assert_eq!(self.0.read(&mut byte).unwrap(), 1, "closed after {:?}", String::from_utf8_lossy(&reply));
            reply.push(byte[0]);
        }
        String::from_utf8_lossy(&reply).into_owned()
    }

    fn stat(&mut self, name: &str) -> u64 {
        self.0.write_all(b"stats\r\n").unwrap();
        let mut text = String::new();
        while !text.ends_with("END\r\n") {
            text.push_str(&self.ask(b"", 1));
        }
        let prefix = format!("STAT {name} ");
        text.lines().find_map(|line| line.strip_prefix(&prefix)).unwrap().parse().unwrap()
    }
}

/// Flips one byte of the only occurrence of `needle` in the file.
fn damage(path: &Path, needle: &[u8]) {
    let mut bytes = std::fs::read(path).unwrap();
    let at = bytes.windows(needle.len()).position(|w| w == needle).unwrap();
    assert!(bytes[at + 1..].windows(needle.len()).all(|w| w != needle), "the value is in the file twice");
    bytes[at + 3] ^= 0x20;
    std::fs::write(path, bytes).unwrap();
}

#[test]
fn a_damaged_record_is_a_server_error_logged_and_counted() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("served.kuh");
    let path_text = path.to_str().unwrap();
    let (child, port) = serve(&[path_text], &mut kura());
    let mut client = Client::connect(port);
    assert_eq!(client.ask(b"set victim 0 0 20\r\nDAMAGE-ME-0123456789\r\n", 1), "STORED\r\n");
    assert_eq!(client.ask(b"set healthy 0 0 2\r\nok\r\n", 1), "STORED\r\n");
    drop(client);
    stop(child);
    damage(&path, b"DAMAGE-ME-0123456789");

    let (child, port) = serve(&[path_text], &mut kura());
    let mut client = Client::connect(port);
    let reply = client.ask(b"get victim\r\n", 1);
    assert!(reply.starts_with("SERVER_ERROR broken data: ") && reply.ends_with("\r\n"), "{reply:?}");
    // A multi-get answers the keys before the failing one, then the error, and no END.
    let reply = client.ask(b"get healthy victim\r\n", 3);
    assert!(reply.starts_with("VALUE healthy 0 2\r\nok\r\nSERVER_ERROR broken data: "), "{reply:?}");
    let reply = client.ask(b"mg victim v\r\n", 1);
    assert!(reply.starts_with("SERVER_ERROR broken data: "), "{reply:?}");
    // The connection goes on, and the healthy record reads.
    assert_eq!(client.ask(b"get healthy\r\n", 3), "VALUE healthy 0 2\r\nok\r\nEND\r\n");
    assert_eq!(client.stat("engine_errors"), 3);
    assert_eq!(client.stat("get_misses"), 0, "a failed read is no miss");
    drop(client);
    let stderr = stop(child);
    assert!(stderr.contains("engine error on get (key of 6 bytes): broken data: "), "{stderr}");
    assert!(stderr.contains("engine error on mg (key of 6 bytes): broken data: "), "{stderr}");
    assert!(!stderr.contains("victim"), "the log shows the key: {stderr}");
}

#[test]
fn an_io_error_on_a_write_is_a_server_error_logged_and_counted() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("small.kuh");
    let path_text = path.to_str().unwrap();
    let params = ["--params", "num_buckets=1000"];
    let (child, port) = serve(&[path_text, params[0], params[1]], &mut kura());
    assert_eq!(Client::connect(port).ask(b"set first 0 0 1\r\nx\r\n", 1), "STORED\r\n");
    stop(child);
    // No file may grow past 1 MiB (RLIMIT_FSIZE; the database opens, its journal included),
    // with SIGXFSZ ignored so that a write past it fails with EFBIG instead of killing the
    // server (as disk_full.rs does where it cannot mount a small tmpfs).
    let size: u64 = 1 << 20;
    assert!(std::fs::metadata(&path).unwrap().len() < size);
    let mut command = kura();
    // SAFETY: between fork and exec the closure calls only setrlimit and signal, which are
    // async-signal-safe, on values it owns.
    unsafe {
        command.pre_exec(move || {
            let limit = libc::rlimit { rlim_cur: size, rlim_max: libc::RLIM_INFINITY };
            libc::setrlimit(libc::RLIMIT_FSIZE, &limit);
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            Ok(())
        });
    }
    let (child, port) = serve(&[path_text, params[0], params[1], "-I", "4m", "-m", "8"], &mut command);
    let mut client = Client::connect(port);
    let big = vec![b'v'; 3 << 20];
    let mut request = b"set big 0 0 3145728\r\n".to_vec();
    request.extend_from_slice(&big);
    request.extend_from_slice(b"\r\n");
    let reply = client.ask(&request, 1);
    assert!(reply.starts_with("SERVER_ERROR I/O error: ") && reply.ends_with("\r\n"), "{reply:?}");
    assert!(!reply.contains("out of memory"), "{reply:?}");
    assert_eq!(client.ask(b"get first\r\n", 3), "VALUE first 0 1\r\nx\r\nEND\r\n");
    assert_eq!(client.stat("engine_errors"), 1);
    drop(client);
    let stderr = stop(child);
    assert!(stderr.contains("engine error on set (key of 3 bytes): I/O error: "), "{stderr}");
}

#[test]
fn verbose_logs_protocol_errors_and_very_verbose_each_command() {
    for (flag, commands_logged) in [("-v", false), ("-vv", true)] {
        let (child, port) = serve(&[flag], &mut kura());
        let mut client = Client::connect(port);
        assert_eq!(client.ask(b"bogus\r\n", 1), "ERROR\r\n");
        assert_eq!(client.ask(b"set k 0 0 1\r\nx\r\nget k\r\n", 4), "STORED\r\nVALUE k 0 1\r\nx\r\nEND\r\n");
        drop(client);
        std::thread::sleep(Duration::from_millis(100));
        let stderr = stop(child);
        assert!(stderr.contains("<1 bogus\n") == commands_logged, "{flag}: {stderr}");
        assert!(stderr.contains(">1 ERROR\n"), "{flag}: {stderr}");
        assert_eq!(stderr.contains("<1 get k\n>1 VALUE k 0 1\n"), commands_logged, "{flag}: {stderr}");
        assert_eq!(stderr.contains("<1 new client connection"), commands_logged, "{flag}: {stderr}");
    }
}
