//! A server started in-process on a free loopback port, and a blocking client for tests.
#![allow(dead_code, reason = "each test file uses part of the support code")]
#![expect(clippy::unwrap_used, reason = "a test fails loudly on the first broken expectation")]

pub mod listening;
pub mod memcached;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use kura::{Dbm, Params};
use kura_server::{Config, Server};

/// A running server; dropping it stops it and waits for the stop.
pub struct Running {
    pub address: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            thread.join().unwrap();
        }
    }
}

/// A small in-memory cache of the engine `kura serve` serves by default (SegCacheDbm).
/// A TreeDbm at `dir/served.kut`: an engine whose batched read shows values in key order.
pub fn tree(dir: &std::path::Path) -> Arc<dyn Dbm> {
    Arc::from(
        kura::registry::engine("tree")
            .unwrap()
            .open(&dir.join("served.kut"), kura::OpenMode::Create, &Params::new())
            .unwrap(),
    )
}

pub fn cache() -> Arc<dyn Dbm> {
    let params = Params::new().with("cap_rec_num", 100_000).with("cap_mem_bytes", 64 << 20);
    Arc::from(
        kura::registry::engine("segcache")
            .unwrap()
            .open(std::path::Path::new(""), kura::OpenMode::Create, &params)
            .unwrap(),
    )
}

pub fn start(config: Config, db: Arc<dyn Dbm>) -> Running {
    let (address_sender, address_receiver) = std::sync::mpsc::channel();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let thread = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        runtime.block_on(async move {
            let server = Server::bind(Config { port: 0, ..config }, db, 2).await.unwrap();
            address_sender.send(server.local_addr().unwrap()).unwrap();
            server
                .run(async move {
                    let _ = stopped.await;
                })
                .await
                .unwrap();
        });
    });
    let address = address_receiver.recv().unwrap();
    Running { address, stop: Some(stop), thread: Some(thread) }
}

pub fn start_default() -> Running {
    start(Config::default(), cache())
}

/// A blocking client reading exact replies.
pub struct Client {
    pub stream: TcpStream,
}

impl Client {
    pub fn connect(address: SocketAddr) -> Client {
        let stream = TcpStream::connect(address).unwrap();
        stream.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        stream.set_nodelay(true).unwrap();
        Client { stream }
    }

    pub fn send(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).unwrap();
    }

    /// Reads exactly `expected.len()` bytes and compares them with `expected`, byte for byte
    /// (shown escaped: keys hold any byte, and UTF-8 decoding would hide differences).
    pub fn expect(&mut self, expected: &[u8]) {
        let mut got = vec![0u8; expected.len()];
        self.stream.read_exact(&mut got).unwrap();
        assert_eq!(got.escape_ascii().to_string(), expected.escape_ascii().to_string());
    }

    /// Sends a request and checks its whole reply.
    pub fn roundtrip(&mut self, request: &[u8], expected: &[u8]) {
        self.send(request);
        self.expect(expected);
    }

    /// Reads one line (through `\r\n`).
    pub fn line(&mut self) -> Vec<u8> {
        let mut line = Vec::new();
        let mut byte = [0u8];
        while !line.ends_with(b"\r\n") {
            self.stream.read_exact(&mut byte).unwrap();
            line.push(byte[0]);
        }
        line
    }

    /// Sends a request and reads its one-line reply.
    pub fn exchange_line(&mut self, request: &[u8]) -> Vec<u8> {
        self.send(request);
        self.line()
    }

    /// The CAS unique of `key` from `gets`.
    pub fn cas_of(&mut self, key: &str) -> u64 {
        self.send(format!("gets {key}\r\n").as_bytes());
        let header = String::from_utf8(self.line()).unwrap();
        let cas = header.trim_end().rsplit(' ').next().unwrap().parse().unwrap();
        let _data = self.line();
        self.expect(b"END\r\n");
        cas
    }

    /// True once the server has closed the connection (reads until end of stream).
    pub fn closed(&mut self) -> bool {
        let mut sink = [0u8; 4096];
        loop {
            match self.stream.read(&mut sink) {
                Ok(0) => return true,
                Ok(_) => {}
                Err(_) => return false,
            }
        }
    }
}

/// Raises the soft RLIMIT_NOFILE to the hard one and returns the soft limit then in force.
pub fn raise_descriptor_limit() -> u64 {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit writes into the rlimit we own; RLIMIT_NOFILE is a valid resource.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return 1024;
    }
    let raised = libc::rlimit { rlim_cur: limit.rlim_max, rlim_max: limit.rlim_max };
    // SAFETY: setrlimit reads the rlimit we own; a soft limit up to the hard one is allowed.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
        raised.rlim_cur
    } else {
        limit.rlim_cur
    }
}
