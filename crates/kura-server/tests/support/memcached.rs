//! A real memcached (Debian's 1.6.18) started on a free loopback port with the given flags,
//! for tests that compare `kura serve` with it. None where no memcached is installed (the
//! tests then say so and pass).

use std::process::{Child, Command, Stdio};

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

/// Starts memcached with `flags` after `-l 127.0.0.1 -p PORT -U 0` on a port its own process
/// listens on (support/listening.rs). Root must name a user (`-u root`); memcached refuses
/// to run as root otherwise.
pub fn start(flags: &[&str]) -> Option<Memcached> {
    let binary = binary()?;
    let (child, port) = super::listening::spawn_listening(&format!("memcached {flags:?}"), |port| {
        let mut command = Command::new(binary);
        command.args(["-l", "127.0.0.1", "-p", &port.to_string(), "-U", "0"]).args(flags);
        // SAFETY: geteuid has no preconditions and cannot fail.
        if unsafe { libc::geteuid() } == 0 {
            command.args(["-u", "root"]);
        }
        command.stdout(Stdio::null()).stderr(Stdio::null());
        command
    });
    Some(Memcached { child, port })
}
