//! What every kill -9 test shares: re-running the test binary as a child process that does
//! the writing, reading the progress it reports on its standard output, and killing it with
//! SIGKILL. Used by `hash_crash.rs`, `tree_crash.rs` and `kill_soak.rs`, so the three tests
//! kill and observe children the same way.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// The word a child's progress lines start with.
const PROGRESS: &str = "progress ";

/// The most of a child's standard error kept for the parent's failure message (its end).
const STDERR_KEPT: usize = 8192;

/// How long a parent waits for the next progress line before it calls the child stuck.
pub const STUCK_AFTER: Duration = Duration::from_secs(60);

/// A child process running one test of this binary (`test_name`, with `env` set), whose
/// progress lines arrive on a channel.
pub struct KilledChild {
    child: Child,
    progress: Receiver<u64>,
    reader: Option<JoinHandle<()>>,
    last: Option<u64>,
    /// The end of what the child wrote to its standard error: why it died, if it did.
    stderr: Arc<Mutex<Vec<u8>>>,
}

impl KilledChild {
    /// Starts this test binary running only `test_name`, with `env` added to its environment.
    pub fn spawn(test_name: &str, env: &[(&str, String)]) -> KilledChild {
        let mut command = Command::new(std::env::current_exe().expect("the test binary has a path"));
        command
            .args(["--exact", test_name, "--nocapture", "--test-threads=1"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (name, value) in env {
            command.env(name, value);
        }
        let mut child = command.spawn().expect("the test binary starts again as a child");
        let stdout = child.stdout.take().expect("the child's stdout is piped");
        let mut child_stderr = child.stderr.take().expect("the child's stderr is piped");
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let kept = Arc::clone(&stderr);
        std::thread::spawn(move || {
            let mut chunk = [0u8; 4096];
            while let Ok(read) = child_stderr.read(&mut chunk) {
                if read == 0 {
                    break;
                }
                let mut kept = kept.lock().expect("the stderr buffer is not poisoned");
                kept.extend_from_slice(chunk.get(..read).unwrap_or_default());
                let excess = kept.len().saturating_sub(STDERR_KEPT);
                kept.drain(..excess);
            }
        });
        let (sender, progress) = mpsc::channel();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                // libtest may have printed the test's name on the same line first.
                if let Some(number) = line.rsplit_once(PROGRESS).and_then(|(_, n)| n.trim().parse().ok()) {
                    if sender.send(number).is_err() {
                        break;
                    }
                }
            }
        });
        KilledChild { child, progress, reader: Some(reader), last: None, stderr }
    }

    /// Waits until the child reports progress of at least `wanted` (progress counts up from
    /// 1, so 0 does not wait); returns the last progress seen. Panics if the child goes quiet for `STUCK_AFTER` or exits first.
    pub fn wait_for(&mut self, wanted: u64) -> Option<u64> {
        while self.last.unwrap_or(0) < wanted {
            match self.progress.recv_timeout(STUCK_AFTER) {
                Ok(number) => self.last = Some(number),
                Err(RecvTimeoutError::Timeout) => panic!("the child stopped reporting progress"),
                Err(RecvTimeoutError::Disconnected) => {
                    let _ = self.child.wait();
                    std::thread::sleep(Duration::from_millis(100));
                    let stderr =
                        self.stderr.lock().map(|s| String::from_utf8_lossy(&s).into_owned()).unwrap_or_default();
                    panic!("the child exited before progress {wanted}; the end of its stderr:\n{stderr}")
                }
            }
        }
        self.last
    }

    /// Kills the child with SIGKILL (now, or after `delay`), waits for it, and returns the
    /// last progress it reported, counting every line it wrote before it died.
    pub fn kill_after(mut self, delay: Duration) -> Option<u64> {
        if !delay.is_zero() {
            std::thread::sleep(delay);
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(reader) = self.reader.take() {
            let _ = reader.join();
        }
        while let Ok(number) = self.progress.try_recv() {
            self.last = Some(number);
        }
        self.last
    }
}

/// The child side: reports `number` to the parent. The line is written with one `write`
/// call and flushed before the child goes on, so a child killed after this call returned
/// has reported `number`.
pub fn report_progress(number: u64) {
    let mut out = std::io::stdout().lock();
    out.write_all(format!("{PROGRESS}{number}\n").as_bytes()).expect("the parent reads the child's stdout");
    out.flush().expect("the parent reads the child's stdout");
}
