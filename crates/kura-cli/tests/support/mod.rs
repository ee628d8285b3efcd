//! Running the `kura` binary from the CLI tests that share these two steps: run it, and run it
//! expecting success.
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
    assert!(output.status.success(), "kura {args:?}: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout).unwrap()
}
