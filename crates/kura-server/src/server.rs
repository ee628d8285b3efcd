//! The listening side: accepting connections under the connection limit (the state they
//! share is `shared.rs`), and the clean stop (stop accepting, let every connection finish
//! what it has received, synchronize and close the database).

use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use kura::{Dbm, Error, Result};
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::auth::Authenticator;
use crate::config::Config;
use crate::failure;
use crate::listener::{Accepted, Address, Listener};
use crate::shared::Shared;
use crate::stats::bump;
use crate::store::Store;

/// How long a stopping server waits for its connections to finish what they received.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

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
        // After the socket: a port already taken stops the start before a pass over the items.
        let first_cas = Store::first_cas_for(db.as_ref()).unwrap_or_else(|(e, highest)| {
            eprintln!(
                "kura serve: warning: the scan for the highest CAS unique among the served items stopped: {}; \
                 CAS uniques start from the clock's seconds instead (run `kura check` on the file)",
                failure::one_line(&e.to_string())
            );
            Store::fallback_cas(highest)
        });
        let shared = Shared::new(config, db, port, threads, auth, first_cas);
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
