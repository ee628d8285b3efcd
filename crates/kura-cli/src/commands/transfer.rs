//! Bulk export: every record as TSV, plain or escaped (`kura::import::escape`), so that
//! `kura import` (with `--escape` for an escaped export) loads exactly the records back.
//! (Import, the parallel loader, is `import/`.)

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use kura::import::escape::escape;
use kura::{Error, OpenMode, Params};

use super::{open, write_error};
use crate::progress;

/// Writes the line of one record into `line`: escaped, or plain if plain TSV holds it.
fn tsv_line(key: &[u8], value: &[u8], escaped: bool, line: &mut Vec<u8>) -> kura::Result<()> {
    line.clear();
    if escaped {
        escape(key, line);
        line.push(b'\t');
        escape(value, line);
    } else {
        if key.contains(&b'\t') || key.contains(&b'\n') || value.contains(&b'\n') {
            return Err(Error::invalid(format!(
                "the record of key {:?} holds a tab or a line break that plain TSV cannot: export with --escape \
                 (and import that with --escape)",
                String::from_utf8_lossy(key)
            )));
        }
        line.extend_from_slice(key);
        line.push(b'\t');
        line.extend_from_slice(value);
    }
    line.push(b'\n');
    Ok(())
}

pub fn export(path: &Path, params: &Params, file: Option<&Path>, escaped: bool) -> kura::Result<()> {
    let db = open(path, OpenMode::ReadOnly, params)?;
    let target = match file {
        Some(file) => file.display().to_string(),
        None => "stdout".to_string(),
    };
    let sink: Box<dyn Write> = match file {
        Some(file) => Box::new(File::create(file).map_err(|e| Error::io(format!("create {target}"), e))?),
        None => Box::new(std::io::stdout().lock()),
    };
    let mut out = BufWriter::with_capacity(1 << 20, sink);
    let bar = progress::items(db.count()?, "export");
    let mut cursor = db.cursor()?;
    let mut moved = cursor.first()?;
    let mut line = Vec::new();
    while moved {
        if let Some((key, value)) = cursor.record()? {
            tsv_line(&key, &value, escaped, &mut line)?;
            out.write_all(&line).map_err(write_error(&target))?;
            bar.inc(1);
        }
        moved = cursor.next()?;
    }
    bar.finish_and_clear();
    drop(cursor);
    out.flush().map_err(write_error(&target))?;
    drop(out);
    db.close()
}
