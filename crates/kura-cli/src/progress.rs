//! Progress bars, drawn only when stderr is a terminal so that pipes and logs stay clean.

use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressStyle};

pub fn enabled() -> bool {
    std::io::stderr().is_terminal()
}

/// A bar measuring bytes out of `total`.
pub fn bytes(total: u64, what: &str) -> ProgressBar {
    bar(total, what, "{msg} [{bar:40}] {bytes}/{total_bytes} {bytes_per_sec} eta {eta}")
}

/// A bar counting items out of `total`.
pub fn items(total: u64, what: &str) -> ProgressBar {
    bar(total, what, "{msg} [{bar:40}] {pos}/{len} {per_sec} eta {eta}")
}

fn bar(total: u64, what: &str, template: &str) -> ProgressBar {
    if !enabled() {
        return ProgressBar::hidden();
    }
    let style =
        ProgressStyle::with_template(template).unwrap_or_else(|_| ProgressStyle::default_bar()).progress_chars("=> ");
    ProgressBar::new(total).with_style(style).with_message(what.to_string())
}
