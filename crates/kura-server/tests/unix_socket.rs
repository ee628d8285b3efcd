//! A unix socket (`-s PATH -a MODE`): the same protocol as over TCP, the socket file made
//! with the mode asked and removed at the stop, a stale socket file replaced, and a file of
//! any other type never deleted.
#![expect(clippy::unwrap_used, reason = "a test fails loudly on the first broken expectation")]

use std::io::{Read, Write};
use std::os::unix::fs::{FileTypeExt as _, PermissionsExt as _};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

use kura::Params;
use kura_server::{Address, Config, Server, UnixSocket};

/// Runs a server on `socket` in a thread until the returned sender is used or dropped.
fn serve(socket: UnixSocket) -> (tokio::sync::oneshot::Sender<()>, std::thread::JoinHandle<()>) {
    serve_with(Config { unix_socket: Some(socket), ..Config::default() })
}

/// Runs a server with `config` (which names a unix socket) in a thread, as `serve`.
fn serve_with(config: Config) -> (tokio::sync::oneshot::Sender<()>, std::thread::JoinHandle<()>) {
    let db = kura::registry::engine("cache")
        .unwrap()
        .open(Path::new(""), kura::OpenMode::Create, &Params::new().with("cap_rec_num", 1000))
        .unwrap();
    let (ready, listening) = std::sync::mpsc::channel();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let thread = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        runtime.block_on(async move {
            let server = Server::bind(config, db.into(), 2).await.unwrap();
            ready.send(server.address().unwrap()).unwrap();
            server.run(async move { drop(stopped.await) }).await.unwrap();
        });
    });
    assert!(matches!(listening.recv().unwrap(), Address::Unix(_)));
    (stop, thread)
}

fn roundtrip(path: &Path, request: &[u8], expected: &[u8]) {
    let mut stream = UnixStream::connect(path).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    stream.write_all(request).unwrap();
    let mut reply = vec![0u8; expected.len()];
    stream.read_exact(&mut reply).unwrap();
    assert_eq!(String::from_utf8_lossy(&reply), String::from_utf8_lossy(expected));
}

fn mode(path: &Path) -> u32 {
    std::fs::symlink_metadata(path).unwrap().permissions().mode() & 0o777
}

#[test]
fn the_socket_serves_the_protocol_with_the_mode_asked_and_is_removed_at_the_stop() {
    let dir = tempfile::tempdir().unwrap();
    for asked in [0o700, 0o770, 0o777] {
        let path = dir.path().join(format!("kura-{asked:o}.sock"));
        let (stop, thread) = serve(UnixSocket { path: path.clone(), mode: asked });
        assert!(std::fs::symlink_metadata(&path).unwrap().file_type().is_socket());
        assert_eq!(mode(&path), asked, "{}", path.display());
        roundtrip(&path, b"set a 0 0 2\r\nhi\r\nget a\r\n", b"STORED\r\nVALUE a 0 2\r\nhi\r\nEND\r\n");
        let settings = format!("STAT domain_socket {}\r\nSTAT umask {asked:o}\r\n", path.display());
        let mut stream = UnixStream::connect(&path).unwrap();
        stream.write_all(b"stats settings\r\nquit\r\n").unwrap();
        let mut reply = String::new();
        stream.read_to_string(&mut reply).unwrap();
        assert!(reply.contains(&settings), "{reply}");
        stop.send(()).unwrap();
        thread.join().unwrap();
        assert!(!path.exists(), "the socket file outlived the server");
    }
}

#[test]
fn a_stale_socket_file_is_replaced_and_any_other_file_is_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("stale.sock");
    // A socket file whose server is gone, as after a kill -9.
    drop(std::os::unix::net::UnixListener::bind(&path).unwrap());
    let (stop, thread) = serve(UnixSocket::new(&path));
    roundtrip(&path, b"version\r\n", b"VERSION 1.6.18-kura\r\n");
    drop(stop);
    thread.join().unwrap();

    let file = dir.path().join("data.txt");
    std::fs::write(&file, b"not a socket").unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let config = Config { unix_socket: Some(UnixSocket::new(&file)), ..Config::default() };
    let db = kura::registry::engine("tiny").unwrap().open(Path::new(""), kura::OpenMode::Create, &Params::new());
    let error = runtime.block_on(Server::bind(config, db.unwrap().into(), 1)).err().unwrap().to_string();
    assert!(error.contains("is not a socket"), "{error}");
    assert_eq!(std::fs::read(&file).unwrap(), b"not a socket");
}

#[test]
fn memcached_tool_reads_the_items_over_the_socket() {
    const TOOL: &str = "/usr/share/memcached/scripts/memcached-tool";
    if !Path::new(TOOL).exists() || !Path::new("/usr/bin/perl").exists() {
        println!("skipped: {TOOL} or perl is absent (Debian package memcached)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kura.sock");
    let (_stop, _thread) = serve(UnixSocket::new(&path));
    roundtrip(&path, b"set a 0 0 1\r\nx\r\nset b 0 0 1\r\ny\r\n", b"STORED\r\nSTORED\r\n");
    let output = std::process::Command::new("/usr/bin/perl").arg(TOOL).arg(&path).arg("display").output().unwrap();
    let display = String::from_utf8(output.stdout).unwrap();
    assert!(output.status.success() && output.stderr.is_empty(), "{display}");
    let class: Vec<&str> = display.lines().nth(1).unwrap().split_whitespace().collect();
    assert_eq!(class.get(4), Some(&"2"), "{display}");
}

#[test]
fn authentication_answers_over_the_socket_as_over_tcp() {
    let dir = tempfile::tempdir().unwrap();
    let users = dir.path().join("users");
    std::fs::write(&users, "alice:secret\n").unwrap();
    let path = dir.path().join("kura.sock");
    let socket = UnixSocket::new(&path);
    let (stop, thread) = serve_with(Config { unix_socket: Some(socket), auth_file: Some(users), ..Config::default() });
    roundtrip(&path, b"get k\r\n", b"CLIENT_ERROR unauthenticated\r\n");
    roundtrip(
        &path,
        b"set a 0 0 12\r\nalice secret\r\nset k 0 0 2\r\nhi\r\nget k\r\n",
        b"STORED\r\nSTORED\r\nVALUE k 0 2\r\nhi\r\nEND\r\n",
    );
    drop(stop);
    thread.join().unwrap();
}
