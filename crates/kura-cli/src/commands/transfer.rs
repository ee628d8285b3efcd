//! Bulk export: every record as TSV, plain or escaped (`kura::import::escape`), so that
//! `kura import` (with `--escape` for an escaped export) loads exactly the records back.
//! (Import, the parallel loader, is `import/`.)

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use kura::{Error, OpenMode, Params};

use super::{open, tsv_line, write_error};
use crate::progress;

/// Whether `output` is the database at `path` or one of its shard files: creating it would
/// empty the database it is about to read.
fn is_the_database(output: &Path, path: &Path) -> kura::Result<bool> {
    use std::os::unix::fs::MetadataExt;
    let Ok(target) = std::fs::metadata(output) else {
        return Ok(false);
    };
    let same = |file: &Path| std::fs::metadata(file).is_ok_and(|m| (m.dev(), m.ino()) == (target.dev(), target.ino()));
    Ok(same(path) || kura::shard_dbm::existing_shards(path)?.iter().any(|(_, _, shard)| same(shard)))
}

/// What database lies at `output`, if any: an existing file with an engine's extension, or
/// a shard set. Writing the export there would replace a database the user did not name as
/// the one to replace (`kura export a.kuh b.kuh`, taken for a copy, would empty b.kuh);
/// any other existing file is replaced, as output files are.
fn another_database(output: &Path) -> kura::Result<Option<String>> {
    let shaped_like_one = kura::registry::engine_of_path(output).is_some() || !output.exists();
    Ok(if shaped_like_one { super::maintenance::existing_database(output)? } else { None })
}

pub fn export(path: &Path, params: &Params, file: Option<&Path>, escaped: bool) -> kura::Result<()> {
    if let Some(file) = file {
        if is_the_database(file, path)? {
            return Err(Error::invalid(format!(
                "{} is the database's own file: export to another file (or to stdout)",
                file.display()
            )));
        }
    }
    if let Some(file) = file {
        if let Some(what) = another_database(file)? {
            return Err(Error::new(
                kura::ErrorKind::Duplicate,
                format!("{what} already exists and is a database: export writes TSV, and would empty it"),
            ));
        }
    }
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
        // The record is lent from the engine's page (TreeDbm's without a copy) and written out
        // from there.
        let mut written = Ok(());
        let found = cursor.record_with(&mut |key, value| {
            written = tsv_line(key, value, escaped, &mut line)
                .and_then(|()| out.write_all(&line).map_err(write_error(&target)));
        })?;
        written?;
        if found {
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
