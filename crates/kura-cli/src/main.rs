//! `kura`: the command-line tool for Kura databases.
//!
//! Every subcommand works through `kura::open` and the `Dbm` trait, so it serves every engine;
//! the engine is chosen by the file extension or an `engine=NAME` parameter. This file holds
//! the argument grammar and the dispatch; each group of subcommands lives in `commands/`, and
//! the benchmark in `bench/`.

mod bench;
mod commands;
mod exit;
mod options;
mod progress;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, CommandFactory, Parser, Subcommand};

const EXIT_CODES: &str = "\
Exit status:
  0  success
  1  not found: the key or the database file is missing (or, for `set --no-overwrite` and
     `create`, the record or file already exists)
  2  usage: bad arguments, unknown codec or parameter
  3  any other error (locked by another process, broken data, I/O, ...)";

/// Kura key-value databases from the command line.
#[derive(Parser, Debug)]
#[command(name = "kura", version, about, after_help = EXIT_CODES)]
struct Cli {
    /// Engine parameters as name=value pairs separated by commas, e.g.
    /// `engine=hash,num_buckets=1M,record_comp=zstd`.
    #[arg(long, global = true, value_name = "K=V,...")]
    params: Option<String>,

    #[command(subcommand)]
    command: Command,
}

/// Options that shape a new or rebuilt database.
#[derive(Args, Debug, Clone, Default)]
struct LayoutArgs {
    #[arg(long, value_name = "CODEC", help = codec_help())]
    record_comp: Option<String>,
    /// Number of hash buckets (suffixes K, M, G allowed).
    #[arg(long, value_name = "N")]
    buckets: Option<String>,
}

/// The `--record-comp` help, listing the codecs of the registry.
fn codec_help() -> String {
    format!("Record compression: {}.", kura::codec::names().collect::<Vec<_>>().join(" "))
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Creates an empty database.
    Create {
        /// The database file (engine by extension, each engine's as `kura engines` lists it, or
        /// --params engine=NAME); a shard set by its base name.
        path: PathBuf,
        #[command(flatten)]
        layout: LayoutArgs,
        /// Replace the database if one exists (its file, or every file of a shard set);
        /// without it, an existing database is left as it is and the exit status is 1.
        #[arg(long, visible_alias = "truncate")]
        force: bool,
    },
    /// Stores a record, creating the database if it is missing (as `import` and `serve` do;
    /// the commands that only read or remove need it to exist).
    Set {
        /// The database file (engine by extension, each engine's as `kura engines` lists it, or
        /// --params engine=NAME); a shard set by its base name.
        path: PathBuf,
        /// The record's key.
        key: String,
        /// The record's value (replaces the old one unless --no-overwrite).
        value: String,
        /// Fail (exit 1) if the key already has a record.
        #[arg(long)]
        no_overwrite: bool,
    },
    /// Prints the value of each key followed by a newline, one line per key in the order
    /// given (an empty line for a key with no record), looked up as one batch; every missing
    /// key is named on stderr, and the exit status is 1 when any key was missing.
    Get {
        /// The database file (engine by extension, each engine's as `kura engines` lists it, or
        /// --params engine=NAME); a shard set by its base name.
        path: PathBuf,
        /// The keys to look up; line i of the output is the value of the i-th.
        #[arg(required = true, num_args = 1..)]
        keys: Vec<String>,
    },
    /// Removes a record; exit 1 when missing.
    Remove {
        /// The database file (engine by extension, each engine's as `kura engines` lists it, or
        /// --params engine=NAME); a shard set by its base name.
        path: PathBuf,
        /// The key whose record is removed.
        key: String,
    },
    /// Prints records as TSV (key<TAB>value), in the engine's order. A range runs from
    /// --from (included) to --to (excluded, as in Python's and Rust's ranges; --inclusive
    /// includes it).
    List {
        /// The database file (engine by extension, each engine's as `kura engines` lists it, or
        /// --params engine=NAME); a shard set by its base name.
        path: PathBuf,
        /// Print keys only.
        #[arg(long)]
        keys: bool,
        /// Start at this key (ordered engines only).
        #[arg(long, value_name = "KEY")]
        from: Option<String>,
        /// Stop before this key (ordered engines only; with --inclusive, after it).
        #[arg(long, value_name = "KEY")]
        to: Option<String>,
        /// Include the --to key itself.
        #[arg(long, requires = "to")]
        inclusive: bool,
        /// Descending order (ordered engines only).
        #[arg(long)]
        reverse: bool,
        /// Print at most N records.
        #[arg(long, value_name = "N")]
        limit: Option<u64>,
        /// Escape both fields (\t \n \r \\ \xHH) so that any record fits one line; without
        /// it, a record plain TSV cannot hold stops the listing, as `export` does.
        #[arg(long)]
        escape: bool,
    },
    /// Loads a TSV (key<TAB>value) or JSON-lines ({"key": ..., "value": ...}) file, or stdin
    /// when FILE is `-` or absent, creating the database if missing; with --shards N, into a
    /// shard set written in parallel.
    Import {
        /// The database to load into, created if missing (with --shards N, the base name of
        /// the shard set).
        path: PathBuf,
        /// The input file; `-` or none: standard input.
        file: Option<PathBuf>,
        #[command(flatten)]
        layout: LayoutArgs,
        /// Parser threads, and writers of a single database (default: the number of CPUs, at most 8).
        #[arg(long, value_name = "N")]
        threads: Option<usize>,
        /// Split the records over N shard files PATH-0000i-of-0000N, one writer each.
        #[arg(long, value_name = "N")]
        shards: Option<usize>,
        /// Records per write batch (default 16384).
        #[arg(long, value_name = "N")]
        batch: Option<usize>,
        /// Input format: tsv, tsv-escaped or jsonl (default: jsonl for .jsonl/.ndjson/.json
        /// files, else tsv, also for stdin).
        #[arg(long, value_name = "FORMAT")]
        format: Option<String>,
        /// The input is what `kura export --escape` writes: the same as --format tsv-escaped.
        #[arg(long)]
        escape: bool,
        /// Skip and count malformed lines instead of stopping at the first one.
        #[arg(long)]
        skip_bad: bool,
    },
    /// Writes every record as TSV to FILE, or to stdout when FILE is `-` or absent. A record plain TSV cannot hold (a key
    /// with a tab or a line break, a value with a line break) stops it unless --escape is given.
    Export {
        /// The database file (engine by extension, each engine's as `kura engines` lists it, or
        /// --params engine=NAME); a shard set by its base name.
        path: PathBuf,
        /// The output file (replaced if it exists, unless it is a database); `-` or none:
        /// standard output.
        file: Option<PathBuf>,
        /// Escape both fields (\t \n \r \\ \xHH) so that any record fits; import with --escape.
        #[arg(long)]
        escape: bool,
    },
    /// Rewrites the database compactly, optionally with another codec or bucket count.
    Rebuild {
        /// The database file (engine by extension, each engine's as `kura engines` lists it, or
        /// --params engine=NAME); a shard set by its base name.
        path: PathBuf,
        #[command(flatten)]
        layout: LayoutArgs,
    },
    /// Salvages every intact record of a (possibly damaged) database into a new file.
    Restore {
        /// The damaged database.
        path: PathBuf,
        /// Where the intact records go: a new database, which must not exist.
        new_path: PathBuf,
    },
    /// Prints the database's properties, one name=value per line. Cheap: it reads the
    /// header only, so `healthy` is the clean-close flag (false after a crash, until a writer
    /// restores the file), not a verdict on the data; `kura check` reads every record.
    Inspect {
        /// The database file (engine by extension, each engine's as `kura engines` lists it, or
        /// --params engine=NAME); a shard set by its base name.
        path: PathBuf,
    },
    /// Reads every record (and page) and verifies every checksum and the structure: chains
    /// and counts (hash), key order and counts (tree), the snapshot (memory engines). Prints
    /// `checked records=N problems=M` and the first problems; exit 0 only when clean, else 3
    /// with a hint: `kura restore PATH NEW_PATH` copies every intact record into a new file.
    Check {
        /// The database file (engine by extension, each engine's as `kura engines` lists it, or
        /// --params engine=NAME); a shard set by its base name.
        path: PathBuf,
    },
    /// Measures throughput, like `tkrzw_dbm_perf sequence`.
    Bench(bench::BenchArgs),
    /// Serves a database over memcached's text protocol until SIGTERM or SIGINT.
    Serve(commands::serve::ServeArgs),
    /// Lists the engines: name, extension, file or memory, ordered or not, what it is.
    Engines {
        /// One JSON object per engine (with its parameters), for tools.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        no_params: NoParams,
    },
    /// Lists the record codecs: name, file header id, what it is.
    Codecs {
        /// One JSON object per codec, for tools.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        no_params: NoParams,
    },
    /// Prints a shell completion script: `source <(kura completions bash)`, or save it where
    /// the shell looks (see README, Install).
    Completions {
        /// The shell: bash, zsh, fish, elvish or powershell.
        shell: clap_complete::Shell,
        #[command(flatten)]
        no_params: NoParams,
    },
    /// Writes the manual pages, kura.1 and kura-COMMAND.1 for every subcommand, into DIR
    /// (`make man` writes them into target/man; `man -l target/man/kura.1` reads one).
    Man {
        /// The directory to write the pages into (created if missing), e.g.
        /// /usr/local/share/man/man1.
        dir: PathBuf,
        #[command(flatten)]
        no_params: NoParams,
    },
}

/// For the subcommands that open no database: `--params` would do nothing there, so it is
/// neither shown nor accepted. Declared under the same name as the global option, which
/// clap then does not add to these subcommands; hidden, and refused when given (`run`).
#[derive(Args, Debug, Clone, Default)]
struct NoParams {
    #[arg(long = "params", id = "params", hide = true, value_name = "K=V,...")]
    given: Option<String>,
}

impl NoParams {
    /// Refuses `--params` before or after the subcommand's name.
    fn check(&self, global: Option<&str>, command: &str) -> kura::Result<()> {
        match self.given.as_deref().or(global) {
            Some(_) => Err(kura::Error::invalid(format!("`kura {command}` opens no database and takes no --params"))),
            None => Ok(()),
        }
    }
}

fn main() -> ExitCode {
    restore_default_sigpipe();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // clap prints help and version to stdout with success, usage errors to stderr; a
            // help that could not be written is no success.
            let status = if e.use_stderr() { exit::USAGE } else { exit::SUCCESS };
            return ExitCode::from(if e.print().is_ok() { status } else { exit::OTHER });
        }
    };
    let database = cli.command.database().map(Path::to_path_buf);
    let doing = match cli.command {
        Command::Check { .. } => exit::Doing::Checking,
        Command::Restore { .. } => exit::Doing::Restoring,
        _ => exit::Doing::Using,
    };
    // Whether the damaged database's engine can be restored, from the registry; unknown (a
    // path of no engine) counts as yes, the hint then naming the command that will say.
    let salvageable = database.as_deref().is_none_or(|path| {
        let params = options::plain_params(cli.params.as_deref()).unwrap_or_default();
        kura::registry::resolve(path, &params).map_or(true, |engine| engine.can_restore())
    });
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => exit::report(e, database.as_deref(), doing, salvageable),
    }
}

impl Command {
    /// The database the command reads or writes, if it names one: the file that damage
    /// found while it ran is in.
    fn database(&self) -> Option<&Path> {
        match self {
            Command::Create { path, .. }
            | Command::Set { path, .. }
            | Command::Get { path, .. }
            | Command::Remove { path, .. }
            | Command::List { path, .. }
            | Command::Import { path, .. }
            | Command::Export { path, .. }
            | Command::Rebuild { path, .. }
            | Command::Restore { path, .. }
            | Command::Inspect { path }
            | Command::Check { path } => Some(path),
            Command::Bench(args) => args.path.as_deref(),
            // A server names its file in its own messages and outlives any one error.
            Command::Serve(_)
            | Command::Engines { .. }
            | Command::Codecs { .. }
            | Command::Completions { .. }
            | Command::Man { .. } => None,
        }
    }
}

/// Rust ignores SIGPIPE, so printing to a closed pipe (`kura export db | head`) would panic in
/// `println!`; Unix tools end quietly on SIGPIPE instead, and so does `kura`.
fn restore_default_sigpipe() {
    // SAFETY: runs first thing in `main`, before any other thread exists; restoring a signal's
    // default disposition has no other precondition.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

/// The file a FILE argument names: none for `-` or an absent one, which mean the standard
/// stream.
fn named_file(file: Option<&Path>) -> Option<&Path> {
    file.filter(|file| *file != Path::new("-"))
}

fn run(cli: Cli) -> kura::Result<()> {
    let global = cli.params.as_deref();
    match cli.command {
        Command::Create { path, layout, force } => {
            let params = options::engine_params(&path, global, &layout)?;
            commands::maintenance::create(&path, &params, force)
        }
        Command::Set { path, key, value, no_overwrite } => {
            commands::records::set(&path, &options::plain_params(global)?, &key, &value, no_overwrite)
        }
        Command::Get { path, keys } => commands::records::get(&path, &options::plain_params(global)?, &keys),
        Command::Remove { path, key } => commands::records::remove(&path, &options::plain_params(global)?, &key),
        Command::List { path, keys, from, to, inclusive, reverse, limit, escape } => {
            let listing = commands::records::Listing { keys_only: keys, from, to, inclusive, reverse, limit, escape };
            commands::records::list(&path, &options::plain_params(global)?, &listing)
        }
        Command::Import { path, file, layout, threads, shards, batch, format, escape, skip_bad } => {
            let params = options::engine_params(&path, global, &layout)?;
            let format = match (format.as_deref(), escape) {
                (None | Some("tsv" | "tsv-escaped"), true) => Some(kura::import::Format::EscapedTsv),
                (Some(other), true) => {
                    return Err(kura::Error::invalid(format!("--escape reads escaped TSV, not --format {other}")))
                }
                (name, false) => name.map(kura::import::Format::from_name).transpose()?,
            };
            let options = kura::import::ImportOptions { threads, shards, batch, format, skip_bad };
            commands::import::import(&path, named_file(file.as_deref()), &params, &options)
        }
        Command::Export { path, file, escape } => {
            commands::transfer::export(&path, &options::plain_params(global)?, named_file(file.as_deref()), escape)
        }
        Command::Rebuild { path, layout } => {
            let params = options::engine_params(&path, global, &layout)?;
            commands::maintenance::rebuild(&path, &params)
        }
        Command::Restore { path, new_path } => {
            commands::maintenance::restore(&path, &new_path, &options::plain_params(global)?)
        }
        Command::Inspect { path } => commands::maintenance::inspect(&path, &options::plain_params(global)?),
        Command::Check { path } => commands::check::check(&path, &options::plain_params(global)?),
        Command::Bench(args) => bench::run(&args, &options::plain_params(global)?),
        Command::Serve(args) => commands::serve::run(&args, &options::plain_params(global)?),
        Command::Engines { json, no_params } => {
            no_params.check(global, "engines")?;
            commands::engines::list(json)
        }
        Command::Codecs { json, no_params } => {
            no_params.check(global, "codecs")?;
            commands::engines::codecs(json)
        }
        Command::Completions { shell, no_params } => {
            no_params.check(global, "completions")?;
            commands::docs::completions(Cli::command(), shell)
        }
        Command::Man { dir, no_params } => {
            no_params.check(global, "man")?;
            commands::docs::man_pages(Cli::command(), &dir)
        }
    }
}
