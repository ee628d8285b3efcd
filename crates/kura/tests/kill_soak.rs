//! The kill -9 soak: many short trials in which a child process runs a random mix of writes
//! (sets, removes, appends, increments, write batches, durable or not, rebuilds, synchronizes) on a file
//! database and is killed with SIGKILL at a random moment. After each kill the parent opens
//! the file (a writer, so it restores it) and checks EVERY record against a model: the file
//! must hold exactly the state after some prefix of the operations, no shorter than what the
//! engine's contract says survives a killed process (see `CONTRACTS`), no longer than the
//! operation in flight. A trial continues the file the previous trial left, so the files
//! grow, get rebuilt and get restored over and over. Besides every file engine of the
//! registry (ShardDbm as a `.kus` set of HashDbm shards), a ShardDbm set of TreeDbm shards
//! is soaked: its shards commit each on its own, so each shard must hold a prefix of its own
//! operations.
//!
//! `KURA_SOAK_TRIALS` sets the number of trials (default 200, spread over the subjects;
//! `make soak` runs 10,000). The figures go into docs/durability.md. `KURA_SOAK_ONLY` names
//! the subjects to soak (as the summary lines name them, separated by commas, e.g.
//! `KURA_SOAK_ONLY="shard set of 3 tree"`), to chase a failure of one subject.

#![expect(clippy::unwrap_used, reason = "a test fails loudly on the first broken expectation")]
#![expect(clippy::indexing_slicing, reason = "indices into small tables of known size")]

#[path = "support/killed_child.rs"]
#[allow(dead_code, reason = "each kill test uses part of the shared child machinery")]
mod killed_child;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::{Duration, Instant};

use killed_child::{report_progress, KilledChild};
use kura::registry::{engines, Engine, Storage};
use kura::split_mix::SplitMix64;
use kura::{Dbm, DbmExt, OpenMode, Params, WriteBatch};

const CHILD_ENV: &str = "KURA_SOAK_CHILD";
const TRIALS_ENV: &str = "KURA_SOAK_TRIALS";
const ONLY_ENV: &str = "KURA_SOAK_ONLY";
/// A long soak says how far it got this often (in trials).
const PROGRESS_EVERY: u64 = 1000;
const DEFAULT_TRIALS: u64 = 200;
/// Trials on one file before the next starts from an empty one with other parameters.
const TRIALS_PER_FILE: u64 = 40;
/// Distinct keys the writers touch (plus as many counters), so that updates and removes
/// mostly hit records that exist.
const KEYS: u64 = 300;

/// What an engine promises about a killed process, as its docs state it.
#[derive(Debug, Clone, Copy)]
struct Contract {
    /// Every operation that returned survives (HashDbm: writes go into the mapped file).
    /// Otherwise only what the last commit point wrote: `write_batch`, `synchronize`,
    /// `rebuild` (TreeDbm: dirty pages live in memory between commits).
    every_operation_survives: bool,
    /// Which write batches are wholly applied or not at all; the others may be cut anywhere
    /// between their operations.
    atomic_batches: Atomicity,
    /// A cut batch may have applied any of its keys' changes, not only a prefix of them
    /// (ShardDbm applies a batch shard by shard): each key it touched then holds one of the
    /// values that key took during the batch.
    batch_cut_per_key: bool,
}

/// Which write batches a killed process leaves whole or absent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Atomicity {
    None,
    All,
    /// Those of at most a quarter of the file's `checkpoint_bytes` (HashDbm: one journal
    /// frame; a larger batch is applied without one, docs/hash.md).
    WithinQuarterOfCheckpoint,
}

/// The contract of each file engine (docs/hash.md, docs/tree.md). An engine added to the
/// registry without an entry here fails `every_file_engine_has_a_contract`.
const CONTRACTS: &[(&str, Contract)] = &[
    (
        "hash",
        Contract {
            every_operation_survives: true,
            atomic_batches: Atomicity::WithinQuarterOfCheckpoint,
            batch_cut_per_key: false,
        },
    ),
    ("tree", Contract { every_operation_survives: false, atomic_batches: Atomicity::All, batch_cut_per_key: false }),
    // A `.kus` set of hash shards (docs/shard.md): each shard keeps HashDbm's promise; a batch
    // is split per shard and applied shard by shard, so a cut one may hold any shards' parts.
    ("shard", Contract { every_operation_survives: true, atomic_batches: Atomicity::None, batch_cut_per_key: true }),
];

/// The largest write batch (`WriteBatch::byte_size`) a killed process leaves whole or absent
/// under `contract`, on a file opened with `params`.
fn atomic_batch_bytes(contract: Contract, params: &Params) -> usize {
    match contract.atomic_batches {
        Atomicity::None => 0,
        Atomicity::All => usize::MAX,
        Atomicity::WithinQuarterOfCheckpoint => {
            let checkpoint_bytes: usize = params.get("checkpoint_bytes").map_or(64 << 20, |v| v.parse().unwrap());
            checkpoint_bytes / 4
        }
    }
}

/// The byte size of the write batch that a batch of `changes` is.
fn batch_bytes(changes: &[(Vec<u8>, Option<Vec<u8>>)]) -> usize {
    let mut batch = WriteBatch::new();
    for (key, value) in changes {
        match value {
            Some(value) => batch.set(key, value),
            None => batch.remove(key),
        };
    }
    batch.byte_size()
}

fn contract_of(engine: &Engine) -> Option<Contract> {
    CONTRACTS.iter().find(|(name, _)| *name == engine.name).map(|(_, contract)| *contract)
}

fn soaked_engines() -> Vec<&'static Engine> {
    engines().iter().filter(|engine| engine.storage == Storage::File).collect()
}

/// Shards of the set of TreeDbm shards the soak writes besides the registry's file engines.
const TREE_SET_SHARDS: usize = 3;

/// What a series of trials writes to: a file engine of the registry (a ShardDbm under its own
/// `.kus` extension is a set of HashDbm shards), or a ShardDbm set of TreeDbm shards.
#[derive(Clone, Copy)]
struct Subject {
    engine: &'static Engine,
    /// For a set of TreeDbm shards, their count. Each shard commits on its own, so the set is
    /// checked shard by shard: each must hold a prefix of its own operations under TreeDbm's
    /// contract (`check_per_shard`).
    tree_shards: Option<usize>,
}

impl Subject {
    fn name(&self) -> String {
        match self.tree_shards {
            None => self.engine.name.to_string(),
            Some(count) => format!("shard set of {count} tree"),
        }
    }

    /// The file name's extension: a set of TreeDbm shards is named as TreeDbm files are.
    fn extension(&self) -> &'static str {
        if self.tree_shards.is_some() {
            "kut"
        } else {
            self.engine.extension
        }
    }

    fn contract(&self) -> Contract {
        let name = if self.tree_shards.is_some() { "tree" } else { self.engine.name };
        CONTRACTS.iter().find(|(n, _)| *n == name).map(|(_, contract)| *contract).unwrap()
    }

    /// The parameters of its `file_index`-th file: a set of TreeDbm shards gets TreeDbm's
    /// (passed on to every shard).
    fn params(&self, file_index: u64) -> Params {
        match self.tree_shards {
            None => params_for(self.engine, file_index),
            Some(count) => params_for(kura::registry::engine("tree").unwrap(), file_index).with("num_shards", count),
        }
    }

    /// Whether its file (or any file of its set) exists.
    fn exists(&self, path: &Path) -> bool {
        path.exists() || kura::shard_dbm::has_shards(path)
    }

    /// Removes its file, or every file of its set.
    fn remove(&self, path: &Path) {
        if path.exists() {
            std::fs::remove_file(path).unwrap();
        } else {
            kura::shard_dbm::remove_shards(path).unwrap();
        }
    }
}

/// Every file engine of the registry, then a set of TreeDbm shards.
fn subjects() -> Vec<Subject> {
    let mut subjects: Vec<Subject> =
        soaked_engines().into_iter().map(|engine| Subject { engine, tree_shards: None }).collect();
    subjects.push(Subject { engine: kura::registry::engine("shard").unwrap(), tree_shards: Some(TREE_SET_SHARDS) });
    subjects
}

#[test]
fn every_file_engine_has_a_contract() {
    for engine in soaked_engines() {
        assert!(contract_of(engine).is_some(), "{}: add its kill -9 contract to CONTRACTS", engine.name);
    }
}

/// One operation of a writer.
#[derive(Debug, Clone)]
enum Op {
    Set(Vec<u8>, Vec<u8>),
    Remove(Vec<u8>),
    Append(Vec<u8>, Vec<u8>),
    Increment(Vec<u8>, i64),
    Batch(Vec<(Vec<u8>, Option<Vec<u8>>)>),
    Rebuild,
    Synchronize,
}

impl Op {
    /// Whether the engine has committed everything before it when this operation returns.
    fn commits(&self, contract: Contract) -> bool {
        contract.every_operation_survives || matches!(self, Op::Batch(_) | Op::Rebuild | Op::Synchronize)
    }
}

fn random_key(rng: &mut SplitMix64) -> Vec<u8> {
    format!("key{:04}", rng.next_u64() % KEYS).into_bytes()
}

/// Values of many sizes, some larger than a small page, with content that compresses.
fn random_value(rng: &mut SplitMix64) -> Vec<u8> {
    let length = match rng.next_u64() % 10 {
        0 => 0,
        1 => 1500 + rng.next_u64() % 3000,
        _ => rng.next_u64() % 120,
    };
    let stamp = rng.next_u64();
    (0..length).map(|i| b"abcdefgh"[((stamp >> (i % 32)) % 8) as usize]).collect()
}

/// The `n`-th operation of the writer with `seed`: the sequence is the same in the child and
/// in the parent that checks it.
fn operations(seed: u64) -> impl Iterator<Item = Op> {
    let mut rng = SplitMix64::new(seed);
    std::iter::from_fn(move || {
        let op = match rng.next_u64() % 100 {
            0..=39 => Op::Set(random_key(&mut rng), random_value(&mut rng)),
            40..=59 => Op::Remove(random_key(&mut rng)),
            60..=69 => Op::Append(random_key(&mut rng), random_value(&mut rng)),
            70..=79 => {
                let counter = format!("counter{:03}", rng.next_u64() % 50).into_bytes();
                Op::Increment(counter, (rng.next_u64() % 1000) as i64 - 300)
            }
            80..=95 => Op::Batch(
                (0..1 + rng.next_u64() % 40)
                    .map(|_| {
                        let key = random_key(&mut rng);
                        let value = (!rng.next_u64().is_multiple_of(4)).then(|| random_value(&mut rng));
                        (key, value)
                    })
                    .collect(),
            ),
            96..=97 => Op::Synchronize,
            _ => Op::Rebuild,
        };
        Some(op)
    })
}

fn run(db: &dyn Dbm, op: &Op) {
    match op {
        Op::Set(key, value) => db.set(key, value, true).unwrap(),
        Op::Remove(key) => match db.remove(key) {
            Ok(()) => {}
            Err(e) => assert_eq!(e.kind(), kura::ErrorKind::NotFound, "{e}"),
        },
        Op::Append(key, value) => db.append(key, value, b",").unwrap(),
        Op::Increment(key, delta) => {
            db.increment(key, *delta, 0).unwrap();
        }
        Op::Batch(changes) => {
            let mut batch = WriteBatch::new();
            for (key, value) in changes {
                match value {
                    Some(value) => batch.set(key, value),
                    None => batch.remove(key),
                };
            }
            // Every other batch durable: TreeDbm journals a durable batch of 16 or more
            // operations before it applies it (tree_dbm/store.rs), so a kill may land between
            // the two.
            if changes.len() % 2 == 0 {
                db.write_batch_durable(&batch).unwrap();
            } else {
                db.write_batch(&batch).unwrap();
            }
        }
        Op::Rebuild => db.rebuild(&Params::new()).unwrap(),
        Op::Synchronize => db.synchronize(false).unwrap(),
    }
}

/// A key's change: its new state.
type Change = (Vec<u8>, Option<Vec<u8>>);

/// The single-key changes `op` makes to `model` (applying them as it goes).
fn changes_of(op: &Op, model: &mut BTreeMap<Vec<u8>, Vec<u8>>) -> Vec<Change> {
    let mut changes = Vec::new();
    let mut change = |key: &Vec<u8>, value: Option<Vec<u8>>, model: &mut BTreeMap<Vec<u8>, Vec<u8>>| {
        match &value {
            Some(value) => model.insert(key.clone(), value.clone()),
            None => model.remove(key),
        };
        changes.push((key.clone(), value));
    };
    match op {
        Op::Set(key, value) => change(key, Some(value.clone()), model),
        Op::Remove(key) => change(key, None, model),
        Op::Append(key, value) => {
            let joined = match model.get(key) {
                Some(old) => [old.as_slice(), b",", value].concat(),
                None => value.clone(),
            };
            change(key, Some(joined), model);
        }
        Op::Increment(key, delta) => {
            let old = model.get(key).map_or(0, |v| i64::from_be_bytes(v.as_slice().try_into().unwrap()));
            change(key, Some(old.wrapping_add(*delta).to_be_bytes().to_vec()), model);
        }
        Op::Batch(batch) => {
            for (key, value) in batch {
                change(key, value.clone(), model);
            }
        }
        Op::Rebuild | Op::Synchronize => {}
    }
    changes
}

/// Parameters of the `file_index`-th file of `engine`: codecs and update modes in turn,
/// small pages so that trees are deep, a low dirty-page bound so that automatic commits
/// happen between the explicit ones.
fn params_for(engine: &Engine, file_index: u64) -> Params {
    let codecs = ["none", "lz4", "zstd", "zlib", "snappy"];
    let journal_first = file_index % 5 == 4;
    // TreeDbm: the second file of each five keeps sets and batches in its write buffer
    // (tree_dbm/write_buffer.rs) until it fills or something else meets the tree, so that
    // kills land while they wait, while they are applied, and while that commits past its few
    // modified pages; its journal has room for them.
    let buffered = file_index % 5 == 1;
    let candidates = [
        ("record_comp", codecs[(file_index % codecs.len() as u64) as usize].to_string()),
        ("update_mode", if file_index.is_multiple_of(2) { "in_place" } else { "appending" }.to_string()),
        ("num_buckets", (61 + file_index * 7).to_string()),
        ("max_page_size", (512 << (file_index % 3)).to_string()),
        ("max_dirty_pages", if journal_first { "200".to_string() } else { (8 + file_index % 3 * 24).to_string() }),
        // TreeDbm: checkpoints every few KiB of journal, and batches over a quarter of that
        // bypass the journal (applied, then checkpointed), so kills land in both paths; one
        // file in five has room for whole batches in its journal, where a durable batch of 16
        // operations or more is journaled before it is applied (tree_dbm/store.rs).
        (
            "checkpoint_bytes",
            if journal_first || buffered { (1 << 20).to_string() } else { (2048 << (file_index % 4)).to_string() },
        ),
    ];
    let params = candidates
        .iter()
        .filter(|(name, _)| engine.params.contains(name))
        .fold(Params::new(), |params, (name, value)| params.with(name, value));
    if buffered && engine.params.contains(&"write_buffer_bytes") {
        // Memory said to be small: sets and batches of any size wait too.
        return params.with("write_buffer_bytes", 16_384).with("memory_bytes", 65_536);
    }
    params
}

/// The child: opens the file and runs the operations of `seed` until it is killed,
/// reporting after each one how many have returned.
#[test]
fn soak_child_entry() {
    let Ok(spec) = std::env::var(CHILD_ENV) else { return };
    let mut fields = spec.splitn(4, ':');
    let (subject, file_index, seed, path) =
        (fields.next().unwrap(), fields.next().unwrap(), fields.next().unwrap(), fields.next().unwrap());
    let subject = subjects()[subject.parse::<usize>().unwrap()];
    let params = subject.params(file_index.parse().unwrap());
    let db = subject.engine.open(Path::new(path), OpenMode::Create, &params).unwrap();
    report_progress(1);
    for (done, op) in operations(seed.parse().unwrap()).enumerate() {
        run(db.as_ref(), &op);
        report_progress(done as u64 + 2);
    }
}

/// Checks `actual` against the states the writer may have left: the model after some prefix
/// of `ops` (which start from `before`) that ends at a cut the engine allows, no earlier than
/// the last commit among the `returned` operations and no later than the one in flight.
/// Returns the number of operations wholly applied at the matching cut.
fn check_prefix(
    contract: Contract,
    atomic_batch_bytes: usize,
    before: &BTreeMap<Vec<u8>, Vec<u8>>,
    ops: &[Op],
    returned: usize,
    actual: &BTreeMap<Vec<u8>, Vec<u8>>,
) -> Result<usize, String> {
    let earliest = if contract.every_operation_survives {
        returned
    } else {
        ops.iter().take(returned).rposition(|op| op.commits(contract)).map_or(0, |last| last + 1)
    };
    let mut model = before.clone();
    for op in ops.iter().take(earliest) {
        changes_of(op, &mut model);
    }
    // Keys whose state differs from the model's: at a cut where none does, the file matches.
    let mut differing: BTreeSet<Vec<u8>> =
        model.keys().chain(actual.keys()).filter(|key| model.get(*key) != actual.get(*key)).cloned().collect();
    if differing.is_empty() {
        return Ok(earliest);
    }
    let first_difference = differing.iter().next().cloned().unwrap_or_default();
    let model_at_earliest = model.get(&first_difference).map(Vec::len);
    if contract.batch_cut_per_key {
        if let Some(batch @ Op::Batch(_)) = ops.get(earliest).filter(|_| earliest == returned) {
            // The batch in flight: every key differing from the model must hold a value it
            // took during the batch, and nothing else may differ.
            let mut taken: BTreeMap<Vec<u8>, Vec<Option<Vec<u8>>>> = BTreeMap::new();
            for (key, value) in changes_of(batch, &mut model.clone()) {
                taken.entry(key.clone()).or_insert_with(|| vec![model.get(&key).cloned()]).push(value);
            }
            let explained = differing
                .iter()
                .all(|key| taken.get(key).is_some_and(|values| values.contains(&actual.get(key).cloned())));
            if explained {
                return Ok(earliest + 1);
            }
        }
    }
    for (index, op) in ops.iter().enumerate().skip(earliest) {
        let changes = changes_of(op, &mut model.clone());
        let cut_inside = matches!(op, Op::Batch(changes) if batch_bytes(changes) > atomic_batch_bytes);
        for (key, value) in changes {
            match &value {
                Some(value) => model.insert(key.clone(), value.clone()),
                None => model.remove(&key),
            };
            if model.get(&key) == actual.get(&key) {
                differing.remove(&key);
            } else {
                differing.insert(key);
            }
            if cut_inside && differing.is_empty() {
                return Ok(index);
            }
        }
        if differing.is_empty() {
            return Ok(index + 1);
        }
    }
    Err(format!(
        "no prefix of operations {earliest}..={} matches the file; first difference at {}: a value of {:?} bytes \
         in the file, {model_at_earliest:?} in the model after operation {earliest}; {}",
        ops.len(),
        String::from_utf8_lossy(&first_difference),
        actual.get(&first_difference).map(Vec::len),
        shorter_prefixes(before, ops, actual),
    ))
}

/// For a failure message: which prefixes of `ops` (from none) the file does match, whole
/// operations only, and the commit points among them.
fn shorter_prefixes(before: &BTreeMap<Vec<u8>, Vec<u8>>, ops: &[Op], actual: &BTreeMap<Vec<u8>, Vec<u8>>) -> String {
    let mut model = before.clone();
    let mut matching = Vec::new();
    for index in 0..=ops.len() {
        if &model == actual {
            matching.push(index);
        }
        if let Some(op) = ops.get(index) {
            changes_of(op, &mut model);
        }
    }
    let commits: Vec<usize> = ops
        .iter()
        .enumerate()
        .filter(|(_, op)| matches!(op, Op::Batch(_) | Op::Rebuild | Op::Synchronize))
        .map(|(index, _)| index + 1)
        .collect();
    let rebuilds: Vec<usize> =
        ops.iter().enumerate().filter(|(_, op)| matches!(op, Op::Rebuild)).map(|(index, _)| index + 1).collect();
    format!(
        "the file is the state after operations {matching:?}; commit points end after operations {commits:?} \
         (rebuilds after {rebuilds:?})"
    )
}

/// `check_prefix` for a set whose shards commit each on its own (TreeDbm shards): each shard
/// must hold a prefix of its own operations (those on its keys, its part of each batch, and
/// every rebuild and synchronize, which reach every shard). Returns `returned + 1` if some
/// shard applied its part of the operation in flight, else `returned`.
fn check_per_shard(
    contract: Contract,
    count: usize,
    before: &BTreeMap<Vec<u8>, Vec<u8>>,
    ops: &[Op],
    returned: usize,
    actual: &BTreeMap<Vec<u8>, Vec<u8>>,
) -> Result<usize, String> {
    let mut in_flight_applied = false;
    for shard in 0..count {
        let mine = |key: &[u8]| kura::shard_dbm::shard_of(key, count) == shard;
        let only_mine = |model: &BTreeMap<Vec<u8>, Vec<u8>>| -> BTreeMap<Vec<u8>, Vec<u8>> {
            model.iter().filter(|(key, _)| mine(key)).map(|(k, v)| (k.clone(), v.clone())).collect()
        };
        let (mut shard_ops, mut shard_returned) = (Vec::new(), 0);
        for (index, op) in ops.iter().enumerate() {
            let part = match op {
                Op::Set(key, _) | Op::Remove(key) | Op::Append(key, _) | Op::Increment(key, _) => {
                    mine(key).then(|| op.clone())
                }
                Op::Batch(changes) => {
                    let part: Vec<Change> = changes.iter().filter(|(key, _)| mine(key)).cloned().collect();
                    (!part.is_empty()).then_some(Op::Batch(part))
                }
                Op::Rebuild | Op::Synchronize => Some(op.clone()),
            };
            if let Some(part) = part {
                shard_ops.push(part);
                shard_returned += usize::from(index < returned);
            }
        }
        let applied = check_prefix(
            contract,
            atomic_batch_bytes(contract, &Params::new()),
            &only_mine(before),
            &shard_ops,
            shard_returned,
            &only_mine(actual),
        )
        .map_err(|why| format!("shard {shard} of {count}: {why}"))?;
        in_flight_applied |= applied > shard_returned;
    }
    Ok(returned + usize::from(in_flight_applied))
}

/// Reads every record of the file after a kill, checking that the cursor, `get` and `count`
/// agree, and closes it cleanly.
fn read_back(engine: &Engine, path: &Path, trial: u64) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let db = engine
        .open(path, OpenMode::Write, &Params::new())
        .unwrap_or_else(|e| panic!("trial {trial}: {} does not open after a kill: {e}", engine.name));
    let mut actual = BTreeMap::new();
    for record in db.records().unwrap() {
        let (key, value) = record.unwrap_or_else(|e| panic!("trial {trial}: a record is unreadable: {e}"));
        assert!(actual.insert(key, value).is_none(), "trial {trial}: the cursor showed a key twice");
    }
    assert_eq!(db.count().unwrap(), actual.len() as u64, "trial {trial}: count disagrees with the cursor");
    for (key, value) in &actual {
        assert_eq!(&db.get(key).unwrap(), value, "trial {trial}: get disagrees with the cursor");
    }
    db.close().unwrap();
    actual
}

/// The two header copies of each TreeDbm shard of the set at `base`, described.
fn shard_headers(base: &Path, count: usize) -> String {
    (0..count)
        .map(|index| {
            let path = kura::shard_dbm::shard_path(base, index, count);
            let mut start = vec![0u8; 256];
            let read = std::fs::File::open(&path).and_then(|file| {
                use std::os::unix::fs::FileExt;
                file.read_exact_at(&mut start, 0)
            });
            match read {
                Ok(()) => format!("shard {index}: {}", kura::forge::describe_headers(&start)),
                Err(e) => format!("shard {index}: {e}"),
            }
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// What the soak measured, for the summary line.
#[derive(Default)]
struct Tally {
    trials: u64,
    operations_returned: u64,
    killed_before_open: u64,
    in_flight_applied: u64,
}

#[test]
fn killed_writers_leave_a_prefix_of_their_operations() {
    let trials: u64 = std::env::var(TRIALS_ENV).ok().and_then(|t| t.parse().ok()).unwrap_or(DEFAULT_TRIALS);
    let started = Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let soaked = subjects();
    // Indices into `subjects()` (the child finds its subject by index, so they are kept).
    let only = std::env::var(ONLY_ENV).ok();
    let chosen: Vec<usize> = (0..soaked.len())
        .filter(|&index| only.as_deref().is_none_or(|names| names.split(',').any(|n| n == soaked[index].name())))
        .collect();
    assert!(!chosen.is_empty(), "{ONLY_ENV} names no subject (they are: hash, tree, shard, shard set of 3 tree)");
    let mut rng = SplitMix64::new(0x5eed_0f50_a4ed);
    let mut tallies: Vec<Tally> = soaked.iter().map(|_| Tally::default()).collect();
    let mut states: Vec<BTreeMap<Vec<u8>, Vec<u8>>> = soaked.iter().map(|_| BTreeMap::new()).collect();
    for trial in 0..trials {
        let which = chosen[(trial % chosen.len() as u64) as usize];
        let subject = soaked[which];
        let (engine, contract) = (subject.engine, subject.contract());
        let round = trial / chosen.len() as u64;
        let file_index = round / TRIALS_PER_FILE;
        let path = dir.path().join(format!("{which}-{}-{file_index}.{}", engine.name, subject.extension()));
        if round.is_multiple_of(TRIALS_PER_FILE) {
            states[which].clear();
        }
        if trial > 0 && trial.is_multiple_of(PROGRESS_EVERY) {
            println!("kill soak: {trial} trials in {:.1} s", started.elapsed().as_secs_f64());
        }
        let seed = rng.next_u64();
        let mut child = KilledChild::spawn(
            "soak_child_entry",
            &[(CHILD_ENV, format!("{which}:{file_index}:{seed}:{}", path.display()))],
        );
        // Kill before the open now and then, else after a random number of operations and
        // a random delay of up to a millisecond.
        let choice = rng.next_u64();
        let wanted = if choice.is_multiple_of(20) { 0 } else { 1 + (choice >> 8) % 400 };
        child.wait_for(wanted);
        let progress = child.kill_after(Duration::from_micros((choice >> 24) % 1000));

        let tally = &mut tallies[which];
        tally.trials += 1;
        let Some(progress) = progress else {
            tally.killed_before_open += 1;
            if !subject.exists(&path) {
                continue;
            }
            if states[which].is_empty() && engine.open(&path, OpenMode::ReadOnly, &Params::new()).is_err() {
                // Killed while creating the file, before its header was whole (or a set, before
                // its last shard was made): nothing was promised yet, and the next trial starts
                // the file again.
                subject.remove(&path);
                continue;
            }
            // Killed inside the open: the file must still hold the previous trial's state.
            let actual = read_back(engine, &path, trial);
            assert!(actual == states[which], "trial {trial}: a writer killed while opening changed the file");
            continue;
        };
        let returned = (progress - 1) as usize;
        tally.operations_returned += returned as u64;
        let ops: Vec<Op> = operations(seed).take(returned + 1).collect();
        // The header copies of each shard as the kill left them (the open below rewrites
        // them), for the failure message.
        let headers_left = subject.tree_shards.map(|count| shard_headers(&path, count));
        let actual = read_back(engine, &path, trial);
        let checked = match subject.tree_shards {
            None => {
                let atomic_batch_bytes = atomic_batch_bytes(contract, &subject.params(file_index));
                check_prefix(contract, atomic_batch_bytes, &states[which], &ops, returned, &actual)
            }
            Some(count) => check_per_shard(contract, count, &states[which], &ops, returned, &actual),
        };
        match checked {
            Ok(applied) => tally.in_flight_applied += u64::from(applied > returned),
            Err(why) => {
                let headers =
                    headers_left.map(|h| format!("\nheader copies before the reopen: {h}")).unwrap_or_default();
                panic!(
                    "trial {trial} ({}, file {file_index}, {returned} operations returned): {why}{headers}",
                    subject.name()
                )
            }
        }
        states[which] = actual;
    }
    for (subject, tally) in soaked.iter().zip(&tallies).filter(|(_, tally)| tally.trials > 0) {
        println!(
            "kill soak {}: {} trials, {} operations returned before the kills, {} killed before the open, \
             {} with the operation in flight applied",
            subject.name(),
            tally.trials,
            tally.operations_returned,
            tally.killed_before_open,
            tally.in_flight_applied
        );
    }
    println!("kill soak: {trials} trials in {:.1} s", started.elapsed().as_secs_f64());
}
