//! Bulk export: every record as TSV. (Import, the parallel loader, is `import/`.)

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use kura::{Error, OpenMode, Params};

use super::{open, write_error};
use crate::progress;

pub fn export(path: &Path, params: &Params, file: Option<&Path>) -> kura::Result<()> {
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
    while moved {
        if let Some((key, value)) = cursor.record()? {
            out.write_all(&key)
                .and_then(|()| out.write_all(b"\t"))
                .and_then(|()| out.write_all(&value))
                .and_then(|()| out.write_all(b"\n"))
                .map_err(write_error(&target))?;
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
