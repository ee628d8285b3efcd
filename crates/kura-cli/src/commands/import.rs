//! `kura import`: the library's parallel loader (`kura::import`) with a progress bar on a
//! terminal and the one-line summary.

use std::path::Path;

use kura::import::{import_file, ImportOptions};
use kura::Params;

use crate::progress;

pub fn import(path: &Path, input: &Path, params: &Params, options: &ImportOptions) -> kura::Result<()> {
    let input_size = std::fs::metadata(input).map_or(0, |m| m.len());
    let bar = progress::bytes(input_size, "import");
    let summary = import_file(path, input, params, options, &|bytes| bar.inc(bytes));
    bar.finish_and_clear();
    let summary = summary?;
    println!(
        "imported records={} skipped={} keyless={} count={} seconds={:.3} file_size={} rebuilt={} threads={} \
         shards={} batch={}",
        summary.stored,
        summary.skipped,
        summary.keyless,
        summary.count,
        summary.seconds,
        summary.file_size,
        if summary.rebuilt { "yes" } else { "no" },
        summary.threads,
        summary.shards,
        summary.batch,
    );
    Ok(())
}
