//! `kura serve`: a memcached-protocol server over a database (crate `kura-server`).
//!
//! With a path, the engine comes from its extension or `engine=` as everywhere else; with
//! none, an in-memory engine (SegCacheDbm unless `engine=` says otherwise) bounded by
//! `--memory-limit`. An engine that takes `cap_mem_bytes` gets the memory limit, and a
//! record cap sized from it, unless `--params` gives them; an in-memory engine that has no
//! such cap (TinyDbm, CompactDbm) is not bounded, and the server says so when it starts.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use std::net::IpAddr;

use clap::{ArgAction, Args};
use kura::{Dbm, OpenMode, Params};
use kura_server::Config;

use super::print_line;
use super::serve_options::{apply_extended, check_sizes, parse_size};

/// Bytes per record assumed when sizing a record cap from a memory limit: memcached's
/// smallest slab chunk (96 bytes) bounds its item count the same way. The caches' indexes
/// (SegCacheDbm's, CacheDbm's bucket arrays) grow with the records, so the cap costs no
/// memory up front.
const BYTES_PER_RECORD_CAP: u64 = 96;

/// The flags are memcached's where memcached has one (`-p -l -U -s -a -m -c -t -I -M -C -v
/// -P -Y -Z -o`), meaning what memcached means by them, beside the long names.
#[derive(Args, Debug)]
pub struct ServeArgs {
    /// Database file to serve (engine by extension or engine=); none: an in-memory cache.
    path: Option<PathBuf>,
    /// Address to listen on (memcached's -l).
    #[arg(short = 'l', long, visible_alias = "listen", default_value = "127.0.0.1")]
    host: String,
    /// TCP port (0: any free port, printed when listening).
    #[arg(short = 'p', long, default_value_t = 11211)]
    port: u16,
    /// UDP port: 0 only (kura serve has no UDP; memcached 1.6 turns it off by default too).
    #[arg(short = 'U', long, value_name = "PORT", default_value_t = 0)]
    udp_port: u16,
    /// Memory bound of an in-memory engine: a bare number counts megabytes (memcached's -m);
    /// K M G T or KiB MiB GiB TiB (powers of 1024). At least 1 MiB.
    #[arg(short = 'm', long, value_name = "SIZE", default_value = "64")]
    memory_limit: String,
    /// Largest value a client may store (the value alone, not the key), memcached's -I: bytes
    /// when bare, or k/m (and K M G, KiB MiB GiB). 1 KiB to 1 GiB.
    #[arg(short = 'I', long, value_name = "SIZE", default_value = "1m")]
    max_item_size: String,
    /// Connections served at once; more are told `ERROR Too many open connections`.
    #[arg(short = 'c', long, visible_alias = "conn-limit", value_name = "N", default_value_t = 1024)]
    max_connections: usize,
    /// Close connections idle for this many seconds (0: never); also -o idle_timeout=N.
    #[arg(long, value_name = "SECONDS", default_value_t = 0)]
    idle_timeout: u64,
    /// Force a served file to the device every this many seconds (0: only at the stop).
    #[arg(long, value_name = "SECONDS", default_value_t = 0)]
    sync_every: u64,
    /// Worker threads (0: one per CPU).
    #[arg(short = 't', long, value_name = "N", default_value_t = 0)]
    threads: usize,
    /// Refuse writes when the cache is full (`SERVER_ERROR out of memory storing object`)
    /// instead of evicting, memcached's -M.
    #[arg(short = 'M', long)]
    disable_evictions: bool,
    /// No CAS: every item's CAS unique is 0 and CAS commands never match, memcached's -C.
    #[arg(short = 'C', long)]
    disable_cas: bool,
    /// Log connection and protocol errors to stderr; -vv also every command, memcached's -v.
    #[arg(short = 'v', long = "verbose", action = ArgAction::Count)]
    verbosity: u8,
    /// Write the process id into this file (removed at a clean stop), memcached's -P.
    #[arg(short = 'P', long, visible_alias = "pidfile", value_name = "FILE")]
    pid_file: Option<PathBuf>,
    /// Clients must authenticate with a `user:password` line of this file (memcached's -Y,
    /// text protocol: the first `set` carries `user password`). Reloaded on SIGHUP.
    #[arg(short = 'Y', long, value_name = "FILE")]
    auth_file: Option<PathBuf>,
    /// memcached's extended options, `key[=value],...`: idle_timeout, maxconns_fast, and with
    /// -Z ssl_chain_cert, ssl_key, ssl_ca_cert, ssl_verify_mode, ssl_min_version.
    #[arg(short = 'o', long = "extended", value_name = "KEY=VALUE,...")]
    extended: Vec<String>,
    /// Unix socket (-s, -a) and TLS (-Z, --tls-*) flags.
    #[command(flatten)]
    listen: super::serve_listen::ListenArgs,
}

fn invalid(message: impl Into<String>) -> kura::Error {
    kura::Error::invalid(message.into())
}

pub fn run(args: &ServeArgs, params: &Params) -> kura::Result<()> {
    let engine = engine_of(args.path.as_ref(), params)?;
    let bounded = engine.params.contains(&"cap_mem_bytes");
    let memory_limit =
        parse_size(&args.memory_limit, 1 << 20).map_err(|e| invalid(format!("--memory-limit (-m): {e}")))?;
    let max_item_size =
        parse_size(&args.max_item_size, 1).map_err(|e| invalid(format!("--max-item-size (-I): {e}")))?;
    check_sizes(memory_limit, max_item_size, bounded).map_err(invalid)?;
    if args.udp_port != 0 {
        return Err(invalid("-U: kura serve has no UDP; only -U 0 is taken (memcached 1.6's default)"));
    }
    let seconds = |s: u64| (s > 0).then(|| Duration::from_secs(s));
    let mut config = Config {
        host: args.host.clone(),
        port: args.port,
        max_item_size: usize::try_from(max_item_size).map_err(|_| invalid("--max-item-size is too large"))?,
        max_connections: args.max_connections,
        idle_timeout: seconds(args.idle_timeout),
        sync_every: seconds(args.sync_every),
        threads: args.threads,
        memory_limit,
        evictions: !args.disable_evictions,
        cas_enabled: !args.disable_cas,
        verbosity: args.verbosity,
        auth_file: args.auth_file.clone(),
        ..Config::default()
    };
    let tls = apply_extended(&mut config, &args.extended).map_err(invalid)?;
    args.listen.apply(&mut config, tls)?;
    let mut params = params.clone();
    if args.disable_evictions && engine.params.contains(&"policy") {
        match params.get("policy") {
            None | Some("noevict") => params = params.with("policy", "noevict"),
            Some(other) => return Err(invalid(format!("-M (no eviction) and policy={other} contradict each other"))),
        }
    }
    // A unix socket is reached through its file's mode (-a), not over the network.
    if config.unix_socket.is_none() && config.unprotected() && !is_loopback(&config.host) {
        eprintln!(
            "kura serve: warning: listening on {} with neither authentication (-Y) nor TLS (-Z): \
             anyone who can reach it reads and writes every item",
            config.host
        );
    }
    raise_descriptor_limit(args.max_connections);
    use_one_malloc_arena();
    let db: Arc<dyn Dbm> = Arc::from(open(args.path.as_ref(), engine, &params, memory_limit)?);
    let class = db.inspect()?.class;
    let shown = args.path.as_ref().map_or_else(|| "memory".to_string(), |p| p.display().to_string());
    let limit = if bounded {
        let cap = params.get_u64("cap_mem_bytes")?.unwrap_or(memory_limit);
        format!("memory limit {}", human_size(cap))
    } else {
        "no memory limit".to_string()
    };
    let on_off = |on: bool| if on { "on" } else { "off" };
    let described = format!(
        "{class}, {shown}, {limit}, TLS {}, authentication {}",
        on_off(config.tls_enabled()),
        on_off(config.auth_file.is_some())
    );
    let pid_file = args.pid_file.as_ref().map(PidFile::write).transpose()?;
    kura_server::run_until_signal(config, db, |address| {
        // One line a script can wait for (the port matters with --port 0). A stdout that
        // cannot take it does not stop the server: the line is for whoever watches.
        let _ = print_line(format_args!("kura serve: listening on {address} ({described})"));
    })?;
    drop(pid_file);
    let _ = print_line("kura serve: stopped, database closed");
    Ok(())
}

/// Whether `host` can be reached from this machine only.
fn is_loopback(host: &str) -> bool {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    bare.eq_ignore_ascii_case("localhost") || bare.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// `bytes` in the largest binary unit that divides it (`64 MiB`, `1536 KiB`).
fn human_size(bytes: u64) -> String {
    let units = [(40, "TiB"), (30, "GiB"), (20, "MiB"), (10, "KiB")];
    units
        .iter()
        .find(|(shift, _)| bytes >= 1 << shift && bytes.is_multiple_of(1 << shift))
        .map_or_else(|| format!("{bytes} bytes"), |(shift, unit)| format!("{} {unit}", bytes >> shift))
}

/// The `-P` file: holds the process id while the server runs, removed when it stops cleanly
/// (memcached leaves it behind; a stale pid file misleads whoever reads it next).
struct PidFile(PathBuf);

impl PidFile {
    fn write(path: &PathBuf) -> kura::Result<PidFile> {
        std::fs::write(path, format!("{}\n", std::process::id()))
            .map_err(|e| kura::Error::io(format!("-P: writing the pid file {}", path.display()), e))?;
        Ok(PidFile(path.clone()))
    }
}

impl Drop for PidFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Makes glibc's malloc keep one arena instead of one per thread that allocates, before the
/// worker threads start. A served in-memory database is allocated by whichever worker
/// handles a write, and with an arena per worker the blocks one frees are reused only by
/// that worker: RSS after the same million sets to a CompactDbm varied from 128 to 157 MB
/// from run to run, and is 128.5 MB every time with one arena. Throughput of the 90/10 mix
/// was the same within noise both ways (docs/server.md, "Memory per item"); small blocks
/// come from each thread's cache without taking the arena's lock.
///
/// The mmap threshold stays glibc's dynamic one. Fixed at 128 KiB it kept CompactDbm's
/// growing arenas out of the heap (a served compact map 143-147 MB after a million sets
/// instead of 161-169 MB), but every block of 128 KiB or more then became an `mmap` of fresh
/// pages: the 90/10 mix of 64 KiB values ran 13% slower and of 256 KiB values 23% slower
/// (docs/server.md, "The mmap threshold stays dynamic").
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

/// The engine that will serve `path` (or the in-memory default), as `open` resolves it.
fn engine_of(path: Option<&PathBuf>, params: &Params) -> kura::Result<&'static kura::Engine> {
    match path {
        Some(path) => kura::registry::resolve(path, params),
        None => match params.get("engine") {
            Some(name) => kura::registry::engine(name),
            None => kura::registry::served_by_default(),
        },
    }
}

/// Opens the served database: the path's, or an in-memory one; memory-bounded engines get
/// the memory limit unless the parameters give their own.
fn open(
    path: Option<&PathBuf>,
    engine: &kura::Engine,
    params: &Params,
    memory_limit: u64,
) -> kura::Result<Box<dyn Dbm>> {
    let empty = PathBuf::new();
    let path = path.unwrap_or(&empty);
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
