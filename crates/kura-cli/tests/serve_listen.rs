//! `kura serve`'s listening flags as a process takes them: `-s PATH -a MODE` (a unix socket
//! instead of TCP, removed at the stop), `-Z` with memcached's `-o ssl_chain_cert=,ssl_key=`
//! (checked with `openssl s_client`), and the errors of TLS flags given wrong.
#![expect(clippy::unwrap_used, reason = "a test fails loudly on the first broken expectation")]

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::PermissionsExt as _;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

const OPENSSL: &str = "/usr/bin/openssl";

/// Starts `kura serve ARGS` and returns it with its "listening on" line.
fn serve_line(args: &[&str]) -> (Child, String) {
    let mut child =
        Command::new(env!("CARGO_BIN_EXE_kura")).arg("serve").args(args).stdout(Stdio::piped()).spawn().unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.as_mut().unwrap()).read_line(&mut line).unwrap();
    (child, line)
}

fn stop(mut child: Child) {
    // SAFETY: `kill` on the pid of a child this test started and has not yet waited for.
    let sent = unsafe { libc::kill(i32::try_from(child.id()).unwrap(), libc::SIGTERM) };
    assert_eq!(sent, 0);
    assert!(child.wait().unwrap().success());
}

#[test]
fn a_unix_socket_with_memcached_s_flags_serves_and_is_removed_at_the_stop() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kura.sock");
    let (child, line) = serve_line(&["-s", path.to_str().unwrap(), "-a", "770"]);
    let address = line.split_whitespace().nth(4).unwrap();
    assert_eq!(address, format!("unix:{}", path.display()));
    assert!(line.contains("TLS off, authentication off"), "{line}");
    assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o770);
    let mut stream = UnixStream::connect(&path).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    stream.write_all(b"set k 0 0 2\r\nhi\r\nget k\r\n").unwrap();
    let mut reply = [0u8; 30];
    stream.read_exact(&mut reply).unwrap();
    assert_eq!(&reply, b"STORED\r\nVALUE k 0 2\r\nhi\r\nEND\r\n");
    drop(stream);
    stop(child);
    assert!(!path.exists(), "the socket file outlived the server");
}

/// Runs `kura serve ARGS`, which must fail; its stderr.
fn refused(args: &[&str]) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_kura")).arg("serve").args(args).output().unwrap();
    assert!(!output.status.success(), "{args:?} started");
    String::from_utf8(output.stderr).unwrap()
}

#[test]
fn tls_flags_given_wrong_are_refused_with_the_file_and_option_named() {
    let error = refused(&["--port", "0", "-o", "ssl_chain_cert=/x/chain.pem"]);
    assert!(error.contains("without -Z/--tls"), "{error}");
    let error = refused(&["--port", "0", "-Z", "--tls-cert", "/nonexistent/chain.pem"]);
    assert!(error.contains("--tls-cert (ssl_chain_cert) /nonexistent/chain.pem"), "{error}");
    let error = refused(&["--port", "0", "-Z"]);
    assert!(error.contains("needs a certificate chain"), "{error}");
    let error = refused(&["--port", "0", "-Z", "-o", "ssl_ciphers=HIGH"]);
    assert!(error.contains("-o ssl_ciphers: not supported"), "{error}");
    let error = refused(&["--port", "0", "-Z", "--tls-verify-mode", "5"]);
    assert!(error.contains("--tls-verify-mode (ssl_verify_mode) \"5\""), "{error}");
    let error = refused(&["-s", "/tmp/x.sock", "-a", "999"]);
    assert!(error.contains("-a/--unix-mask"), "{error}");
}

#[test]
fn tls_with_memcached_s_o_options_answers_openssl_s_client() {
    if !Path::new(OPENSSL).exists() {
        println!("skipped: {OPENSSL} is absent (Debian package openssl)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let openssl = |args: String| {
        let status = Command::new(OPENSSL)
            .args(args.split_whitespace())
            .current_dir(dir.path())
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .status();
        assert!(status.unwrap().success(), "openssl {args}");
    };
    let new_key = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2";
    openssl(format!(
        "req -x509 {new_key} -subj /CN=kura-ca -keyout ca.key -out ca.pem -addext basicConstraints=critical,CA:TRUE"
    ));
    openssl(format!(
        "req -x509 {new_key} -subj /CN=localhost -keyout server.key -out server.pem -CA ca.pem -CAkey ca.key \
         -addext subjectAltName=IP:127.0.0.1 -addext basicConstraints=critical,CA:FALSE"
    ));
    let files = format!(
        "ssl_chain_cert={},ssl_key={}",
        dir.path().join("server.pem").display(),
        dir.path().join("server.key").display()
    );
    let (child, line) = serve_line(&["--port", "0", "-Z", "-o", &files]);
    assert!(line.contains("TLS on, authentication off"), "{line}");
    let address = line.split_whitespace().nth(4).unwrap().to_string();
    let mut client = Command::new(OPENSSL)
        .args(["s_client", "-connect", &address, "-quiet", "-verify_return_error", "-CAfile"])
        .arg(dir.path().join("ca.pem"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    client.stdin.take().unwrap().write_all(b"set k 0 0 2\r\nhi\r\nget k\r\nquit\r\n").unwrap();
    let output = client.wait_with_output().unwrap();
    assert!(output.status.success(), "s_client ended without close_notify or failed to verify");
    assert_eq!(String::from_utf8_lossy(&output.stdout), "STORED\r\nVALUE k 0 2\r\nhi\r\nEND\r\n");
    stop(child);
}
