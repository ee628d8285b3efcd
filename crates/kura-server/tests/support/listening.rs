//! Starting a server process on a free loopback port, and knowing that the server listening
//! there is ours. kura-server's tests start memcached with it (support/memcached.rs);
//! kura-cli's `serve_flags` test includes this file by path and starts memcached and `kura
//! serve` with it, so that the rule lives in one place.
//!
//! A port that was free when chosen can be taken by a server of a test running beside this
//! one before ours binds it. Waiting until something accepts on the port would then see the
//! other test's server, while ours, unable to listen, exits; the connection after the other
//! server stops is refused (a CI trial of 1b39442 failed so). A server therefore counts as
//! started only when its own process holds the port's listening socket (read from /proc), and
//! otherwise starts again on another port.

use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

/// Ports tried before giving up.
const ATTEMPTS: usize = 10;
/// How long one start may take to listen.
const START_TIMEOUT: Duration = Duration::from_secs(10);

/// A loopback port that was free a moment ago (bound and released).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Spawns `command(port)` on free ports until its own process listens on the one it was
/// given; returns the child and that port. A child that exits while nothing else holds its
/// port failed by itself (a flag it refuses, say): that panics with its exit status, naming
/// `what`, as does a start that does not listen within 10 s.
pub fn spawn_listening(what: &str, command: impl Fn(u16) -> Command) -> (Child, u16) {
    for _attempt in 0..ATTEMPTS {
        let port = free_port();
        let mut child = command(port).spawn().unwrap_or_else(|e| panic!("{what}: cannot start: {e}"));
        let started = Instant::now();
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                assert!(listening_socket(port).is_some(), "{what} exited: {status}");
                break;
            }
            if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                if listens_on(child.id(), port) {
                    return (child, port);
                }
                let _ = child.kill();
                let _ = child.wait();
                break;
            }
            assert!(started.elapsed() < START_TIMEOUT, "{what} did not listen within {START_TIMEOUT:?}");
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    panic!("{what}: every one of {ATTEMPTS} free ports was taken by another process first");
}

/// The inode of the socket listening on loopback `port`, from /proc/net/tcp.
fn listening_socket(port: u16) -> Option<String> {
    let table = std::fs::read_to_string("/proc/net/tcp").ok()?;
    table.lines().skip(1).find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let local_port = fields.get(1)?.split(':').nth(1).and_then(|hex| u16::from_str_radix(hex, 16).ok())?;
        // State 0A: listening.
        (local_port == port && fields.get(3) == Some(&"0A")).then(|| fields.get(9).map(|inode| inode.to_string()))?
    })
}

/// Whether process `pid` holds the socket listening on `port`. True where /proc cannot tell
/// (no /proc/net/tcp), as a connection that succeeded is then all there is to go by.
pub fn listens_on(pid: u32, port: u16) -> bool {
    if std::fs::metadata("/proc/net/tcp").is_err() {
        return true;
    }
    let Some(inode) = listening_socket(port) else { return false };
    let socket = format!("socket:[{inode}]");
    std::fs::read_dir(format!("/proc/{pid}/fd")).is_ok_and(|fds| {
        fds.flatten().any(|fd| std::fs::read_link(fd.path()).is_ok_and(|target| target.to_str() == Some(&socket)))
    })
}
