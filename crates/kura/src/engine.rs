//! What an engine is: its names, its nature, its parameters, and how to open and restore
//! it. The list of engines is `registry.rs`; this file is the type every entry has, with the
//! look-ups over any list of them, so that a composite engine (ShardDbm) can be handed the
//! list instead of importing the registry that lists it.

use std::path::Path;

use crate::dbm::{Dbm, OpenMode, Params};
use crate::error::{Error, ErrorKind, Result};

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

/// Whether an engine keeps its keys in order, which for a shard set depends on its
/// parameters: the engine of its shards.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    /// Always in order, with an ordered cursor (TreeDbm, BabyDbm).
    Ordered,
    /// Never in order.
    Unordered,
    /// As its shards' engine (`inner_engine`, else the base path's extension, else the
    /// first shard's marks): ShardDbm. `registry::ordered` answers for a path and parameters.
    AsShards,
}

impl Order {
    /// `ordered`, `unordered` or `as shards`, as `kura engines` prints it.
    pub fn name(self) -> &'static str {
        match self {
            Order::Ordered => "ordered",
            Order::Unordered => "unordered",
            Order::AsShards => "as shards",
        }
    }
}

/// What a power loss leaves of the writes made since the last durable commit, as
/// docs/durability.md states it and tests/power_loss.rs checks it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterPowerLoss {
    /// The state after one of those commits: the writes up to it, each batch whole or absent
    /// (TreeDbm).
    CommitPrefix,
    /// Each record on its own: its durable value or one written since, never garbage
    /// (HashDbm, which applies a batch too large for its journal operation by operation).
    EachRecord,
    /// The last snapshot written, whole (the memory engines).
    LastSnapshot,
    /// Each shard as its engine's, the shards independently (ShardDbm).
    AsShards,
}

impl AfterPowerLoss {
    /// `commit prefix`, `each record`, `last snapshot` or `as shards`, as `kura engines
    /// --json` shows it.
    pub fn name(self) -> &'static str {
        match self {
            AfterPowerLoss::CommitPrefix => "commit prefix",
            AfterPowerLoss::EachRecord => "each record",
            AfterPowerLoss::LastSnapshot => "last snapshot",
            AfterPowerLoss::AsShards => "as shards",
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
    /// A shard set's reports, one per shard in shard order (the fields above sum them up);
    /// empty for a single database.
    pub shards: Vec<RestoreReport>,
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

/// Bytes at a fixed offset of every file an engine writes. An engine's marks together tell
/// its files from any other file, whatever their names (docs/format.md, docs/tree.md,
/// docs/memory.md give the headers they come from).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mark {
    /// Where the bytes start in the file.
    pub offset: usize,
    /// The bytes.
    pub bytes: &'static [u8],
}

impl Mark {
    /// The mark of `bytes` at `offset`.
    pub const fn new(offset: usize, bytes: &'static [u8]) -> Mark {
        Mark { offset, bytes }
    }

    /// Where the mark ends: how many first bytes of a file it needs.
    pub const fn end(&self) -> usize {
        self.offset + self.bytes.len()
    }

    /// Whether `head`, a file's first bytes, carries the mark.
    pub fn is_in(&self, head: &[u8]) -> bool {
        head.get(self.offset..self.end()) == Some(self.bytes)
    }
}

/// One fact of an engine's description (`Engine::description`), typed so that each reader
/// translates it into its own types: a Python dict, a Ruby Hash, a JSON object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fact {
    /// A name or a sentence.
    Text(&'static str),
    /// Yes or no.
    Flag(bool),
    /// A list of names.
    Names(&'static [&'static str]),
    /// Marks at offsets of a file's first bytes (`Engine::magic`).
    Marks(&'static [Mark]),
    /// Nothing (None, nil, null): an engine without this property.
    Nothing,
}

/// One engine: its names, its nature, its parameters and how to open and restore it.
pub struct Engine {
    /// The `engine=` name: `hash`, `tree`, ...
    pub name: &'static str,
    /// The Rust type and the `class` property of `inspect`: `HashDbm`, ...
    pub class: &'static str,
    /// The file extension that selects it, without the dot.
    pub extension: &'static str,
    /// Whether its records live in a file or in memory.
    pub storage: Storage,
    /// Whether its cursor visits keys in order and it has an ordered cursor: always, never,
    /// or as its shards' (`registry::ordered` tells for given parameters).
    pub order: Order,
    /// One line for help texts and `kura engines`.
    pub summary: &'static str,
    /// Every parameter `open` accepts (besides `engine`).
    pub params: &'static [&'static str],
    /// The parameter that names its codec (`record_comp=zstd`), taking any name of the codec
    /// registry; None for an engine without compression, or whose codec is its shards'.
    pub codec_param: Option<&'static str>,
    /// Parameters a benchmark or demo of `records` records passes where the user gives none:
    /// an engine that cannot open without a parameter (CacheDbm's record cap) gets one sized
    /// for the run, so `kura bench --engine NAME` always runs.
    pub(crate) bench_params: fn(records: u64) -> Params,
    /// Parameters a new database made by an import of `records` records gets where the user
    /// gives none (HashDbm: one bucket a record, not the default million).
    pub(crate) import_params: fn(records: u64) -> Params,
    /// The parameters that fix a new database's size (`import_params` gives one of them): a
    /// user who gives any of them has sized the database, and an import sizes nothing.
    pub sized_by: &'static [&'static str],
    /// Parameters that bound the whole database, not each part of it (a cache's record and
    /// memory caps): a shard set gives each shard its share, so that the set as a whole stays
    /// within them.
    pub shared_caps: &'static [&'static str],
    /// Opens (or creates) a database of this engine; call it through `Engine::open`.
    pub(crate) open: fn(&Path, OpenMode, &Params) -> Result<Box<dyn Dbm>>,
    /// What `kura restore` does for this engine; call it through `Engine::restore`.
    pub(crate) restore: Restore,
    /// The marks every file of this engine starts with (its magic, and for a memory engine
    /// its snapshot's class byte); empty for a shard set, whose files are its shards'.
    pub magic: &'static [Mark],
    /// A set of shard files of another engine (`BASE-00000-of-00004` ...), not one file: its
    /// base path carries the shards' extension, and importers write its shards in parallel.
    pub shard_set: bool,
    /// What a power loss leaves of the writes since the last durable commit.
    pub after_power_loss: AfterPowerLoss,
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
    /// Damage found while opening names the file (`Error::in_file`), whatever the engine.
    pub fn open(&self, path: &Path, mode: OpenMode, params: &Params) -> Result<Box<dyn Dbm>> {
        (self.open)(path, mode, params).map_err(|e| e.in_file(path))
    }

    /// What the engine is, as `kura engines --json`, Python's `kura.engines()` and Ruby's
    /// `Kura.engines` show it: the one list of its facts all three translate. `ordered` is
    /// true for an engine ordered whatever its parameters; `order` says `as shards` for a
    /// shard set, ordered when its shards' engine is.
    pub fn description(&self) -> [(&'static str, Fact); 14] {
        [
            ("name", Fact::Text(self.name)),
            ("class", Fact::Text(self.class)),
            ("extension", Fact::Text(self.extension)),
            ("storage", Fact::Text(self.storage.name())),
            ("ordered", Fact::Flag(self.is_ordered())),
            ("order", Fact::Text(self.order.name())),
            ("params", Fact::Names(self.params)),
            ("codec_param", self.codec_param.map_or(Fact::Nothing, Fact::Text)),
            ("sized_by", Fact::Names(self.sized_by)),
            ("magic", Fact::Marks(self.magic)),
            ("shard_set", Fact::Flag(self.shard_set)),
            ("restore", Fact::Flag(self.can_restore())),
            ("after_power_loss", Fact::Text(self.after_power_loss.name())),
            ("summary", Fact::Text(self.summary)),
        ]
    }

    /// Parameters a benchmark or demo of `records` records passes where the user gives none
    /// (see the field `bench_params`): CacheDbm's record cap sized for the run, ShardDbm's
    /// shard count.
    pub fn bench_params(&self, records: u64) -> Params {
        (self.bench_params)(records)
    }

    /// Parameters a new database made by an import of `records` records gets where the user
    /// gives none (HashDbm: one bucket a record, not the default million).
    pub fn import_params(&self, records: u64) -> Params {
        (self.import_params)(records)
    }

    /// Whether `kura restore` can salvage this engine's files (`Engine::restore`).
    pub fn can_restore(&self) -> bool {
        matches!(self.restore, Restore::Salvage(_))
    }

    /// Whether its keys are in order whatever its parameters (TreeDbm, BabyDbm); a shard set's
    /// are as its shards' (`registry::ordered`).
    pub fn is_ordered(&self) -> bool {
        self.order == Order::Ordered
    }

    /// Whether `head`, the first bytes of a file, are those of a file of this engine.
    pub fn marks(&self, head: &[u8]) -> bool {
        !self.magic.is_empty() && self.magic.iter().all(|mark| mark.is_in(head))
    }

    /// Whether the engine keeps its records in memory (a file is only its snapshot).
    pub fn is_in_memory(&self) -> bool {
        self.storage == Storage::Memory
    }

    /// Salvages `source` into the new file `dest` (see `Restore`); an engine without salvage
    /// is an Infeasible error that says why. A `dest` where a database lies already (a file,
    /// or the files of a shard set) is a Duplicate error: a salvage writes a new database and
    /// never replaces one.
    pub fn restore(&self, source: &Path, dest: &Path) -> Result<RestoreReport> {
        if dest.exists() || crate::shard_dbm::naming::has_shards(dest) {
            return Err(Error::new(
                ErrorKind::Duplicate,
                format!("{} already exists: restore writes a new database and replaces none", dest.display()),
            ));
        }
        match self.restore {
            Restore::Salvage(salvage) => salvage(source, dest),
            Restore::Unsupported(why) => Err(Error::infeasible(format!("{} has no restore: {why}", self.class))),
        }
    }
}

/// The default engine of `engines`: the first, which is a single-file engine (a shard set
/// cannot be the default, being made of another engine).
pub fn default_of(engines: &'static [Engine]) -> Result<&'static Engine> {
    engines
        .first()
        .filter(|e| !e.shard_set)
        .ok_or_else(|| Error::internal("the engine list starts with its default engine, which is no shard set"))
}

/// The engine called `name` in `engines`.
pub fn named(engines: &'static [Engine], name: &str) -> Result<&'static Engine> {
    engines.iter().find(|e| e.name == name).ok_or_else(|| {
        let names: Vec<&str> = engines.iter().map(|e| e.name).collect();
        Error::invalid(format!("unknown engine {name:?} (known: {})", names.join(" ")))
    })
}

/// The engine of `engines` whose marks the file at `path` starts with (`Engine::magic`), if
/// any: told by content, with no trial open. A file that cannot be read is an Io (or
/// NotFound) error.
pub fn of_file(engines: &'static [Engine], path: &Path) -> Result<Option<&'static Engine>> {
    use std::io::Read;
    let head_len = engines.iter().flat_map(|e| e.magic).map(|mark| mark.end()).max().unwrap_or(0);
    let context = || format!("read {}", path.display());
    let file = std::fs::File::open(path).map_err(|e| Error::io(context(), e))?;
    let mut head = Vec::with_capacity(head_len);
    file.take(head_len as u64).read_to_end(&mut head).map_err(|e| Error::io(context(), e))?;
    Ok(engines.iter().find(|engine| engine.marks(&head)))
}

/// The engine of `engines` whose extension `path` has, if any.
pub fn of_path(engines: &'static [Engine], path: &Path) -> Option<&'static Engine> {
    let extension = path.extension().and_then(|e| e.to_str())?;
    engines.iter().find(|e| e.extension == extension)
}
