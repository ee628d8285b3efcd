//! memcached's commands carried out on a Kura database: each is one atomic `process` (or
//! `get_with`) on the record of its key, deciding from the decoded item (`item.rs`).
//!
//! An expired item is treated as absent everywhere, and removed when a write meets it. Every
//! write hands the item's expiry to the engine too (`Store::update`), so that an engine that
//! knows expiry (SegCacheDbm) hides the item from then on and reclaims its memory first.
//! A stored value this server did not write (wrong format) is also treated as absent.
//!
//! CAS uniques on demand: a write stores a CAS unique only when its reply shows one (`ms c`,
//! `ma c`, `mg N c`) or the version it replaces holds one (`cas_for_write`); a read that
//! shows one (`gets`, `gats`, `mg c`) gives the item its unique then, in one atomic update, so
//! every later read shows the same one until the next write. An item whose unique no client
//! has seen holds 0, which matches no client's CAS: memcached's answers (docs/server.md, "CAS
//! uniques on demand"), for 3 bytes less per item that no client asks the CAS of.

use std::borrow::Cow;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use kura::{Action, Dbm, Expiry, Result};

use crate::clock;
use crate::item::{self, Header};
use crate::protocol::numbers::parse_counter;
use crate::protocol::text::{StoreMode, StoreRequest};
use crate::stats::{add, bump, Counters};

/// What a storage command did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreOutcome {
    Stored,
    NotStored,
    Exists,
    NotFound,
}

/// What `incr`/`decr` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArithmeticOutcome {
    /// The new value, as the reply writes it, and the item's header after the change.
    Value(u64, Header),
    /// `ma N`: the item was missing and is created with this value and header.
    Created(u64, Header),
    NotFound,
    NonNumeric,
    /// `ma C`: the item's CAS is not the one given; nothing changed.
    Exists,
}

/// Whether a command's reply shows the item's CAS unique (`gets`, `gats`, `mg c`, `ms c`,
/// `ma c`): the item gets its unique then if it has none (CAS uniques on demand, above).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CasShown {
    Yes,
    #[default]
    No,
}

impl CasShown {
    pub fn when(shown: bool) -> CasShown {
        if shown {
            CasShown::Yes
        } else {
            CasShown::No
        }
    }
}

/// What an `ma` adds to a plain `incr`/`decr` (all None for those).
#[derive(Debug, Clone, Copy, Default)]
pub struct ArithmeticExtras {
    /// `N`: create a missing item with this exptime and initial value (`J`); the caller
    /// gives the exptime the created item ends with (see `meta_command::arithmetic`).
    pub create: Option<(i64, u64)>,
    /// `C`: change the item only if its CAS is this one (a created item is not compared).
    pub compare: Option<u64>,
    /// `T`: the item's new exptime, once changed.
    pub touch: Option<i64>,
    /// `c`: the reply shows the changed item's CAS unique.
    pub cas_shown: CasShown,
}

/// What a meta get may change (`Store::meta_get`).
#[derive(Debug, Clone, Copy, Default)]
pub struct MetaGetChange {
    /// `T`: the new exptime.
    pub touch: Option<i64>,
    /// `N`: on a miss, create an empty item with this exptime.
    pub vivify: Option<i64>,
    /// `R`: win if the item's remaining time is below this many seconds.
    pub recache: Option<u32>,
}

/// The flags a meta get adds after the ones asked for: `Z`, `X`, `W`, in that order.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Verdict {
    /// `W`: this client won the right to recompute the item.
    pub win: bool,
    /// `Z`: another client already won it.
    pub already_won: bool,
    /// `X`: the item is stale.
    pub stale: bool,
}

/// What a meta get shows its reply writer: the live item and its verdict, or None.
pub type MetaFound<'v> = Option<(Found<'v>, Verdict)>;

/// A live (unexpired) item found for a key.
pub struct Found<'v> {
    pub header: Header,
    pub data: &'v [u8],
}

/// The database, the CAS counter and the statistics every connection shares.
pub struct Store {
    db: Arc<dyn Dbm>,
    next_cas: AtomicU64,
    max_item_size: usize,
    /// False under `-C`: items get CAS 0 and storage commands' CAS never matches.
    cas_enabled: bool,
    pub counters: Counters,
}

/// An item copied aside inside an engine call, shown once the engine has stored the change:
/// a reply never shows what the engine then refused to keep (a client would be sent a value
/// and an error for one request, and a pipelining client would fall out of step).
struct Copied {
    header: Header,
    data: Vec<u8>,
}

impl Copied {
    fn of(header: Header, data: &[u8]) -> Copied {
        Copied { header, data: data.to_vec() }
    }

    fn found(&self) -> Found<'_> {
        Found { header: self.header, data: &self.data }
    }
}

/// The live item in `stored` at `now`, if any.
fn live(stored: Option<&[u8]>, now: u64) -> Option<Found<'_>> {
    let (header, data) = item::decode(stored?).ok()?;
    (!clock::is_expired(header.expiry, now)).then_some(Found { header, data })
}

/// Remove what is there (an expired or foreign record) or leave the absence as it is.
fn clean(old: Option<&[u8]>) -> Action<'static> {
    if old.is_some() {
        Action::Remove
    } else {
        Action::Keep
    }
}

/// The expiry an engine that knows expiry is given for an item's stored `expiry` (0: never).
fn engine_expiry(expiry: u32) -> Option<Expiry> {
    Expiry::at_unix_seconds(u64::from(expiry))
}

impl Store {
    /// Runs `decide` on `key`'s stored item (one atomic `process`); a value it sets carries
    /// the expiry of its own header, so that an engine that knows expiry (SegCacheDbm, `kura
    /// serve`'s default) never returns the item after it and reclaims its segment before it
    /// evicts live items. The header keeps the expiry too: every engine serves it, and a
    /// snapshot keeps it across restarts.
    fn update(&self, key: &[u8], decide: &mut dyn FnMut(Option<&[u8]>) -> Action<'static>) -> Result<()> {
        self.db.process_expiring(key, &mut |old| {
            let action = decide(old);
            let expiry = match &action {
                Action::Set(stored) => item::decode(stored).ok().and_then(|(header, _)| engine_expiry(header.expiry)),
                Action::Keep | Action::Remove => None,
            };
            (action, expiry)
        })
    }

    /// `first_cas` is the first CAS unique handed out: 1 for a new store, above any value a
    /// served file may already hold otherwise (see `Store::first_cas_for`).
    pub fn new(db: Arc<dyn Dbm>, max_item_size: usize, first_cas: u64) -> Store {
        Store {
            db,
            next_cas: AtomicU64::new(first_cas.max(1)),
            max_item_size,
            cas_enabled: true,
            counters: Counters::default(),
        }
    }

    /// memcached's `-C`: every item written from now on has CAS unique 0 (`gets` and `mg c`
    /// show 0), `cas` and `ms` with `C` answer EXISTS/EX on an item, an append's CAS is not
    /// checked, and `md`/`ma` with `C` compare against 0: what memcached 1.6.18 -C answers.
    pub fn disable_cas(&mut self) {
        self.cas_enabled = false;
    }

    /// The first CAS unique for a database that may hold items already: one above the
    /// highest CAS unique among its items, read once at the start (an item in a foreign
    /// format counts as none), so that no CAS unique an earlier run handed out comes back,
    /// however soon the server restarts and however many writes that run made. An empty
    /// database starts at 1, as memcached does. When the scan meets an error (a damaged
    /// record), the error is returned with what the scan saw: see `Store::fallback_cas`.
    pub fn first_cas_for(db: &dyn Dbm) -> std::result::Result<u64, (kura::Error, u64)> {
        let mut highest = 0u64;
        let scanned = (|| -> Result<()> {
            if db.count()? == 0 {
                return Ok(());
            }
            let mut cursor = db.cursor()?;
            let mut more = cursor.first()?;
            while more {
                cursor.record_with(&mut |_, stored| {
                    if let Ok((header, _)) = item::decode(stored) {
                        highest = highest.max(header.cas);
                    }
                })?;
                more = cursor.next()?;
            }
            Ok(())
        })();
        match scanned {
            Ok(()) => Ok(highest.saturating_add(1)),
            Err(e) => Err((e, highest)),
        }
    }

    /// The first CAS unique when the scan of `first_cas_for` failed after seeing `highest`:
    /// above that and above the current second shifted left by 24 bits, which is above what
    /// an earlier run handed out unless it started within the same second or made more than
    /// 16M writes a second since it started.
    pub fn fallback_cas(highest: u64) -> u64 {
        highest.saturating_add(1).max(clock::now() << 24)
    }

    pub fn db(&self) -> &Arc<dyn Dbm> {
        &self.db
    }

    fn take_cas(&self) -> u64 {
        if !self.cas_enabled {
            return 0;
        }
        // 0 is "no CAS unique" to a client (what `-C` shows), so it is never handed out for a
        // write: the counter meets it only by wrapping past u64::MAX, which a served file
        // whose items carry CAS uniques near the top (written by another tool, or damaged in
        // a way that still decodes) makes `first_cas_for` start next to.
        loop {
            let cas = self.next_cas.fetch_add(1, Ordering::Relaxed);
            if cas != 0 {
                return cas;
            }
        }
    }

    /// The CAS unique a new version of an item stores: a new one when the write's reply shows
    /// it (`shown`), or when the version it replaces (`old`, expired or not, as far as the
    /// engine shows it: SegCacheDbm hides expired items) holds one; else
    /// none (0) until a read shows one. Why the second: a client may hold the replaced
    /// version's unique, and a restart starts the counter one above the highest unique stored
    /// (`first_cas_for`); so that no unique ever shown comes back, the uniques shown for a key
    /// stay below one stored in it for as long as the key lives, as when every write took one.
    fn cas_for_write(&self, shown: CasShown, old: Option<&[u8]>) -> u64 {
        let replaces_a_unique =
            old.and_then(|stored| item::decode(stored).ok()).is_some_and(|(header, _)| header.cas != 0);
        if shown == CasShown::Yes || replaces_a_unique {
            self.take_cas()
        } else {
            0
        }
    }

    /// Whether showing `header`'s CAS unique first needs one given to the item.
    fn needs_cas(&self, header: &Header, shown: CasShown) -> bool {
        shown == CasShown::Yes && self.cas_enabled && header.cas == 0
    }

    /// `header` as a reply that may show its CAS unique (`shown`) shows it: with the next
    /// unique if it holds none yet. Called inside the key's engine call, so that clients
    /// asking at once are all shown the one given.
    fn showing_cas(&self, header: Header, shown: CasShown) -> Header {
        if self.needs_cas(&header, shown) {
            Header { cas: self.take_cas(), ..header }
        } else {
            header
        }
    }

    /// Whether the CAS a client gave (`md C`, `md I C`) names the item holding `held`. With
    /// CAS on, an item holds 0 until its unique is first shown, and 0 is no unique a client
    /// was shown: it matches nothing (memcached's items always hold one). Under -C every
    /// item's CAS is 0 to a client, and `md` compares with that, as memcached -C does.
    fn cas_matches(&self, held: u64, given: u64) -> bool {
        held == given && (held != 0 || !self.cas_enabled)
    }

    /// Whether a client's CAS `given` is older than the item's, which holds `held` (`ms I`).
    /// An item holding none yet was written after every unique handed out for its key
    /// before, so a unique handed out is older; one never handed out is not, as it would
    /// not be in memcached, whose item would hold a unique below it.
    fn is_older(&self, given: u64, held: u64) -> bool {
        if held == 0 {
            given < self.next_cas.load(Ordering::Relaxed)
        } else {
            given < held
        }
    }

    /// Carries out a storage command with its data.
    pub fn store(&self, request: &StoreRequest, data: &[u8]) -> Result<StoreOutcome> {
        self.store_with_cas(request, data, CasShown::No).map(|(outcome, _)| outcome)
    }

    /// `store`, also returning the CAS unique of the item when stored: a new one when
    /// `shown` (meta `ms c`), else 0 (none given yet).
    pub fn store_with_cas(&self, request: &StoreRequest, data: &[u8], shown: CasShown) -> Result<(StoreOutcome, u64)> {
        let now = clock::now();
        let expiry = clock::expiry_of(request.exptime, now);
        let fresh = Header { flags: request.flags, expiry, ..Header::default() };
        let max = self.max_item_size;
        // Under -C the request's CAS counts as none, as memcached -C reads it.
        let request_cas = if self.cas_enabled { request.cas } else { 0 };
        let mut outcome = StoreOutcome::NotStored;
        let mut stored_cas = 0;
        self.update(&request.key, &mut |old| {
            let found = live(old, now);
            // The new version, its CAS unique taken only now that it is written, under the
            // key's lock: a unique shown later is above it.
            let mut new_version = |header: Header, parts: &[&[u8]]| {
                let header = Header { cas: self.cas_for_write(shown, old), ..header };
                stored_cas = header.cas;
                (StoreOutcome::Stored, Action::Set(Cow::Owned(item::encode(header, parts))))
            };
            let (result, action) = match (request.mode, found) {
                (StoreMode::Set, _) | (StoreMode::Add, None) | (StoreMode::Replace, Some(_)) => {
                    new_version(fresh, &[data])
                }
                (StoreMode::Add, Some(_)) => (StoreOutcome::NotStored, Action::Keep),
                (StoreMode::Replace | StoreMode::Append | StoreMode::Prepend, None) => {
                    (StoreOutcome::NotStored, clean(old))
                }
                // `ms MA C` / `ms MP C`: memcached's simplified CAS check on append and prepend.
                (StoreMode::Append | StoreMode::Prepend, Some(found))
                    if request_cas != 0 && request_cas != found.header.cas =>
                {
                    (StoreOutcome::Exists, Action::Keep)
                }
                (StoreMode::Append | StoreMode::Prepend, Some(found)) => {
                    if found.data.len().saturating_add(data.len()) > max {
                        // memcached cannot allocate the joined item and answers NOT_STORED.
                        (StoreOutcome::NotStored, Action::Keep)
                    } else {
                        let header =
                            Header { flags: found.header.flags, expiry: found.header.expiry, ..Header::default() };
                        let parts: [&[u8]; 2] =
                            if request.mode == StoreMode::Append { [found.data, data] } else { [data, found.data] };
                        new_version(header, &parts)
                    }
                }
                (StoreMode::Cas, None) => (StoreOutcome::NotFound, clean(old)),
                // A CAS of 0 matches nothing, `ms I` included (memcached 1.6.18: `cas k 0 0 1
                // 0` is EXISTS, `ms k 1 I C0` is EX; under -C every CAS is 0).
                (StoreMode::Cas, Some(_)) if request_cas == 0 => (StoreOutcome::Exists, Action::Keep),
                // `ms I`: a writer holding an older CAS still stores, and the item is stale;
                // it keeps the old item's expiry (as memcached 1.6.18 answers `t` after it).
                (StoreMode::Cas, Some(found)) if request.invalidate && self.is_older(request_cas, found.header.cas) => {
                    // A win token already handed out stays handed out (memcached keeps the
                    // item's token bit), so no second client is told to recompute.
                    let header =
                        Header { stale: true, expiry: found.header.expiry, win_sent: found.header.win_sent, ..fresh };
                    new_version(header, &[data])
                }
                (StoreMode::Cas, Some(found)) if found.header.cas != request_cas => {
                    (StoreOutcome::Exists, Action::Keep)
                }
                (StoreMode::Cas, Some(_)) => new_version(fresh, &[data]),
            };
            outcome = result;
            action
        })?;
        if outcome != StoreOutcome::Stored {
            stored_cas = 0;
        }
        let counters = &self.counters;
        bump(&counters.cmd_set);
        match (request.mode, outcome) {
            (StoreMode::Cas, StoreOutcome::Stored) => bump(&counters.cas_hits),
            (StoreMode::Cas, StoreOutcome::Exists) => bump(&counters.cas_badval),
            (StoreMode::Cas, StoreOutcome::NotFound) => bump(&counters.cas_misses),
            _ => {}
        }
        if outcome == StoreOutcome::Stored {
            bump(&counters.total_items);
        }
        Ok((outcome, stored_cas))
    }

    /// Shows the live item of `key` to `visit` (None when absent or expired), without copying
    /// unless the item needs its CAS unique first (`shown`, CAS uniques on demand).
    pub fn get(&self, key: &[u8], shown: CasShown, visit: &mut dyn FnMut(Option<Found<'_>>)) -> Result<()> {
        let now = clock::now();
        let mut expired = false;
        let mut needs_cas = false;
        self.db.get_with(key, &mut |stored| {
            let found = live(stored, now);
            expired = stored.is_some() && found.is_none();
            match found {
                Some(found) if self.needs_cas(&found.header, shown) => needs_cas = true,
                found => visit(found),
            }
        })?;
        if expired {
            bump(&self.counters.get_expired);
        }
        if needs_cas {
            return self.give_cas(key, now, visit);
        }
        Ok(())
    }

    /// Gives `key`'s live item a CAS unique if it still has none (one atomic update, so that
    /// clients asking at once are all shown the same one) and shows it to `visit` once the
    /// engine has stored it (`Copied`: once per version a client asks the CAS of).
    fn give_cas(&self, key: &[u8], now: u64, visit: &mut dyn FnMut(Option<Found<'_>>)) -> Result<()> {
        let mut shown = None;
        self.update(key, &mut |old| {
            let Some(found) = live(old, now) else {
                shown = None;
                return clean(old);
            };
            let header = self.showing_cas(found.header, CasShown::Yes);
            shown = Some(Copied::of(header, found.data));
            if header == found.header {
                Action::Keep
            } else {
                Action::Set(Cow::Owned(item::encode(header, &[found.data])))
            }
        })?;
        visit(shown.as_ref().map(Copied::found));
        Ok(())
    }

    /// Shows the live item of each of `keys` to `visit(index, item)` (None when absent or
    /// expired), once per key and in any order: the engine's batched lookup, which overlaps
    /// the memory misses of the keys instead of paying them one after the other.
    /// An item that needs its CAS unique first (`shown`) is shown after the others.
    pub fn get_many(
        &self,
        keys: &[&[u8]],
        shown: CasShown,
        visit: &mut dyn FnMut(usize, Option<Found<'_>>),
    ) -> Result<()> {
        let now = clock::now();
        let mut expired = 0u64;
        let mut needs_cas = Vec::new();
        self.db.get_many_with(keys, &mut |index, stored| {
            let found = live(stored, now);
            expired += u64::from(stored.is_some() && found.is_none());
            match found {
                Some(found) if self.needs_cas(&found.header, shown) => needs_cas.push(index),
                found => visit(index, found),
            }
        })?;
        add(&self.counters.get_expired, expired);
        for index in needs_cas {
            let key = keys.get(index).copied().unwrap_or_default();
            self.give_cas(key, now, &mut |found| visit(index, found))?;
        }
        Ok(())
    }

    /// Sets the expiry of `key`'s live item and shows it to `visit` once stored (gat, gats).
    pub fn touch(
        &self,
        key: &[u8],
        exptime: i64,
        shown: CasShown,
        visit: &mut dyn FnMut(Option<Found<'_>>),
    ) -> Result<()> {
        let mut touched = None;
        self.set_expiry(key, exptime, shown, &mut |header, data| touched = Some(Copied::of(header, data)))?;
        visit(touched.as_ref().map(Copied::found));
        Ok(())
    }

    /// `touch`: sets the expiry of `key`'s live item; whether there was one. Nothing is
    /// shown, so nothing is copied.
    pub fn touch_only(&self, key: &[u8], exptime: i64) -> Result<bool> {
        let mut touched = false;
        self.set_expiry(key, exptime, CasShown::No, &mut |_, _| touched = true)?;
        Ok(touched)
    }

    /// Sets the expiry of `key`'s live item (giving it a CAS unique if `shown` needs one),
    /// showing `seen` the changed item inside the engine call: the caller may use it only
    /// once this returns Ok.
    fn set_expiry(&self, key: &[u8], exptime: i64, shown: CasShown, seen: &mut dyn FnMut(Header, &[u8])) -> Result<()> {
        let now = clock::now();
        let expiry = clock::expiry_of(exptime, now);
        self.update(key, &mut |old| match live(old, now) {
            Some(found) => {
                let header = self.showing_cas(Header { expiry, ..found.header }, shown);
                seen(header, found.data);
                Action::Set(Cow::Owned(item::encode(header, &[found.data])))
            }
            None => clean(old),
        })
    }

    /// A meta get that may change the item (`mg` with `N`, `R` or `T`, or on a stale item):
    /// `touch` sets the expiry; on a miss, `vivify` (an exptime) creates an empty item and
    /// wins; `recache` (seconds) wins if the item expires sooner than that. A stale item
    /// wins too. A win is handed out once per item: later gets see `Z` instead (`win_sent`).
    /// Shows the item and the verdict to `visit`, as the get's reply needs them.
    /// With `shown` (`mg c`) an item without a CAS unique gets one.
    pub fn meta_get(
        &self,
        key: &[u8],
        change: MetaGetChange,
        shown: CasShown,
        visit: &mut dyn FnMut(MetaFound<'_>),
    ) -> Result<()> {
        let now = clock::now();
        let mut vivified = false;
        let mut shown_item: Option<(Copied, Verdict)> = None;
        self.update(key, &mut |old| {
            let Some(found) = live(old, now) else {
                let Some(exptime) = change.vivify else {
                    shown_item = None;
                    return clean(old);
                };
                let header = Header {
                    expiry: clock::expiry_of(exptime, now),
                    cas: self.cas_for_write(shown, old),
                    win_sent: true,
                    ..Header::default()
                };
                vivified = true;
                shown_item = Some((Copied::of(header, b""), Verdict { win: true, ..Verdict::default() }));
                return Action::Set(Cow::Owned(item::encode(header, &[])));
            };
            let mut header = self.showing_cas(found.header, shown);
            if let Some(exptime) = change.touch {
                header.expiry = clock::expiry_of(exptime, now);
            }
            let expires_soon = change.recache.is_some_and(|seconds| {
                header.expiry != clock::NEVER && i64::from(header.expiry) - (now as i64) < i64::from(seconds)
            });
            let verdict = Verdict {
                win: !header.win_sent && (header.stale || expires_soon),
                already_won: header.win_sent,
                stale: header.stale,
            };
            header.win_sent |= verdict.win;
            shown_item = Some((Copied::of(header, found.data), verdict));
            if header == found.header {
                Action::Keep
            } else {
                Action::Set(Cow::Owned(item::encode(header, &[found.data])))
            }
        })?;
        if vivified {
            bump(&self.counters.total_items);
        }
        visit(shown_item.as_ref().map(|(item, verdict)| (item.found(), *verdict)));
        Ok(())
    }

    /// `md I`: marks `key`'s live item stale (and sets `exptime`, if given), so that the
    /// next meta get wins the right to recompute it; Stored when marked, NotFound when
    /// absent, Exists when `cas` is given and does not match. The stale item is a new
    /// version, whose CAS unique is taken as a write's (`cas_for_write`).
    pub fn invalidate(&self, key: &[u8], cas: Option<u64>, exptime: Option<i64>) -> Result<StoreOutcome> {
        let now = clock::now();
        let mut outcome = StoreOutcome::NotFound;
        self.update(key, &mut |old| match live(old, now) {
            Some(found) if cas.is_some_and(|cas| !self.cas_matches(found.header.cas, cas)) => {
                outcome = StoreOutcome::Exists;
                Action::Keep
            }
            Some(found) => {
                outcome = StoreOutcome::Stored;
                let expiry = exptime.map_or(found.header.expiry, |exptime| clock::expiry_of(exptime, now));
                let cas = self.cas_for_write(CasShown::No, old);
                let header = Header { expiry, cas, stale: true, win_sent: false, ..found.header };
                Action::Set(Cow::Owned(item::encode(header, &[found.data])))
            }
            None => clean(old),
        })?;
        Ok(outcome)
    }

    /// Removes `key`'s item if its CAS unique is `cas` (any, with None): Stored when
    /// removed, NotFound when absent, Exists when the CAS differs (meta `md C`).
    pub fn delete_if(&self, key: &[u8], cas: Option<u64>) -> Result<StoreOutcome> {
        let now = clock::now();
        let mut outcome = StoreOutcome::NotFound;
        self.update(key, &mut |old| match live(old, now) {
            Some(found) if cas.is_some_and(|cas| !self.cas_matches(found.header.cas, cas)) => {
                outcome = StoreOutcome::Exists;
                Action::Keep
            }
            Some(_) => {
                outcome = StoreOutcome::Stored;
                Action::Remove
            }
            None => clean(old),
        })?;
        Ok(outcome)
    }

    /// Removes `key`'s item: true if a live one was there.
    pub fn delete(&self, key: &[u8]) -> Result<bool> {
        let now = clock::now();
        let mut deleted = false;
        self.update(key, &mut |old| {
            deleted = live(old, now).is_some();
            clean(old)
        })?;
        Ok(deleted)
    }

    /// `incr` (wrapping at 2^64) or `decr` (stopping at 0). As memcached, a shorter result
    /// is padded with spaces to the old length (memcached rewrites the number in place).
    pub fn arithmetic(&self, key: &[u8], delta: u64, incr: bool) -> Result<ArithmeticOutcome> {
        self.arithmetic_or_create(key, delta, incr, ArithmeticExtras::default())
    }

    /// `arithmetic`; with `create` (exptime, initial value), a missing item is created with
    /// that value instead (meta `ma N J`), and the value is not changed by `delta`.
    pub fn arithmetic_or_create(
        &self,
        key: &[u8],
        delta: u64,
        incr: bool,
        extras: ArithmeticExtras,
    ) -> Result<ArithmeticOutcome> {
        let now = clock::now();
        let mut outcome = ArithmeticOutcome::NotFound;
        self.update(key, &mut |old| {
            let Some(found) = live(old, now) else {
                if let Some((exptime, initial)) = extras.create {
                    let cas = self.cas_for_write(extras.cas_shown, old);
                    let header = Header { expiry: clock::expiry_of(exptime, now), cas, ..Header::default() };
                    outcome = ArithmeticOutcome::Created(initial, header);
                    return Action::Set(Cow::Owned(item::encode(header, &[initial.to_string().as_bytes()])));
                }
                outcome = ArithmeticOutcome::NotFound;
                return clean(old);
            };
            // memcached's order: an empty value is no number, then the CAS (0 compares
            // nothing), then the number itself.
            if found.data.is_empty() {
                outcome = ArithmeticOutcome::NonNumeric;
                return Action::Keep;
            }
            if extras.compare.is_some_and(|compare| compare != 0 && compare != found.header.cas) {
                outcome = ArithmeticOutcome::Exists;
                return Action::Keep;
            }
            let Some(current) = parse_counter(found.data) else {
                outcome = ArithmeticOutcome::NonNumeric;
                return Action::Keep;
            };
            let next = if incr { current.wrapping_add(delta) } else { current.saturating_sub(delta) };
            let mut text = next.to_string().into_bytes();
            if text.len() < found.data.len() {
                text.resize(found.data.len(), b' ');
            }
            let expiry = extras.touch.map_or(found.header.expiry, |exptime| clock::expiry_of(exptime, now));
            let cas = self.cas_for_write(extras.cas_shown, old);
            let header = Header { cas, flags: found.header.flags, expiry, ..Header::default() };
            outcome = ArithmeticOutcome::Value(next, header);
            Action::Set(Cow::Owned(item::encode(header, &[&text])))
        })?;
        let counters = &self.counters;
        match (&outcome, incr) {
            (ArithmeticOutcome::NotFound, true) => bump(&counters.incr_misses),
            (ArithmeticOutcome::NotFound, false) => bump(&counters.decr_misses),
            (ArithmeticOutcome::Value(..) | ArithmeticOutcome::Created(..), true) => bump(&counters.incr_hits),
            (ArithmeticOutcome::Value(..) | ArithmeticOutcome::Created(..), false) => bump(&counters.decr_hits),
            (ArithmeticOutcome::NonNumeric | ArithmeticOutcome::Exists, _) => {}
        }
        Ok(outcome)
    }

    /// Removes every item now.
    pub fn flush(&self) -> Result<()> {
        self.db.clear()
    }
}

#[cfg(test)]
mod tests {
    #![expect(clippy::unwrap_used, reason = "a test fails loudly on the first broken expectation")]
    use super::*;

    /// A counter started at the top (a served file's highest CAS unique was u64::MAX) hands
    /// out u64::MAX and then goes on past 0, which it never hands out.
    #[test]
    fn a_wrapping_cas_counter_never_hands_out_zero() {
        let db: Arc<dyn Dbm> = Arc::new(kura::TinyDbm::new(&kura::Params::new()).unwrap());
        let store = Store::new(db, 1 << 20, u64::MAX);
        let taken: Vec<u64> = (0..4).map(|_| store.take_cas()).collect();
        assert_eq!(taken, [u64::MAX, 1, 2, 3]);
    }

    /// A read that found no unique and goes on to give one keeps the unique another client's
    /// read gave meanwhile (the race `tests/cas_uniques.rs` provokes with threads).
    #[test]
    fn giving_a_unique_keeps_one_given_meanwhile() {
        let db: Arc<dyn Dbm> = Arc::new(kura::TinyDbm::new(&kura::Params::new()).unwrap());
        let store = Store::new(db, 1 << 20, 1);
        let request = StoreRequest {
            mode: StoreMode::Set,
            key: b"k".to_vec(),
            flags: 0,
            exptime: 0,
            length: 1,
            cas: 0,
            noreply: false,
            invalidate: false,
        };
        assert_eq!(store.store(&request, b"v").unwrap(), StoreOutcome::Stored);
        let shown = |store: &Store, give: bool| {
            let mut cas = None;
            let visit = &mut |found: Option<Found<'_>>| cas = found.map(|f| f.header.cas);
            if give {
                store.give_cas(b"k", clock::now(), visit).unwrap();
            } else {
                store.get(b"k", CasShown::Yes, visit).unwrap();
            }
            cas.unwrap()
        };
        let first = shown(&store, false);
        assert_ne!(first, 0);
        assert_eq!(shown(&store, true), first);
        assert_eq!(shown(&store, false), first);
    }
}
