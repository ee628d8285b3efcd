//! CAS uniques on demand, checked against a model: random writes and reads of a few keys
//! from two connections, every reply compared with what memcached's CAS contract promises.
//!
//! Why: `kura serve` stores an item's CAS unique only once a client may hold it (a reply shows
//! one, or the version replaced held one), so that items whose CAS no client asks for store
//! none (3 bytes an item, docs/server.md "CAS uniques on demand"). A client must not be able
//! to tell: the same version of an item always shows the same unique, no two versions share
//! one, a key's new version shows a unique above those shown for its earlier versions (across
//! restarts over a served file too), and `cas`/`md C` succeed exactly with the unique shown
//! for the item's current version. The side-by-side test (`against_memcached.rs`) masks CAS
//! values, so this is where their contract is checked; and `me` shows which versions store
//! one.

#![expect(
    clippy::unwrap_used,
    clippy::indexing_slicing,
    reason = "a test fails loudly on the first broken expectation"
)]

mod support;

use std::collections::{HashMap, HashSet};
use std::path::Path;

use kura::split_mix::SplitMix64;
use kura_server::Config;
use support::{Client, Running};

const KEYS: [&str; 3] = ["a", "bb", "ccc"];

/// One item of the model: its value, which version (one per write, over all keys) it is, and
/// whether it stores a unique (one was shown for it, or the version it replaced stored one).
struct Item {
    value: Vec<u8>,
    version: u64,
    holds_unique: bool,
}

/// What the server must answer: the items, the unique each version was seen with, and every
/// unique seen for each key (the CAS values a client could send back).
#[derive(Default)]
struct Model {
    items: HashMap<&'static str, Item>,
    versions: u64,
    unique_of_version: HashMap<u64, u64>,
    version_of_unique: HashMap<u64, u64>,
    shown_for_key: HashMap<&'static str, Vec<u64>>,
    /// Keys removed since the last restart: what was shown for them may come back after it.
    removed_since_restart: HashSet<&'static str>,
}

impl Model {
    /// A new version of `key`; `shown` when the write's reply showed its unique.
    fn write(&mut self, key: &'static str, value: Vec<u8>, shown: bool) {
        self.versions += 1;
        let holds_unique = shown || self.items.get(key).is_some_and(|item| item.holds_unique);
        self.items.insert(key, Item { value, version: self.versions, holds_unique });
    }

    fn remove(&mut self, key: &'static str) {
        self.items.remove(key);
        self.removed_since_restart.insert(key);
    }

    /// Checks a unique seen for `key`'s current version and records it.
    fn seen(&mut self, key: &'static str, unique: u64, context: &str) {
        let item = self.items.get_mut(key).unwrap();
        assert_ne!(unique, 0, "{context}: a shown CAS unique is never 0");
        let version = item.version;
        if let Some(&earlier) = self.unique_of_version.get(&version) {
            assert_eq!(unique, earlier, "{context}: one version, one unique");
            return;
        }
        item.holds_unique = true;
        if let Some(&other) = self.version_of_unique.get(&unique) {
            panic!("{context}: unique {unique} shown for versions {other} and {version}");
        }
        let earlier = self.shown_for_key.entry(key).or_default();
        assert!(
            earlier.iter().all(|&e| e < unique),
            "{context}: {unique} is not above the uniques of the key's earlier versions {earlier:?}"
        );
        earlier.push(unique);
        self.unique_of_version.insert(version, unique);
        self.version_of_unique.insert(unique, version);
    }

    /// After a restart a unique shown for a key removed since the last one may come back
    /// (only the items' own uniques are kept): forget those.
    fn restarted(&mut self) {
        for key in std::mem::take(&mut self.removed_since_restart) {
            for unique in self.shown_for_key.remove(key).unwrap_or_default() {
                self.version_of_unique.remove(&unique);
            }
        }
    }

    /// The unique `key`'s current version was seen with, if any.
    fn current_unique(&self, key: &str) -> Option<u64> {
        self.items.get(key).and_then(|item| self.unique_of_version.get(&item.version).copied())
    }

    /// A CAS a client might send for `key`: one shown for it (current or older), one shown
    /// for another key, one never handed out, or 0.
    fn some_cas(&self, rng: &mut SplitMix64, key: &str) -> u64 {
        let pick = |list: &[u64], rng: &mut SplitMix64| list[rng.below(list.len() as u64) as usize];
        let all: Vec<u64> = self.version_of_unique.keys().copied().collect();
        match (rng.below(10), self.shown_for_key.get(key).filter(|list| !list.is_empty())) {
            (0..=5, Some(list)) => pick(list, rng),
            (6, _) => 0,
            (7, _) => all.iter().max().copied().unwrap_or(0) + 1 + rng.below(1000),
            _ if all.is_empty() => 1,
            _ => pick(&all, rng),
        }
    }
}

fn value(rng: &mut SplitMix64) -> Vec<u8> {
    (0..1 + rng.below(20)).map(|_| b'a' + rng.below(26) as u8).collect()
}

fn text(line: &[u8]) -> String {
    String::from_utf8(line.to_vec()).unwrap()
}

/// Reads `VALUE key flags length [cas]` blocks up to `END`: (key, data, cas) of each.
fn value_blocks(client: &mut Client) -> Vec<(String, Vec<u8>, Option<u64>)> {
    let mut blocks = Vec::new();
    loop {
        let header = text(&client.line());
        if header == "END\r\n" {
            return blocks;
        }
        let words: Vec<&str> = header.trim_end().split(' ').collect();
        assert_eq!(words[0], "VALUE", "{header}");
        let mut data = client.line();
        data.truncate(data.len() - 2);
        assert_eq!(data.len(), words[3].parse::<usize>().unwrap());
        blocks.push((words[1].to_string(), data, words.get(4).map(|w| w.parse().unwrap())));
    }
}

/// Sends a storage command's line and data, and reads its one-line reply.
fn store(client: &mut Client, line: &str, data: &[u8]) -> String {
    client.send(line.as_bytes());
    client.send(data);
    client.send(b"\r\n");
    text(&client.line())
}

/// How the server under test starts, again after a restart (over the same file).
type Start<'a> = &'a dyn Fn() -> Running;

fn run(start: Start<'_>, restarts: bool, seed: u64) {
    let mut running = start();
    let connect = |running: &Running| [Client::connect(running.address), Client::connect(running.address)];
    let mut clients = connect(&running);
    let mut rng = SplitMix64::new(seed);
    let mut model = Model::default();
    for step in 0..3_000 {
        let key = KEYS[rng.below(KEYS.len() as u64) as usize];
        let client = &mut clients[rng.below(2) as usize];
        let op = rng.below(if restarts { 15 } else { 14 });
        let context = format!("KURA_TEST_SEED={seed}, step {step}, op {op}, key {key}");
        let present = model.items.contains_key(key);
        match op {
            // set, ms without c, append: a new version whose unique no reply shows.
            0..=2 => {
                let data = value(&mut rng);
                let reply = match op {
                    0 => store(client, &format!("set {key} 0 0 {}\r\n", data.len()), &data),
                    1 => store(client, &format!("ms {key} {}\r\n", data.len()), &data),
                    _ => store(client, &format!("append {key} 0 0 {}\r\n", data.len()), &data),
                };
                let expected = match (op, present) {
                    (1, _) => "HD\r\n",
                    (0, _) | (_, true) => "STORED\r\n",
                    (_, false) => "NOT_STORED\r\n",
                };
                assert_eq!(reply, expected, "{context}");
                if op == 2 && present {
                    let joined = [model.items[key].value.clone(), data].concat();
                    model.write(key, joined, false);
                } else if op != 2 {
                    model.write(key, data, false);
                }
            }
            // ms c: a new version, its unique shown at once.
            3 => {
                let data = value(&mut rng);
                let reply = store(client, &format!("ms {key} {} c\r\n", data.len()), &data);
                let unique = reply.trim_end().strip_prefix("HD c").unwrap_or_else(|| panic!("{context}: {reply}"));
                model.write(key, data, true);
                model.seen(key, unique.parse().unwrap(), &context);
            }
            // gets, gats of one key; gets of all three in a random order, one maybe twice.
            4 | 5 | 11 => {
                let asked: Vec<&'static str> = if op == 11 {
                    (0..1 + rng.below(4)).map(|_| KEYS[rng.below(KEYS.len() as u64) as usize]).collect()
                } else {
                    vec![key]
                };
                let line = if op == 5 {
                    format!("gats 0 {}\r\n", asked.join(" "))
                } else {
                    format!("gets {}\r\n", asked.join(" "))
                };
                client.send(line.as_bytes());
                let blocks = value_blocks(client);
                let expected: Vec<&str> = asked.iter().copied().filter(|k| model.items.contains_key(k)).collect();
                let got: Vec<&str> = blocks.iter().map(|(k, _, _)| k.as_str()).collect();
                assert_eq!(got, expected, "{context}: {line:?}");
                for ((shown_key, data, unique), asked_key) in blocks.into_iter().zip(expected) {
                    assert_eq!(shown_key, asked_key);
                    assert_eq!(data, model.items[asked_key].value, "{context}");
                    model.seen(asked_key, unique.unwrap(), &context);
                }
            }
            // mg with c and v.
            6 => {
                client.send(format!("mg {key} c v\r\n").as_bytes());
                let reply = text(&client.line());
                if !present {
                    assert_eq!(reply, "EN\r\n", "{context}");
                    continue;
                }
                let words: Vec<&str> = reply.trim_end().split(' ').collect();
                assert_eq!(words[0], "VA", "{context}: {reply}");
                let mut data = client.line();
                data.truncate(data.len() - 2);
                assert_eq!(data, model.items[key].value, "{context}");
                model.seen(key, words[2].strip_prefix('c').unwrap().parse().unwrap(), &context);
            }
            // cas: stores exactly with the unique shown for the current version.
            7 => {
                let cas = model.some_cas(&mut rng, key);
                let data = value(&mut rng);
                let reply = store(client, &format!("cas {key} 0 0 {} {cas}\r\n", data.len()), &data);
                let expected = match model.current_unique(key) {
                    _ if !present => "NOT_FOUND\r\n",
                    Some(unique) if unique == cas => "STORED\r\n",
                    _ => "EXISTS\r\n",
                };
                assert_eq!(reply, expected, "{context}: cas {cas}");
                if expected == "STORED\r\n" {
                    model.write(key, data, false);
                }
            }
            // md C: deletes exactly with the unique shown for the current version.
            8 => {
                let cas = model.some_cas(&mut rng, key);
                let reply = text(&client.exchange_line(format!("md {key} C{cas}\r\n").as_bytes()));
                let expected = match model.current_unique(key) {
                    _ if !present => "NF\r\n",
                    Some(unique) if unique == cas => "HD\r\n",
                    _ => "EX\r\n",
                };
                assert_eq!(reply, expected, "{context}: C{cas}");
                if expected == "HD\r\n" {
                    model.remove(key);
                }
            }
            9 => {
                let reply = text(&client.exchange_line(format!("delete {key}\r\n").as_bytes()));
                assert_eq!(reply, if present { "DELETED\r\n" } else { "NOT_FOUND\r\n" }, "{context}");
                if present {
                    model.remove(key);
                }
            }
            // me: which versions store a unique (the size counts its varint), and which one.
            10 => {
                let reply = text(&client.exchange_line(format!("me {key}\r\n").as_bytes()));
                let Some(item) = model.items.get(key) else {
                    assert_eq!(reply, "EN\r\n", "{context}");
                    continue;
                };
                let field = |name: &str| -> u64 {
                    let prefix = format!("{name}=");
                    reply.split_whitespace().find_map(|w| w.strip_prefix(prefix.as_str())).unwrap().parse().unwrap()
                };
                let (unique, holds, len) = (field("cas"), item.holds_unique, item.value.len());
                assert_eq!(unique != 0, holds, "{context}: {reply}");
                if let Some(known) = model.current_unique(key) {
                    assert_eq!(unique, known, "{context}: {reply}");
                }
                let varint = (64 - unique.leading_zeros() as usize).div_ceil(7);
                assert_eq!(field("size"), (key.len() + 1 + varint + len) as u64, "{context}: {reply}");
                if holds {
                    model.seen(key, unique, &context);
                }
            }
            // ma c: creates a missing item (N, J5) or increments a number, showing the unique.
            12 => {
                let reply = text(&client.exchange_line(format!("ma {key} N0 J5 c\r\n").as_bytes()));
                let current = model.items.get(key).map(|item| item.value.clone());
                let next = match current {
                    None => Some(5),
                    Some(value) => std::str::from_utf8(&value).ok().and_then(|v| v.parse::<u64>().ok()).map(|n| n + 1),
                };
                let Some(next) = next else {
                    assert_eq!(reply, "CLIENT_ERROR cannot increment or decrement non-numeric value\r\n", "{context}");
                    continue;
                };
                let unique = reply.trim_end().strip_prefix("HD c").unwrap_or_else(|| panic!("{context}: {reply}"));
                model.write(key, next.to_string().into_bytes(), true);
                model.seen(key, unique.parse().unwrap(), &context);
            }
            // md I: the item stays, stale, as a new version.
            13 => {
                let reply = text(&client.exchange_line(format!("md {key} I\r\n").as_bytes()));
                assert_eq!(reply, if present { "HD\r\n" } else { "NF\r\n" }, "{context}");
                if present {
                    let value = model.items[key].value.clone();
                    model.write(key, value, false);
                }
            }
            // A restart over the served file: the items, and the uniques they hold, stay.
            _ => {
                drop(clients);
                drop(running);
                running = start();
                clients = connect(&running);
                model.restarted();
            }
        }
    }
}

fn seed() -> u64 {
    match std::env::var("KURA_TEST_SEED").ok().as_deref() {
        Some("random") => {
            let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos();
            SplitMix64::new(u64::from(std::process::id()) ^ u64::from(nanos)).next_u64()
        }
        Some(seed) => seed.parse().expect("KURA_TEST_SEED is a number or `random`"),
        None => 20_261_130,
    }
}

#[test]
fn cas_uniques_keep_memcached_s_contract_though_given_on_demand() {
    let seed = seed();
    run(&support::start_default, false, seed);
    let dir = tempfile::tempdir().unwrap();
    let tree = |dir: &Path| support::start(Config::default(), support::tree(dir));
    run(&|| tree(dir.path()), true, seed);
}

/// Under `-C` no unique is ever given: every reply shows 0, `cas` never stores, and `md C0`
/// matches (memcached -C compares with the 0 every item holds).
#[test]
fn without_cas_every_unique_is_zero() {
    let running = support::start(Config { cas_enabled: false, ..Config::default() }, support::cache());
    let mut client = Client::connect(running.address);
    client.roundtrip(b"set k 0 0 1\r\na\r\n", b"STORED\r\n");
    client.roundtrip(b"gets k\r\n", b"VALUE k 0 1 0\r\na\r\nEND\r\n");
    client.roundtrip(b"ms k 1 c\r\nb\r\n", b"HD c0\r\n");
    client.roundtrip(b"mg k c v\r\n", b"VA 1 c0\r\nb\r\n");
    client.roundtrip(b"cas k 0 0 1 0\r\nc\r\n", b"EXISTS\r\n");
    client.roundtrip(b"me k\r\n", b"ME k exp=-1 la=0 cas=0 fetch=no cls=1 size=3\r\n");
    client.roundtrip(b"md k C0\r\n", b"HD\r\n");
}

/// Clients that ask for the unique of a new version at the same moment are all shown the
/// same one: the read that finds none gives it in an atomic update that first looks again.
#[test]
fn clients_asking_at_once_are_shown_one_unique() {
    const CLIENTS: usize = 4;
    let running = support::start_default();
    let address = running.address;
    let mut writer = Client::connect(address);
    let barrier = std::sync::Arc::new(std::sync::Barrier::new(CLIENTS + 1));
    let (sender, receiver) = std::sync::mpsc::channel();
    let readers: Vec<_> = (0..CLIENTS)
        .map(|_| {
            let (barrier, sender) = (barrier.clone(), sender.clone());
            std::thread::spawn(move || {
                let mut client = Client::connect(address);
                for _ in 0..200 {
                    barrier.wait();
                    sender.send(client.cas_of("race")).unwrap();
                    barrier.wait();
                }
            })
        })
        .collect();
    for round in 0..200 {
        writer
            .roundtrip(format!("set race 0 0 {}\r\nv{round}\r\n", format!("v{round}").len()).as_bytes(), b"STORED\r\n");
        barrier.wait();
        let shown: Vec<u64> = (0..CLIENTS).map(|_| receiver.recv().unwrap()).collect();
        assert!(shown.iter().all(|&unique| unique == shown[0] && unique != 0), "round {round}: {shown:?}");
        barrier.wait();
    }
    for reader in readers {
        reader.join().unwrap();
    }
}

/// A read that must store the unique it would show, in a full cache that evicts nothing,
/// answers the error alone: no value first (it would show a unique that is stored nowhere,
/// and a pipelining client would take two replies for one request).
#[test]
fn a_unique_that_cannot_be_stored_is_not_shown() {
    let params = kura::Params::new()
        .with("cap_rec_num", 100_000)
        .with("cap_mem_bytes", 64 << 10)
        .with("num_slots", 1)
        .with("policy", "noevict");
    let db = kura::registry::engine("segcache").unwrap().open(Path::new(""), kura::OpenMode::Create, &params).unwrap();
    let running = support::start(Config { evictions: false, ..Config::default() }, std::sync::Arc::from(db));
    let mut client = Client::connect(running.address);
    let data = [b'x'; 200];
    let mut stored = 0;
    while store(&mut client, &format!("set k{stored} 0 0 {}\r\n", data.len()), &data) == "STORED\r\n" {
        stored += 1;
    }
    assert!(stored > 10, "the cache took {stored} items");
    for request in ["gets k0\r\n", "gats 0 k1\r\n", "mg k2 c v\r\n", "mg k3 c v T30\r\n", "mg k4 c v R30\r\n"] {
        client.send(request.as_bytes());
        client.send(b"mn\r\n");
        let reply = text(&client.line());
        assert!(reply.starts_with("SERVER_ERROR"), "{request:?}: {reply:?}");
        assert_eq!(text(&client.line()), "MN\r\n", "{request:?}: one reply, then the next request's");
    }
    // Reads that show no unique still work.
    client.roundtrip(b"get k5\r\n", &[&b"VALUE k5 0 200\r\n"[..], &data, b"\r\nEND\r\n"].concat());
}
