//! The state every connection of a server shares (the store, the configuration, the
//! connection counters, authentication), with what acts on all of it: `flush_all` and its
//! timers, and the `stats` groups. Its own module so that the listener and the connections,
//! which the server starts, take it without importing the server.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kura::{Dbm, Result};

use crate::auth::Authenticator;
use crate::clock;
use crate::config::Config;
use crate::failure;
use crate::monitoring;
use crate::protocol::reply;
use crate::protocol::text::StatsGroup;
use crate::stats::Connections;
use crate::store::Store;

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
        first_cas: u64,
    ) -> Arc<Shared> {
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
                let stats = db.inspect().ok();
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
                line("evictions", &stats.as_ref().and_then(|s| s.caps).map_or(0, |caps| caps.evictions));
                line("engine", &stats.as_ref().map_or("?", |s| s.class));
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
                crate::unix_socket::settings(self.config.unix_socket.as_ref(), &mut line);
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
