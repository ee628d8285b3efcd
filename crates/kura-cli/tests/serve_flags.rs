//! `kura serve` takes memcached's command line (issue 41, item 2): each flag line below, the
//! kind memcached's own documentation and Debian's /etc/memcached.conf start it with, starts
//! both memcached 1.6.18 and `kura serve`, and every `stats settings` field both report must
//! agree. Then `-M` answers memcached's out-of-memory reply when full, `-C` answers CAS
//! commands as memcached -C does (compared side by side), and sizes no cache can use are
//! refused. The memcached halves are skipped, saying so, where memcached is not installed.
#![expect(
    clippy::unwrap_used,
    clippy::indexing_slicing,
    reason = "a test fails loudly on the first broken expectation"
)]

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

#[path = "../../kura-server/tests/support/listening.rs"]
mod listening;

const MEMCACHED: &str = "/usr/bin/memcached";

/// A child process (memcached or kura serve), killed when dropped.
struct Server {
    child: Child,
    port: u16,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `program` with `-l 127.0.0.1 -p PORT -U 0` and `flags` (and `-u root` for a
/// memcached run by root) on a port its own process listens on (listening.rs: a server of a
/// test running beside this one may take a free port first).
fn start(program: &str, flags: &[String]) -> Server {
    let (child, port) = listening::spawn_listening(&format!("{program} {flags:?}"), |port| {
        let mut command = Command::new(program);
        if program != MEMCACHED {
            command.arg("serve");
        }
        command.args(["-l", "127.0.0.1", "-p", &port.to_string(), "-U", "0"]).args(flags);
        // SAFETY: geteuid has no preconditions.
        if program == MEMCACHED && unsafe { libc::geteuid() } == 0 {
            command.args(["-u", "root"]);
        }
        command.stdout(Stdio::null()).stderr(Stdio::null());
        command
    });
    Server { child, port }
}

fn connect(port: u16) -> BufReader<TcpStream> {
    let stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    BufReader::new(stream)
}

fn ask(client: &mut BufReader<TcpStream>, request: &[u8]) -> String {
    client.get_mut().write_all(request).unwrap();
    let mut line = String::new();
    client.read_line(&mut line).unwrap();
    line
}

/// `stats settings` as (name, value) in the order sent (authenticating first when
/// `credentials` are given).
fn settings(port: u16, credentials: Option<&str>) -> Vec<(String, String)> {
    let mut client = connect(port);
    if let Some(credentials) = credentials {
        let request = format!("set auth 0 0 {}\r\n{credentials}\r\n", credentials.len());
        assert_eq!(ask(&mut client, request.as_bytes()), "STORED\r\n");
    }
    client.get_mut().write_all(b"stats settings\r\n").unwrap();
    let mut settings = Vec::new();
    loop {
        let mut line = String::new();
        client.read_line(&mut line).unwrap();
        if line == "END\r\n" {
            return settings;
        }
        let mut words = line.trim_end().splitn(3, ' ').skip(1);
        settings.push((words.next().unwrap().to_string(), words.next().unwrap_or_default().to_string()));
    }
}

/// The fields both servers report and this test compares (num_threads only when `-t` is
/// given: kura serve's default is one thread per CPU, memcached's 4).
const COMPARED: &[&str] = &[
    "maxbytes",
    "maxconns",
    "udpport",
    "inter",
    "verbosity",
    "evictions",
    "cas_enabled",
    "auth_enabled_sasl",
    "auth_enabled_ascii",
    "item_size_max",
    "maxconns_fast",
    "idle_timeout",
    // The unix socket's and TLS's, at their defaults (these flag lines use neither).
    "domain_socket",
    "umask",
    "ssl_enabled",
    "ssl_chain_cert",
    "ssl_key",
    "ssl_verify_mode",
    "ssl_ca_cert",
    "ssl_min_version",
];

/// The names of `settings` that `other` has too, in `settings`' order.
fn shared_names<'a>(settings: &'a [(String, String)], other: &[(String, String)]) -> Vec<&'a str> {
    settings.iter().map(|(name, _)| name.as_str()).filter(|name| other.iter().any(|(n, _)| n == name)).collect()
}

#[test]
fn memcached_flag_lines_give_memcached_settings() {
    if !std::path::Path::new(MEMCACHED).exists() {
        println!("skipped: {MEMCACHED} is absent (Debian package memcached, installed by `make deps`)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let users = dir.path().join("users");
    std::fs::write(&users, "alice:secret\n").unwrap();
    let pid_file = dir.path().join("server.pid");
    let (users, pid_file) = (users.to_str().unwrap(), pid_file.to_str().unwrap());
    let lines: &[&[&str]] = &[
        // Debian's /etc/memcached.conf (its -u is for the memcached side only).
        &["-m", "64", "-c", "1024", "-P", pid_file],
        // memcached's wiki: a bigger cache, more connections, larger items.
        &["-m", "1024", "-c", "4096", "-t", "2", "-I", "5m"],
        &["-m", "100", "-I", "1536k"],
        // No eviction, no CAS, verbose.
        &["-M", "-C", "-m", "128", "-v"],
        &["-vv", "-o", "idle_timeout=30", "-m", "2048", "-t", "4"],
        &["-Y", users, "-m", "64", "-c", "500"],
    ];
    for line in lines {
        let flags: Vec<String> = line.iter().map(ToString::to_string).collect();
        let credentials = flags.contains(&"-Y".to_string()).then_some("alice secret");
        let memcached = start(MEMCACHED, &flags);
        let expected_list = settings(memcached.port, credentials);
        drop(memcached);
        let kura = start(env!("CARGO_BIN_EXE_kura"), &flags);
        let got_list = settings(kura.port, credentials);
        // The fields both report come in memcached's order (tools diff the two).
        assert_eq!(shared_names(&got_list, &expected_list), shared_names(&expected_list, &got_list), "{line:?}: order");
        let expected: BTreeMap<String, String> = expected_list.into_iter().collect();
        let got: BTreeMap<String, String> = got_list.into_iter().collect();
        for field in COMPARED.iter().chain(flags.contains(&"-t".to_string()).then_some(&"num_threads")) {
            assert_eq!(got.get(*field), expected.get(*field), "{line:?}: stats settings {field}");
        }
        assert_eq!(got["tcpport"], kura.port.to_string(), "{line:?}");
        if flags.contains(&pid_file.to_string()) {
            let written = std::fs::read_to_string(pid_file).unwrap();
            assert_eq!(written.trim(), kura.child.id().to_string(), "-P");
        }
    }
}

#[test]
fn disable_evictions_answers_out_of_memory_when_full() {
    let kura = start(env!("CARGO_BIN_EXE_kura"), &["-M".to_string(), "-m".to_string(), "1".to_string()]);
    let mut client = connect(kura.port);
    let value = "v".repeat(1000);
    let refused = (0..5000).find_map(|i| {
        let reply = ask(&mut client, format!("set key{i} 0 0 1000\r\n{value}\r\n").as_bytes());
        (reply != "STORED\r\n").then_some((i, reply))
    });
    let (stored, reply) = refused.expect("1 MiB took 5 MB of items");
    assert_eq!(reply, "SERVER_ERROR out of memory storing object\r\n");
    assert!(stored > 100, "only {stored} items stored");
    // Nothing was evicted: the first item is still there.
    client.get_mut().write_all(b"get key0\r\n").unwrap();
    let mut header = String::new();
    client.read_line(&mut header).unwrap();
    assert_eq!(header, "VALUE key0 0 1000\r\n");
}

#[test]
fn disable_cas_answers_as_memcached_does() {
    let requests: &[&[u8]] = &[
        b"set a 0 0 1\r\nx\r\n",
        b"gets a\r\n",
        b"cas a 0 0 1 0\r\ny\r\n",
        b"cas a 0 0 1 5\r\nz\r\n",
        b"cas b 0 0 1 0\r\ny\r\n",
        b"mg a c v\r\n",
        b"ms a 1 c\r\nq\r\n",
        b"ms a 1 C0\r\nq\r\n",
        b"ms a 1 MA C5\r\nr\r\n",
        b"mg a v\r\n",
        b"md a C7\r\n",
        b"set n 0 0 1\r\n5\r\n",
        b"ma n c v\r\n",
        b"ma n C3\r\n",
        b"ma n C0 v\r\n",
        b"ms a 1 I C0\r\nq\r\n",
        b"md n I C0\r\n",
        b"mg n c v\r\n",
        b"md n C0\r\n",
        b"mg miss N30 c v\r\n",
        b"gats 0 a\r\n",
    ];
    let flags = vec!["-C".to_string()];
    let kura = start(env!("CARGO_BIN_EXE_kura"), &flags);
    let replies = |port: u16| -> Vec<String> {
        let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
        stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        requests
            .iter()
            .map(|request| {
                // Each request is followed by `mn`, whose `MN` ends the reply.
                stream.write_all(request).unwrap();
                stream.write_all(b"mn\r\n").unwrap();
                let mut reply = Vec::new();
                let mut byte = [0u8];
                while !reply.ends_with(b"MN\r\n") {
                    stream.read_exact(&mut byte).unwrap();
                    reply.push(byte[0]);
                }
                String::from_utf8_lossy(&reply).into_owned()
            })
            .collect()
    };
    let got = replies(kura.port);
    assert_eq!(got[1], "VALUE a 0 1 0\r\nx\r\nEND\r\nMN\r\n", "gets shows CAS 0");
    if !std::path::Path::new(MEMCACHED).exists() {
        println!("skipped the comparison: {MEMCACHED} is absent");
        return;
    }
    let memcached = start(MEMCACHED, &flags);
    let expected = replies(memcached.port);
    for ((request, got), expected) in requests.iter().zip(&got).zip(&expected) {
        assert_eq!(got, expected, "-C: {}", request.escape_ascii());
    }
}
