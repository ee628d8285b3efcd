//! The engine registry: the one list of Kura's engines and of what each one is.
//!
//! Everything that needs to know the engines (opening by extension or `engine=`, `kura
//! restore`, `kura bench` and its defaults, the Python binding's `kura.engines()`, the
//! benchmark driver through `kura engines --json`) reads this table, so adding an engine is
//! its folder plus one entry in `ENGINES`. Nothing outside the library keeps a list of its own.

use std::path::Path;

use crate::dbm::{Dbm, OpenMode, Params};
use crate::error::{Error, Result};
use crate::hash_dbm::HashDbm;
use crate::memory_dbm::{BabyDbm, CacheDbm, TinyDbm};
use crate::tree_dbm::TreeDbm;

/// Where an engine keeps its records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Storage {
    /// In a database file that every write updates (HashDbm, TreeDbm).
    File,
    /// In memory, optionally saved whole to a snapshot file by `synchronize` and `close`.
    Memory,
}

impl Storage {
    /// `file` or `memory`, as `kura engines` prints it.
    pub fn name(self) -> &'static str {
        match self {
            Storage::File => "file",
            Storage::Memory => "memory",
        }
    }
}

/// What a salvage copied, and what it had to leave behind (for the user to read).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RestoreReport {
    /// Records written to the new file.
    pub records: u64,
    /// Records known to be lost (their key was readable, their value not provably intact);
    /// damaged pages or chains may hide more, which `dropped` then says.
    pub dropped_records: u64,
    /// One sentence per kind of damage met; empty when the source was intact.
    pub dropped: Vec<String>,
}

/// What `kura restore` can do for an engine's files.
#[derive(Clone, Copy)]
pub enum Restore {
    /// Copies every intact record of a (possibly damaged) file at the first path into a new
    /// file at the second, and reports what it copied and dropped.
    Salvage(fn(&Path, &Path) -> Result<RestoreReport>),
    /// The engine has no salvage, for the reason given.
    Unsupported(&'static str),
}

/// One engine: its names, its nature, its parameters and how to open and restore it.
pub struct Engine {
    /// The `engine=` name: `hash`, `tree`, ...
    pub name: &'static str,
    /// The Rust type and the `class` property of `inspect`: `HashDbm`, ...
    pub class: &'static str,
    /// The file extension that selects it, without the dot.
    pub extension: &'static str,
    pub storage: Storage,
    /// Whether its cursor visits keys in order and it has an ordered cursor.
    pub ordered: bool,
    /// One line for help texts and `kura engines`.
    pub summary: &'static str,
    /// Every parameter `open` accepts (besides `engine`).
    pub params: &'static [&'static str],
    /// Parameters a benchmark or demo of `records` records passes where the user gives none:
    /// an engine that cannot open without a parameter (CacheDbm's record cap) gets one sized
    /// for the run, so `kura bench --engine NAME` always runs.
    pub bench_params: fn(records: u64) -> Params,
    /// Parameters a new database made by an import of `records` records gets where the user
    /// gives none (HashDbm: one bucket a record, not the default million).
    pub import_params: fn(records: u64) -> Params,
    open: fn(&Path, OpenMode, &Params) -> Result<Box<dyn Dbm>>,
    /// What `kura restore` does for this engine.
    pub restore: Restore,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine").field("name", &self.name).finish_non_exhaustive()
    }
}

impl PartialEq for Engine {
    fn eq(&self, other: &Engine) -> bool {
        self.name == other.name
    }
}

impl Eq for Engine {}

impl Engine {
    /// Opens (or creates) a database of this engine. `params` must not name `engine`.
    pub fn open(&self, path: &Path, mode: OpenMode, params: &Params) -> Result<Box<dyn Dbm>> {
        (self.open)(path, mode, params)
    }

    /// Whether the engine keeps its records in memory (a file is only its snapshot).
    pub fn is_in_memory(&self) -> bool {
        self.storage == Storage::Memory
    }

    /// Salvages `source` into the new file `dest` (see `Restore`); an engine without salvage
    /// is an Infeasible error that says why.
    pub fn restore(&self, source: &Path, dest: &Path) -> Result<RestoreReport> {
        match self.restore {
            Restore::Salvage(salvage) => salvage(source, dest),
            Restore::Unsupported(why) => Err(Error::infeasible(format!("{} has no restore: {why}", self.class))),
        }
    }
}

/// Why the memory engines have no `restore`.
const SNAPSHOT_NEEDS_NO_RESTORE: &str = "its snapshot is written whole beside the old one and renamed into place, \
     so a crash never leaves it half-written, and a damaged snapshot is refused when opened";

/// No parameters: the engine's defaults fit any size.
fn no_params(_records: u64) -> Params {
    Params::new()
}

/// A record cap with room for every key of a run: the cap is shared out among internal
/// slots, and a full slot evicts, so the margin keeps a benchmark's records all in.
fn cache_capacity_params(records: u64) -> Params {
    Params::new().with("cap_rec_num", records.saturating_mul(5) / 4 + 1024)
}

/// The fewest buckets an import creates a hash database with.
const MIN_IMPORT_BUCKETS: u64 = 1024;

/// One bucket per record: the bucket array then costs 5 bytes a record, not the 5 MiB of
/// the default, and chains stay one record long on average.
fn hash_import_params(records: u64) -> Params {
    Params::new().with("num_buckets", records.max(MIN_IMPORT_BUCKETS))
}

/// Every engine, in the order help texts list them.
pub static ENGINES: &[Engine] = &[
    Engine {
        name: "hash",
        class: "HashDbm",
        extension: "kuh",
        storage: Storage::File,
        ordered: false,
        summary: "file hash database: buckets and chained records in one mapped file, per-record compression",
        params: HashDbm::PARAMS,
        bench_params: no_params,
        import_params: hash_import_params,
        open: |path, mode, params| Ok(Box::new(HashDbm::open(path, mode, params)?)),
        restore: Restore::Salvage(|source, dest| HashDbm::salvage_file(source, dest)),
    },
    Engine {
        name: "tree",
        class: "TreeDbm",
        extension: "kut",
        storage: Storage::File,
        ordered: true,
        summary: "file B+ tree: ordered keys, ranges both ways, page compression, atomic batches",
        params: TreeDbm::PARAMS,
        bench_params: no_params,
        import_params: no_params,
        open: |path, mode, params| Ok(Box::new(TreeDbm::open(path, mode, params)?)),
        restore: Restore::Salvage(|source, dest| TreeDbm::salvage_file(source, dest)),
    },
    Engine {
        name: "tiny",
        class: "TinyDbm",
        extension: "kumt",
        storage: Storage::Memory,
        ordered: false,
        summary: "in-memory hash table, optionally saved to a snapshot file",
        params: TinyDbm::PARAMS,
        bench_params: no_params,
        import_params: no_params,
        open: |path, mode, params| Ok(Box::new(TinyDbm::open(path, mode, params)?)),
        restore: Restore::Unsupported(SNAPSHOT_NEEDS_NO_RESTORE),
    },
    Engine {
        name: "baby",
        class: "BabyDbm",
        extension: "kumb",
        storage: Storage::Memory,
        ordered: true,
        summary: "in-memory B+ tree: ordered keys and ranges, optionally saved to a snapshot file",
        params: BabyDbm::PARAMS,
        bench_params: no_params,
        import_params: no_params,
        open: |path, mode, params| Ok(Box::new(BabyDbm::open(path, mode, params)?)),
        restore: Restore::Unsupported(SNAPSHOT_NEEDS_NO_RESTORE),
    },
    Engine {
        name: "cache",
        class: "CacheDbm",
        extension: "kumc",
        storage: Storage::Memory,
        ordered: false,
        summary: "in-memory LRU cache bounded by cap_rec_num and cap_mem_bytes",
        params: CacheDbm::PARAMS,
        bench_params: cache_capacity_params,
        import_params: cache_capacity_params,
        open: |path, mode, params| Ok(Box::new(CacheDbm::open(path, mode, params)?)),
        restore: Restore::Unsupported(SNAPSHOT_NEEDS_NO_RESTORE),
    },
];

/// Every engine.
pub fn engines() -> &'static [Engine] {
    ENGINES
}

/// The engine called `name` (`hash`, `tree`, ...).
pub fn engine(name: &str) -> Result<&'static Engine> {
    ENGINES.iter().find(|e| e.name == name).ok_or_else(|| {
        let names: Vec<&str> = ENGINES.iter().map(|e| e.name).collect();
        Error::invalid(format!("unknown engine {name:?} (known: {})", names.join(" ")))
    })
}

/// The engine whose extension `path` has, if any.
pub fn engine_of_path(path: &Path) -> Option<&'static Engine> {
    let extension = path.extension().and_then(|e| e.to_str())?;
    ENGINES.iter().find(|e| e.extension == extension)
}

/// The engine named by `params` (`engine=hash`), else by the path's extension.
pub fn resolve(path: &Path, params: &Params) -> Result<&'static Engine> {
    if let Some(name) = params.get("engine") {
        return engine(name);
    }
    engine_of_path(path).ok_or_else(|| {
        let extensions: Vec<String> = ENGINES.iter().map(|e| format!(".{}", e.extension)).collect();
        Error::invalid(format!(
            "cannot tell the engine of {}: use a known extension ({}) or engine=NAME",
            path.display(),
            extensions.join(" ")
        ))
    })
}

/// Opens (or creates) a database, choosing the engine by `params["engine"]` or by extension.
/// The remaining parameters go to the engine, which rejects names it does not know.
pub fn open(path: impl AsRef<Path>, mode: OpenMode, params: &Params) -> Result<Box<dyn Dbm>> {
    let path = path.as_ref();
    let engine = resolve(path, params)?;
    engine.open(path, mode, &params.without("engine"))
}

#[cfg(test)]
mod tests {
    #![expect(clippy::unwrap_used, reason = "a test fails loudly on the first broken expectation")]
    use super::*;

    #[test]
    fn names_and_extensions_are_unique_and_each_resolves_to_its_engine() {
        for (i, engine) in ENGINES.iter().enumerate() {
            for other in ENGINES.get(i + 1..).unwrap_or_default() {
                assert_ne!(engine.name, other.name);
                assert_ne!(engine.extension, other.extension);
            }
            assert_eq!(super::engine(engine.name).unwrap(), engine);
            let path = format!("x.{}", engine.extension);
            assert_eq!(resolve(Path::new(&path), &Params::new()).unwrap(), engine);
            assert!(!engine.params.contains(&"engine"), "{}: engine= only chooses", engine.name);
        }
        assert!(super::engine("nope").is_err());
        assert!(resolve(Path::new("x.txt"), &Params::new()).is_err());
    }

    #[test]
    fn every_engine_opens_in_memory_or_in_a_file_with_its_sized_params_and_says_its_class() {
        let dir = tempfile::tempdir().unwrap();
        for engine in ENGINES {
            let path = dir.path().join(format!("db.{}", engine.extension));
            let db = engine.open(&path, OpenMode::Create, &(engine.bench_params)(1000)).unwrap();
            db.set(b"k", b"v", true).unwrap();
            let properties = db.inspect().unwrap();
            let class = properties.iter().find(|(n, _)| n == "class").map(|(_, v)| v.as_str());
            assert_eq!(class, Some(engine.class), "{}", engine.name);
            assert_eq!(db.ordered_cursor().is_ok(), engine.ordered, "{}", engine.name);
            db.close().unwrap();
        }
    }
}
