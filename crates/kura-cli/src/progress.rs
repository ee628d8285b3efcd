//! Progress bars, drawn only when stderr is a terminal so that pipes and logs stay clean.

use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressStyle};

pub fn enabled() -> bool {
    std::io::stderr().is_terminal()
}

/// A bar measuring bytes out of `total`, or only counting them when the total is unknown.
pub fn bytes(total: Option<u64>, what: &str) -> ProgressBar {
    let template = if total.is_some() {
        "{msg} [{bar:40}] {bytes}/{total_bytes} {bytes_per_sec} eta {eta}"
    } else {
        "{msg} {bytes} {bytes_per_sec}"
    };
    bar(total, what, template)
}

/// A bar counting items out of `total`.
pub fn items(total: u64, what: &str) -> ProgressBar {
    bar(Some(total), what, "{msg} [{bar:40}] {pos}/{len} {per_sec} eta {eta}")
}

fn bar(total: Option<u64>, what: &str, template: &str) -> ProgressBar {
    if !enabled() {
        return ProgressBar::hidden();
    }
    let style =
        ProgressStyle::with_template(template).unwrap_or_else(|_| ProgressStyle::default_bar()).progress_chars("=> ");
    let bar = total.map_or_else(ProgressBar::no_length, ProgressBar::new);
    bar.with_style(style).with_message(what.to_string())
}
