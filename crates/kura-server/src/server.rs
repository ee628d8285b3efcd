//! The listening side: accepting connections under the connection limit, the state all
//! connections share, `flush_all` timers, `stats`, and the clean stop (stop accepting,
//! let every connection finish what it has received, synchronize and close the database).

use std::fmt::Write as _;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kura::{Dbm, Error, Result};
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::auth::Authenticator;
use crate::clock;
use crate::config::Config;
use crate::failure;
use crate::listener::{Accepted, Address, Listener};
use crate::monitoring;
use crate::protocol::reply;
use crate::protocol::text::StatsGroup;
use crate::stats::{bump, Connections};
use crate::store::Store;

/// How long a stopping server waits for its connections to finish what they received.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

/// What every connection shares.
pub struct Shared {
    pub store: Store,
    pub config: Config,
    pub connections: Connections,
    /// Some with `-Y`: connections must authenticate first.
    pub auth: Option<Authenticator>,
    started: Instant,
    port: u16,
    threads: usize,
    /// Bumped by every `flush_all`; a delayed flush runs only if no later one came.
    flush_generation: AtomicU64,
}

impl Shared {
    /// The state every connection of a server on `port` shares, over `db`.
    pub(crate) fn new(
        config: Config,
        db: Arc<dyn Dbm>,
        port: u16,
        threads: usize,
        auth: Option<Authenticator>,
    ) -> Arc<Shared> {
        let first_cas = Store::first_cas_for(db.as_ref());
        let mut store = Store::new(db, config.max_item_size, first_cas);
        if !config.cas_enabled {
            store.disable_cas();
        }
        Arc::new(Shared {
            store,
            config,
            connections: Connections::default(),
            auth,
            started: Instant::now(),
            port,
            threads,
            flush_generation: AtomicU64::new(0),
        })
    }

    /// `flush_all [delay]`: now, or after `delay` (memcached's exptime rules, so more than 30
    /// days is an absolute time). A later `flush_all` replaces a pending one.
    pub fn flush_all(self: &Arc<Shared>, delay: i64) -> Result<()> {
        let generation = self.flush_generation.fetch_add(1, Ordering::SeqCst) + 1;
        let now = clock::now();
        let seconds = match clock::expiry_of(delay, now) {
            clock::NEVER | clock::EXPIRED => 0,
            at => u64::from(at).saturating_sub(now),
        };
        if seconds == 0 {
            return self.store.flush();
        }
        let shared = Arc::clone(self);
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(seconds)).await;
            if shared.flush_generation.load(Ordering::SeqCst) == generation {
                if let Err(e) = shared.store.flush() {
                    failure::background(&shared.store.counters, "a delayed flush_all", &e);
                }
            }
        });
        Ok(())
    }

    /// The text of `stats` or one of its groups, `END` included.
    pub fn stats(&self, group: StatsGroup) -> String {
        let mut text = String::new();
        let mut line = |name: &str, value: &dyn std::fmt::Display| {
            let _ = write!(text, "STAT {name} {value}\r\n");
        };
        match group {
            StatsGroup::General => {
                let db = self.store.db();
                let properties = db.inspect().unwrap_or_default();
                let property = |name: &str| {
                    properties.iter().find(|(n, _)| n == name).map_or(0, |(_, v)| v.parse::<u64>().unwrap_or(0))
                };
                line("pid", &std::process::id());
                line("uptime", &self.started.elapsed().as_secs());
                line("time", &clock::now());
                line("version", &reply::VERSION);
                line("pointer_size", &(usize::BITS));
                line("max_connections", &self.config.max_connections);
                line("curr_connections", &self.connections.current.load(Ordering::Relaxed));
                line("total_connections", &self.connections.total.load(Ordering::Relaxed));
                line("rejected_connections", &self.connections.rejected.load(Ordering::Relaxed));
                for (name, value) in self.store.counters.values() {
                    line(name, &value);
                }
                line("limit_maxbytes", &self.config.memory_limit);
                line("threads", &self.threads);
                line("bytes", &db.file_size().unwrap_or(0));
                line("curr_items", &db.count().unwrap_or(0));
                line("evictions", &property("evictions"));
                line("engine", &properties.iter().find(|(n, _)| n == "class").map_or("?", |(_, v)| v.as_str()));
            }
            StatsGroup::Settings => {
                line("maxbytes", &self.config.memory_limit);
                line("maxconns", &self.config.max_connections);
                let yes_no = |yes: bool| if yes { "yes" } else { "no" };
                line("tcpport", &self.port);
                line("udpport", &0);
                line("inter", &self.config.host);
                line("verbosity", &self.config.verbosity);
                line("evictions", &if self.config.evictions { "on" } else { "off" });
                crate::listener::settings(&self.config, &mut line);
                line("num_threads", &self.threads);
                line("cas_enabled", &yes_no(self.config.cas_enabled));
                line("auth_enabled_sasl", &"no");
                // memcached 1.6.18 shows the auth file's path here, or `no`.
                let auth_file = self.config.auth_file.as_ref().map(|path| path.display().to_string());
                line("auth_enabled_ascii", &auth_file.as_deref().unwrap_or("no"));
                line("item_size_max", &self.config.max_item_size);
                line("maxconns_fast", &"yes");
                line("flush_enabled", &"yes");
                line("idle_timeout", &self.config.idle_timeout.map_or(0, |t| t.as_secs()));
                // Kura's own (memcached has no such limits), then memcached's last fields.
                line("max_line", &self.config.max_line);
                line("max_get_line", &self.config.max_get_line);
                crate::tls::settings(self.config.tls.as_ref(), &mut line);
            }
            StatsGroup::Reset => {
                self.store.counters.reset();
                self.connections.total.store(0, Ordering::Relaxed);
                self.connections.rejected.store(0, Ordering::Relaxed);
                return String::from_utf8_lossy(reply::RESET).into_owned();
            }
            StatsGroup::Items => monitoring::items(self.store.db().as_ref(), &self.store.counters, &mut text),
            StatsGroup::Slabs => monitoring::slabs(self.store.db().as_ref(), &self.store.counters, &mut text),
            StatsGroup::Sizes => monitoring::sizes(&mut text),
            StatsGroup::Empty => {}
        }
        text.push_str("END\r\n");
        text
    }
}

/// A bound server, not yet accepting.
pub struct Server {
    listener: Listener,
    shared: Arc<Shared>,
}

impl Server {
    /// Binds `config.host:config.port` (or `config.unix_socket`) over `db`. Must run inside
    /// a tokio runtime.
    pub async fn bind(config: Config, db: Arc<dyn Dbm>, threads: usize) -> Result<Server> {
        // The auth file first: a bad one stops the start before a socket file is made.
        let auth = config.auth_file.as_deref().map(Authenticator::open).transpose()?;
        let listener = Listener::bind(&config).await?;
        let port = match listener.address()? {
            Address::Tcp(address) => address.port(),
            Address::Unix(_) => 0,
        };
        let shared = Shared::new(config, db, port, threads, auth);
        Ok(Server { listener, shared })
    }

    /// The TCP address listened on (an error for a unix socket: see `address`).
    pub fn local_addr(&self) -> Result<SocketAddr> {
        match self.listener.address()? {
            Address::Tcp(address) => Ok(address),
            Address::Unix(path) => Err(Error::invalid(format!("listening on the unix socket {}", path.display()))),
        }
    }

    /// Where the server listens: a TCP address or a unix socket's path.
    pub fn address(&self) -> Result<Address> {
        self.listener.address()
    }

    /// Accepts connections until `stop` completes; then stops accepting, lets every
    /// connection carry out what it has received, synchronizes and closes the database.
    pub async fn run(self, stop: impl Future<Output = ()>) -> Result<()> {
        let Server { listener, shared } = self;
        let (stopping_sender, stopping) = watch::channel(false);
        let mut tasks = JoinSet::new();
        if let Some(period) = shared.config.sync_every {
            let shared = Arc::clone(&shared);
            let mut stopping = stopping.clone();
            tasks.spawn(async move {
                let mut ticks = tokio::time::interval(period);
                ticks.tick().await;
                loop {
                    tokio::select! {
                        _ = ticks.tick() => {
                            let db = Arc::clone(shared.store.db());
                            match tokio::task::spawn_blocking(move || db.synchronize(true)).await {
                                Ok(Ok(())) => {}
                                Ok(Err(e)) => failure::background(&shared.store.counters, "the periodic sync", &e),
                                Err(e) => eprintln!("kura serve: the periodic sync did not finish: {e}"),
                            }
                        }
                        _ = stopping.changed() => return,
                    }
                }
            });
        }
        if shared.auth.is_some() {
            tasks.spawn(reload_auth_on_hangup(Arc::clone(&shared), stopping.clone()));
        }
        tokio::pin!(stop);
        loop {
            tokio::select! {
                () = &mut stop => break,
                Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
                accepted = listener.accept() => match accepted {
                    Ok(accepted) => admit(accepted, &shared, &stopping, &mut tasks),
                    // Out of descriptors or a connection reset before accept: wait a little
                    // rather than spin, and keep serving the others.
                    Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
                },
            }
        }
        drop(listener);
        let _ = stopping_sender.send(true);
        let drained = tokio::time::timeout(DRAIN_TIMEOUT, async { while tasks.join_next().await.is_some() {} }).await;
        if drained.is_err() {
            tasks.abort_all();
        }
        let db = Arc::clone(shared.store.db());
        tokio::task::spawn_blocking(move || {
            db.synchronize(false)?;
            db.close()
        })
        .await
        .map_err(|e| Error::infeasible(format!("closing the database: {e}")))?
    }
}

/// Reads the auth file again on each SIGHUP, as memcached does; a file that no longer reads
/// leaves the users loaded before, and says so on stderr (memcached says nothing).
async fn reload_auth_on_hangup(shared: Arc<Shared>, mut stopping: watch::Receiver<bool>) {
    use tokio::signal::unix::{signal, SignalKind};
    let Some(auth) = &shared.auth else { return };
    let mut hangups = match signal(SignalKind::hangup()) {
        Ok(hangups) => hangups,
        Err(e) => {
            eprintln!("kura serve: no SIGHUP handler, the auth file will not be reloaded: {e}");
            return;
        }
    };
    loop {
        tokio::select! {
            _ = hangups.recv() => match auth.reload() {
                Ok(users) => eprintln!("kura serve: SIGHUP: reloaded {} ({users} users)", auth.path().display()),
                Err(e) => eprintln!("kura serve: SIGHUP: kept the users loaded before: {e}"),
            },
            _ = stopping.changed() => return,
        }
    }
}

/// Starts serving a new connection, or tells it the server is full and closes it.
/// A TLS connection is admitted before its handshake, so handshakes count against the limit.
fn admit(accepted: Accepted, shared: &Arc<Shared>, stopping: &watch::Receiver<bool>, tasks: &mut JoinSet<()>) {
    let connections = &shared.connections;
    if connections.current.load(Ordering::Relaxed) >= shared.config.max_connections as u64 {
        bump(&connections.rejected);
        if shared.config.verbosity > 0 {
            eprintln!("kura serve: too many open connections ({}), one refused", shared.config.max_connections);
        }
        accepted.refuse();
        return;
    }
    bump(&connections.current);
    bump(&connections.total);
    let shared = Arc::clone(shared);
    let stopping = stopping.clone();
    tasks.spawn(async move {
        accepted.serve(Arc::clone(&shared), stopping).await;
        shared.connections.current.fetch_sub(1, Ordering::Relaxed);
    });
}

/// Runs a server on a new runtime until SIGTERM or SIGINT; `ready` is told the address once
/// it listens (the CLI prints it).
pub fn run_until_signal(config: Config, db: Arc<dyn Dbm>, ready: impl FnOnce(Address)) -> Result<()> {
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if config.threads > 0 {
        builder.worker_threads(config.threads);
    }
    let runtime = builder.enable_all().build().map_err(|e| Error::io("starting the runtime", e))?;
    let threads = if config.threads > 0 {
        config.threads
    } else {
        std::thread::available_parallelism().map_or(1, std::num::NonZero::get)
    };
    runtime.block_on(async move {
        use tokio::signal::unix::{signal, SignalKind};
        let mut terminate = signal(SignalKind::terminate()).map_err(|e| Error::io("SIGTERM handler", e))?;
        let mut interrupt = signal(SignalKind::interrupt()).map_err(|e| Error::io("SIGINT handler", e))?;
        let server = Server::bind(config, db, threads).await?;
        ready(server.address()?);
        server
            .run(async move {
                tokio::select! {
                    _ = terminate.recv() => {}
                    _ = interrupt.recv() => {}
                }
            })
            .await
    })
}
