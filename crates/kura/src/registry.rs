//! The engine registry: the one list of Kura's engines and of what each one is.
//!
//! Everything that needs to know the engines (opening by extension or `engine=`, `kura
//! restore`, `kura bench` and its defaults, the Python binding's `kura.engines()`, the
//! benchmark driver through `kura engines --json`) reads this table, so adding an engine is
//! its folder plus one entry in `ENGINES`. Nothing outside the library keeps a list of its own.

use std::path::Path;

use crate::compact_dbm::CompactDbm;
use crate::engine;
pub use crate::engine::{AfterPowerLoss, Engine, Fact, Order, Restore, RestoreReport, Storage};

use crate::check::{CheckReport, Place};
use crate::dbm::{Dbm, OpenMode, Params};
use crate::error::{Error, ErrorKind, Result};
use crate::hash_dbm::HashDbm;
use crate::memory_dbm::{BabyDbm, CacheDbm, SegCacheDbm, TinyDbm};
use crate::shard_dbm::{self, ShardDbm};
use crate::tree_dbm::TreeDbm;

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

/// CompactDbm sized for the records to come: its bucket count is fixed until a rebuild.
fn compact_sized_params(records: u64) -> Params {
    Params::new().with("expected_records", records.max(1))
}

/// Every engine, in the order help texts list them. The first is the default engine
/// (`default_engine`): what a database opens as where its name has no engine's extension,
/// and what a new shard set is made of unless told.
pub(crate) static ENGINES: &[Engine] = &[
    Engine {
        name: "hash",
        class: "HashDbm",
        extension: "kuh",
        storage: Storage::File,
        order: Order::Unordered,
        summary: "file hash database: buckets and chained records in one mapped file, per-record compression",
        params: HashDbm::PARAMS,
        codec_param: Some("record_comp"),
        bench_params: no_params,
        import_params: hash_import_params,
        sized_by: &["num_buckets"],
        shared_caps: &[],
        open: |path, mode, params| Ok(Box::new(HashDbm::open(path, mode, params)?)),
        restore: Restore::Salvage(|source, dest| HashDbm::salvage_file(source, dest)),
        magic: HashDbm::MAGIC,
        shard_set: false,
        after_power_loss: AfterPowerLoss::EachRecord,
    },
    Engine {
        name: "tree",
        class: "TreeDbm",
        extension: "kut",
        storage: Storage::File,
        order: Order::Ordered,
        summary: "file B+ tree: ordered keys, ranges both ways, page compression, atomic batches",
        params: TreeDbm::PARAMS,
        codec_param: Some("record_comp"),
        bench_params: no_params,
        import_params: no_params,
        sized_by: &[],
        shared_caps: &[],
        open: |path, mode, params| Ok(Box::new(TreeDbm::open(path, mode, params)?)),
        restore: Restore::Salvage(|source, dest| TreeDbm::salvage_file(source, dest)),
        magic: TreeDbm::MAGIC,
        shard_set: false,
        after_power_loss: AfterPowerLoss::CommitPrefix,
    },
    Engine {
        name: "tiny",
        class: "TinyDbm",
        extension: "kumt",
        storage: Storage::Memory,
        order: Order::Unordered,
        summary: "in-memory hash table, optionally saved to a snapshot file",
        params: TinyDbm::PARAMS,
        codec_param: None,
        bench_params: no_params,
        import_params: no_params,
        sized_by: &[],
        shared_caps: &[],
        open: |path, mode, params| Ok(Box::new(TinyDbm::open(path, mode, params)?)),
        restore: Restore::Salvage(TinyDbm::salvage_file),
        magic: TinyDbm::MAGIC,
        shard_set: false,
        after_power_loss: AfterPowerLoss::LastSnapshot,
    },
    Engine {
        name: "baby",
        class: "BabyDbm",
        extension: "kumb",
        storage: Storage::Memory,
        order: Order::Ordered,
        summary: "in-memory B+ tree: ordered keys and ranges, optionally saved to a snapshot file",
        params: BabyDbm::PARAMS,
        codec_param: None,
        bench_params: no_params,
        import_params: no_params,
        sized_by: &[],
        shared_caps: &[],
        open: |path, mode, params| Ok(Box::new(BabyDbm::open(path, mode, params)?)),
        restore: Restore::Salvage(BabyDbm::salvage_file),
        magic: BabyDbm::MAGIC,
        shard_set: false,
        after_power_loss: AfterPowerLoss::LastSnapshot,
    },
    Engine {
        name: "cache",
        class: "CacheDbm",
        extension: "kumc",
        storage: Storage::Memory,
        order: Order::Unordered,
        summary: "in-memory LRU cache bounded by cap_rec_num and cap_mem_bytes",
        params: CacheDbm::PARAMS,
        codec_param: None,
        bench_params: cache_capacity_params,
        import_params: cache_capacity_params,
        sized_by: &["cap_rec_num"],
        shared_caps: &["cap_rec_num", "cap_mem_bytes"],
        open: |path, mode, params| Ok(Box::new(CacheDbm::open(path, mode, params)?)),
        restore: Restore::Salvage(CacheDbm::salvage_file),
        magic: CacheDbm::MAGIC,
        shard_set: false,
        after_power_loss: AfterPowerLoss::LastSnapshot,
    },
    Engine {
        name: "shard",
        class: "ShardDbm",
        extension: "kus",
        storage: Storage::File,
        order: Order::AsShards,
        summary: "N databases of another engine split by key hash (BASE-00000-of-00004 ...), written in parallel",
        params: ShardDbm::PARAMS,
        codec_param: None,
        bench_params: shard_bench_params,
        import_params: no_params,
        sized_by: &[],
        shared_caps: &[],
        open: |path, mode, params| Ok(Box::new(ShardDbm::open(path, mode, params, ENGINES)?)),
        restore: Restore::Salvage(|source, dest| ShardDbm::restore_set(source, dest, ENGINES)),
        magic: &[],
        shard_set: true,
        after_power_loss: AfterPowerLoss::AsShards,
    },
    Engine {
        name: "compact",
        class: "CompactDbm",
        extension: "kumz",
        storage: Storage::Memory,
        order: Order::Unordered,
        summary: "in-memory map of compressed buckets: many times denser than a hash table, snapshot file",
        params: CompactDbm::PARAMS,
        codec_param: Some("bucket_comp"),
        bench_params: compact_sized_params,
        import_params: compact_sized_params,
        sized_by: &["num_buckets", "expected_records"],
        shared_caps: &[],
        open: |path, mode, params| Ok(Box::new(CompactDbm::open(path, mode, params)?)),
        restore: Restore::Salvage(CompactDbm::salvage_file),
        magic: CompactDbm::MAGIC,
        shard_set: false,
        after_power_loss: AfterPowerLoss::LastSnapshot,
    },
    Engine {
        name: "segcache",
        class: "SegCacheDbm",
        extension: "kums",
        storage: Storage::Memory,
        order: Order::Unordered,
        summary: "in-memory cache of records packed into segments, evicted a segment at a time; cap_rec_num and cap_mem_bytes",
        params: SegCacheDbm::PARAMS,
        codec_param: None,
        bench_params: cache_capacity_params,
        import_params: cache_capacity_params,
        sized_by: &["cap_rec_num"],
        shared_caps: &["cap_rec_num", "cap_mem_bytes"],
        open: |path, mode, params| Ok(Box::new(SegCacheDbm::open(path, mode, params)?)),
        restore: Restore::Salvage(SegCacheDbm::salvage_file),
        magic: SegCacheDbm::MAGIC,
        shard_set: false,
        after_power_loss: AfterPowerLoss::LastSnapshot,
    },
];

/// A benchmark of ShardDbm spreads its writers over one shard per core, at least two.
fn shard_bench_params(_records: u64) -> Params {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    Params::new().with("num_shards", cores.max(2))
}

/// Every engine.
pub fn engines() -> &'static [Engine] {
    ENGINES
}

/// The engine called `name` (`hash`, `tree`, ...).
pub fn engine(name: &str) -> Result<&'static Engine> {
    crate::engine::named(ENGINES, name)
}

/// The engine `kura serve` serves when it is given no path: memcached's kind of store, an
/// in-memory cache that evicts; SegCacheDbm, whose records packed into segments take 127
/// bytes of RSS per 100-byte served item where CacheDbm takes 172 (docs/server.md).
pub fn served_by_default() -> Result<&'static Engine> {
    engine("segcache")
}

/// The engine a database opens as where a default is wanted and its name has no engine's
/// extension: Python's `kura.dbm.open` of any file name, as `dbm.open` takes any name.
pub fn default_engine() -> Result<&'static Engine> {
    engine::default_of(ENGINES)
}

/// The engine `kura bench` measures when it is given no `--engine`, as `tkrzw_dbm_perf`
/// measures its hash database.
pub fn benchmarked_by_default() -> Result<&'static Engine> {
    engine("hash")
}

/// The engine whose extension `path` has, if any.
pub fn engine_of_path(path: &Path) -> Option<&'static Engine> {
    crate::engine::of_path(ENGINES, path)
}

/// The engine whose file `path` is, told by the file's first bytes (`Engine::magic`), not by
/// its name: ShardDbm for the base path of a shard set whose first shard is a Kura file, None
/// for any other file. A file that cannot be read is an Io (or NotFound) error.
pub fn engine_of_file(path: &Path) -> Result<Option<&'static Engine>> {
    if !path.exists() {
        if let Some((_, _, first)) = shard_dbm::naming::existing_shards(path)?.first() {
            return match engine_of_head(first)? {
                Some(_) => engine("shard").map(Some),
                None => Ok(None),
            };
        }
    }
    engine_of_head(path)
}

/// The engine whose marks the file at `path` starts with, if any.
fn engine_of_head(path: &Path) -> Result<Option<&'static Engine>> {
    crate::engine::of_file(ENGINES, path)
}

/// The engine named by `params` (`engine=hash`), else ShardDbm when a shard parameter is
/// given (`num_shards=4`) or the path is no file but the base of shard files
/// (`casket.kuh-00000-of-00004` ...), else the engine of the path's extension.
pub fn resolve(path: &Path, params: &Params) -> Result<&'static Engine> {
    if let Some(name) = params.get("engine") {
        return engine(name);
    }
    if ShardDbm::PARAMS.iter().any(|name| params.get(name).is_some())
        || (!path.as_os_str().is_empty() && !path.exists() && shard_dbm::has_shards(path))
    {
        return engine("shard");
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

/// The engine that keeps the records of the database at `path` opened with `params`: its
/// engine (`resolve`), or for a shard set its shards' engine (`inner_engine=`, else the base
/// path's extension, else the first shard file's marks: no trial open).
pub fn records_engine(path: &Path, params: &Params) -> Result<&'static Engine> {
    let engine = resolve(path, params)?;
    if engine.shard_set {
        return shard_dbm::inner_engine_of(ENGINES, path, params);
    }
    Ok(engine)
}

/// Whether the database at `path` opened with `params` keeps its keys in order: its engine's
/// `Order`, which for a shard set is its shards' engine's (a set of trees is ordered).
pub fn ordered(path: &Path, params: &Params) -> Result<bool> {
    Ok(records_engine(path, params)?.is_ordered())
}

/// The parameter that names the codec of the database at `path` opened with `params`
/// (`record_comp`, `bucket_comp`): its engine's, or for a shard set its shards' engine's.
/// InvalidArgument when that engine compresses nothing.
pub fn codec_param(path: &Path, params: &Params) -> Result<&'static str> {
    let engine = records_engine(path, params)?;
    engine
        .codec_param
        .ok_or_else(|| Error::invalid(format!("{} stores values as given: it takes no codec", engine.class)))
}

/// Opens (or creates) a database, choosing the engine by `params["engine"]` or by extension.
/// The remaining parameters go to the engine, which rejects names it does not know.
pub fn open(path: impl AsRef<Path>, mode: OpenMode, params: &Params) -> Result<Box<dyn Dbm>> {
    let path = path.as_ref();
    let engine = resolve(path, params)?;
    engine.open(path, mode, &params.without("engine"))
}

/// Opens the database at `path` read-only and checks it (`Dbm::check`): what `kura check`,
/// Python's `kura.check` and Ruby's `Kura.check` run. Damage that stops the open itself (a
/// header or snapshot failing its checksum, a missing shard) is the report's one problem;
/// other errors (no such file, locked by a writer) are returned.
pub fn check(path: impl AsRef<Path>, params: &Params) -> Result<CheckReport> {
    let path = path.as_ref();
    let db = match open(path, OpenMode::ReadOnly, params) {
        Ok(db) => db,
        Err(e) if e.kind() == ErrorKind::BrokenData => {
            let shown = format!("{}: ", path.display());
            let message = e.message().strip_prefix(shown.as_str()).unwrap_or(e.message()).to_string();
            let mut report = CheckReport::default();
            report.add(Place::Database, message);
            return Ok(report);
        }
        Err(e) => return Err(e),
    };
    let report = db.check()?;
    db.close()?;
    Ok(report)
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
        assert!(served_by_default().unwrap().is_in_memory());
        assert_eq!(benchmarked_by_default().unwrap().storage, Storage::File);
        assert!(!default_engine().unwrap().is_in_memory() && !default_engine().unwrap().shard_set);
        assert!(resolve(Path::new("x.txt"), &Params::new()).is_err());
    }

    /// What an import sizes a new database with is among the parameters that size it, and
    /// those are parameters the engine takes.
    #[test]
    fn import_sizes_are_among_the_sizing_params() {
        for engine in ENGINES {
            for name in engine.import_params(1000).names() {
                assert!(engine.sized_by.contains(&name), "{}: {name}", engine.name);
            }
            for name in engine.sized_by {
                assert!(engine.params.contains(name), "{}: {name}", engine.name);
            }
            if let Some(name) = engine.codec_param {
                assert!(engine.params.contains(&name), "{}: {name}", engine.name);
            }
        }
    }

    #[test]
    fn every_engine_opens_in_memory_or_in_a_file_with_its_sized_params_and_says_its_class() {
        let dir = tempfile::tempdir().unwrap();
        for engine in ENGINES {
            let path = dir.path().join(format!("db.{}", engine.extension));
            let db = engine.open(&path, OpenMode::Create, &engine.bench_params(1000)).unwrap();
            db.set(b"k", b"v", true).unwrap();
            let stats = db.inspect().unwrap();
            assert_eq!(stats.class, engine.class, "{}", engine.name);
            if !engine.shard_set {
                assert_eq!(stats.codec.map(|c| c.param), engine.codec_param, "{}", engine.name);
            }
            let params = engine.bench_params(1000);
            assert_eq!(db.ordered_cursor().is_ok(), ordered(&path, &params).unwrap(), "{}", engine.name);
            assert_eq!(db.is_ordered(), ordered(&path, &params).unwrap(), "{}", engine.name);
            if engine.order != Order::AsShards {
                assert_eq!(db.is_ordered(), engine.is_ordered(), "{}", engine.name);
            }
            db.close().unwrap();
            // Told by its first bytes, under any name.
            assert_eq!(engine_of_file(&path).unwrap(), Some(engine), "{}", engine.name);
            if !engine.shard_set {
                let renamed = dir.path().join(format!("renamed-{}", engine.name));
                std::fs::rename(&path, &renamed).unwrap();
                assert_eq!(engine_of_file(&renamed).unwrap(), Some(engine), "{}", engine.name);
            }
        }
    }

    /// Other files are no engine's, however much of a magic they start with; a file that
    /// cannot be read is an error, not a "no".
    #[test]
    fn a_file_without_an_engines_marks_is_no_engines() {
        let dir = tempfile::tempdir().unwrap();
        let other = dir.path().join("other.kuh");
        for head in [&b""[..], b"Kura", b"KuraHas", b"KURAMEM\0\x02", b"KURAMEM\0\x02?", b"plain text, long enough"] {
            std::fs::write(&other, head).unwrap();
            assert_eq!(engine_of_file(&other).unwrap(), None, "{head:?}");
        }
        let missing = engine_of_file(&dir.path().join("missing")).unwrap_err();
        assert_eq!(missing.kind(), ErrorKind::NotFound);
        assert!(engine_of_file(dir.path()).is_err(), "a directory is no file to read");
        for engine in ENGINES {
            assert_eq!(engine.magic.is_empty(), engine.shard_set, "{}: a file engine has marks", engine.name);
        }
    }
}
