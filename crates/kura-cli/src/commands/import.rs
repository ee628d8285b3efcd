//! `kura import`: the library's parallel loader (`kura::import`) with a progress bar on a
//! terminal and the one-line summary.

use std::path::Path;

use kura::import::{import_file, import_reader, ImportOptions};
use kura::Params;

use super::print_line;
use crate::progress;

/// Imports the file `input`, or standard input when there is none.
pub fn import(path: &Path, input: Option<&Path>, params: &Params, options: &ImportOptions) -> kura::Result<()> {
    // A size given for a database that exists already does not resize it (the library
    // sizes only what it creates): say so rather than leave the user believing otherwise.
    let existed = path.exists() || kura::shard_dbm::has_shards(path);
    if existed && params.get("num_buckets").is_some() {
        eprintln!(
            "kura: note: {} exists, so num_buckets (--buckets) does not apply; `kura rebuild --buckets N` resizes it",
            path.display()
        );
    }
    // A regular file's size is the bar's end; a stream's is unknown, so its bar only counts.
    let input_size = input.and_then(|input| std::fs::metadata(input).ok()).filter(|m| m.is_file()).map(|m| m.len());
    let bar = progress::bytes(input_size, "import");
    let progress = |bytes| bar.inc(bytes);
    let summary = match input {
        Some(input) => import_file(path, input, params, options, &progress),
        None => import_reader(path, std::io::stdin().lock(), "standard input", params, options, &progress),
    };
    bar.finish_and_clear();
    let summary = summary?;
    print_line(format_args!(
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
    ))
}
