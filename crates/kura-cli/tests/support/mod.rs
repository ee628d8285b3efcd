//! Running the `kura` binary from the CLI tests: run it, run it expecting success, run it
//! expecting a given failure.
#![allow(dead_code, reason = "each test file uses part of the support code")]
#![expect(clippy::unwrap_used, reason = "a test fails loudly on the first broken expectation")]

use std::process::{Command, Output};

/// Runs the `kura` binary built for these tests with `args`.
pub fn kura(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kura")).args(args).output().expect("the kura binary runs")
}

/// Runs kura, expects it to succeed, returns its stdout.
#[track_caller]
pub fn ok(args: &[&str]) -> String {
    let output = kura(args);
    assert!(
        output.status.success(),
        "kura {args:?} failed with {:?}: {}",
        output.status.code(),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

/// Runs kura and checks it failed with `code` and an error line mentioning `needle`.
#[track_caller]
pub fn fails(args: &[&str], code: i32, needle: &str) {
    let output = kura(args);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(code), "kura {args:?}: stderr {stderr}");
    assert!(stderr.contains(needle), "kura {args:?}: stderr {stderr:?} lacks {needle:?}");
}
