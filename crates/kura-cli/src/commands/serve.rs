//! `kura serve`: a memcached-protocol server over a database (crate `kura-server`).
//!
//! With a path, the engine comes from its extension or `engine=` as everywhere else; with
//! none, an in-memory engine (CacheDbm unless `engine=` says otherwise) bounded by
//! `--memory-limit`. An engine that takes `cap_mem_bytes` gets the memory limit, and a
//! record cap sized from it, unless `--params` gives them; an in-memory engine that has no
//! such cap (TinyDbm, CompactDbm) is not bounded, and the server says so when it starts.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use kura::{Dbm, OpenMode, Params};
use kura_server::Config;

use super::print_line;

/// The engine served when no path is given.
const DEFAULT_ENGINE: &str = "cache";

/// Bytes per record assumed when sizing a record cap from a memory limit: memcached's
/// smallest slab chunk (96 bytes) bounds its item count the same way. CacheDbm's bucket
/// arrays grow with the records (up to one bucket per record of the cap), so the cap costs
/// no memory up front (at their largest, 4 bytes per record of the cap, they must fit in the
/// limit, which opening checks: see docs/memory.md).
const BYTES_PER_RECORD_CAP: u64 = 96;

#[derive(Args, Debug)]
pub struct ServeArgs {
    /// Database file to serve (engine by extension or engine=); none: an in-memory cache.
    path: Option<PathBuf>,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    /// TCP port (0: any free port, printed when listening).
    #[arg(long, default_value_t = 11211)]
    port: u16,
    /// Memory bound of an in-memory engine (suffixes K, M, G), memcached's -m.
    #[arg(long, value_name = "BYTES", default_value = "64M")]
    memory_limit: String,
    /// Largest value a client may store (the value alone, not the key), memcached's -I.
    #[arg(long, value_name = "BYTES", default_value = "1M")]
    max_item_size: String,
    /// Connections served at once; more are told `ERROR Too many open connections`.
    #[arg(long, value_name = "N", default_value_t = 1024)]
    max_connections: usize,
    /// Close connections idle for this many seconds (0: never).
    #[arg(long, value_name = "SECONDS", default_value_t = 0)]
    idle_timeout: u64,
    /// Force a served file to the device every this many seconds (0: only at the stop).
    #[arg(long, value_name = "SECONDS", default_value_t = 0)]
    sync_every: u64,
    /// Worker threads (0: one per CPU).
    #[arg(long, value_name = "N", default_value_t = 0)]
    threads: usize,
    #[command(flatten)]
    listen: super::serve_listen::ListenArgs,
}

fn size(flag: &str, text: &str) -> kura::Result<u64> {
    kura::dbm::parse_size(text).map_err(|e| kura::Error::invalid(format!("--{flag}: {e}")))
}

pub fn run(args: &ServeArgs, params: &Params) -> kura::Result<()> {
    let memory_limit = size("memory-limit", &args.memory_limit)?;
    let max_item_size = usize::try_from(size("max-item-size", &args.max_item_size)?)
        .map_err(|_| kura::Error::invalid("--max-item-size is too large"))?;
    let seconds = |s: u64| (s > 0).then(|| Duration::from_secs(s));
    let mut config = Config {
        host: args.host.clone(),
        port: args.port,
        max_item_size,
        max_connections: args.max_connections,
        idle_timeout: seconds(args.idle_timeout),
        sync_every: seconds(args.sync_every),
        threads: args.threads,
        memory_limit,
        ..Config::default()
    };
    args.listen.apply(&mut config)?;
    raise_descriptor_limit(args.max_connections);
    use_one_malloc_arena();
    let db: Arc<dyn Dbm> = Arc::from(open(args.path.as_ref(), params, memory_limit)?);
    let class = db.inspect()?.into_iter().find(|(n, _)| n == "class").map(|(_, v)| v).unwrap_or_default();
    let shown = args.path.as_ref().map_or_else(|| "memory".to_string(), |p| p.display().to_string());
    kura_server::run_until_signal(config, db, |address| {
        // One line a script can wait for (the port matters with --port 0). A stdout that
        // cannot take it does not stop the server: the line is for whoever watches.
        let _ = print_line(format_args!("kura serve: listening on {address} ({class}, {shown})"));
    })?;
    let _ = print_line("kura serve: stopped, database closed");
    Ok(())
}

/// Makes glibc's malloc keep one arena instead of one per thread that allocates, before the
/// worker threads start. A served in-memory database is allocated by whichever worker
/// handles a write, and with an arena per worker the blocks one frees are reused only by
/// that worker: RSS after the same million sets to a CompactDbm varied from 128 to 157 MB
/// from run to run, and is 128.5 MB every time with one arena. Throughput of the 90/10 mix
/// was the same within noise both ways (docs/server.md, "Memory per item"); small blocks
/// come from each thread's cache without taking the arena's lock.
fn use_one_malloc_arena() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes a malloc setting; M_ARENA_MAX takes any positive count.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 1);
    }
}

/// Descriptors kept beyond one per connection: the listener, the database's files, stdio.
const SPARE_DESCRIPTORS: u64 = 64;

/// Raises the soft RLIMIT_NOFILE towards `max_connections` plus spare descriptors, as far as
/// the hard limit allows (memcached does the same for its -c): with the usual soft limit of
/// 1,024, the default 1,024 connections would otherwise run out of descriptors first.
/// Best effort: if the limit cannot be raised, `accept` failures are waited out and the
/// server keeps serving the connections it has.
fn raise_descriptor_limit(max_connections: usize) {
    let wanted = (max_connections as u64).saturating_add(SPARE_DESCRIPTORS);
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit writes into the rlimit we own; RLIMIT_NOFILE is a valid resource.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 || limit.rlim_cur >= wanted {
        return;
    }
    let raised = libc::rlimit { rlim_cur: wanted.min(limit.rlim_max), rlim_max: limit.rlim_max };
    // SAFETY: setrlimit reads the rlimit we own; a soft limit up to the hard one is allowed.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } != 0 {
        eprintln!("kura serve: could not raise the descriptor limit to {wanted}");
    }
}

/// Opens the served database: the path's, or an in-memory one; memory-bounded engines get
/// the memory limit unless the parameters give their own.
fn open(path: Option<&PathBuf>, params: &Params, memory_limit: u64) -> kura::Result<Box<dyn Dbm>> {
    let empty = PathBuf::new();
    let path = path.unwrap_or(&empty);
    let engine = if path.as_os_str().is_empty() {
        kura::registry::engine(params.get("engine").unwrap_or(DEFAULT_ENGINE))?
    } else {
        kura::registry::resolve(path, params)?
    };
    let mut params = params.without("engine");
    if engine.params.contains(&"cap_mem_bytes") {
        let defaults = Params::new()
            .with("cap_mem_bytes", memory_limit)
            .with("cap_rec_num", (memory_limit / BYTES_PER_RECORD_CAP).max(1));
        params = params.or_defaults(&defaults);
    } else if engine.storage == kura::Storage::Memory {
        // A memcached user expects the limit to bound the server: say once that it does not.
        eprintln!(
            "kura serve: the {} engine evicts nothing: it grows with its records, and \
             --memory-limit (which stats limit_maxbytes shows) does not bound it",
            engine.name
        );
    }
    if path.as_os_str().is_empty() {
        engine.open(path, OpenMode::Create, &params)
    } else {
        super::open(path, OpenMode::Create, &params.with("engine", engine.name))
    }
}
