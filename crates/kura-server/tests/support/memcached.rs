//! A real memcached (Debian's 1.6.18) started on a free loopback port with the given flags,
//! for tests that compare `kura serve` with it. None where no memcached is installed (the
//! tests then say so and pass).

use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A memcached process, killed when dropped.
pub struct Memcached {
    child: Child,
    pub port: u16,
}

impl Drop for Memcached {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn binary() -> Option<&'static str> {
    ["/usr/bin/memcached", "/usr/local/bin/memcached"].into_iter().find(|path| std::path::Path::new(path).exists())
}

/// A free loopback port (bound and released: another process could take it in between,
/// which the tests accept as the other memcached tests do).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Starts memcached with `flags` after `-l 127.0.0.1 -p PORT -U 0` and waits until it
/// listens. Root must name a user (`-u root`); memcached refuses to run as root otherwise.
pub fn start(flags: &[&str]) -> Option<Memcached> {
    let binary = binary()?;
    let port = free_port();
    let mut command = Command::new(binary);
    command.args(["-l", "127.0.0.1", "-p", &port.to_string(), "-U", "0"]).args(flags);
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } == 0 {
        command.args(["-u", "root"]);
    }
    let mut child = command.stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
    let started = Instant::now();
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        if let Some(status) = child.try_wait().unwrap() {
            panic!("memcached {flags:?} exited: {status}");
        }
        assert!(started.elapsed() < Duration::from_secs(10), "memcached did not start listening");
        std::thread::sleep(Duration::from_millis(10));
    }
    Some(Memcached { child, port })
}
