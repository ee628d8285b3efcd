//! CAS uniques on demand, checked against a model: random writes and reads of a few keys
//! from two connections, every reply compared with what memcached's CAS contract promises.
//!
//! Why: `kura serve` gives an item its CAS unique only when a reply first shows one (`gets`,
//! `gats`, `mg c`, `ms c`), so that items whose CAS no client asks for store none (3 bytes
//! an item, docs/server.md "CAS uniques on demand"). A client must not be able to tell: the
//! same version of an item always shows the same unique, no two versions of any items share
//! one, a newly shown unique is above every one shown before, and `cas`/`md C` succeed
//! exactly with the unique shown for the item's current version. The side-by-side test
//! (`against_memcached.rs`) masks CAS values, so this is where their contract is checked;
//! and `me` shows that a version whose unique no client saw stores none.

#![expect(
    clippy::unwrap_used,
    clippy::indexing_slicing,
    reason = "a test fails loudly on the first broken expectation"
)]

mod support;

use std::collections::HashMap;

use kura::split_mix::SplitMix64;
use kura_server::Config;
use support::Client;

const KEYS: [&str; 3] = ["a", "bb", "ccc"];

/// One item of the model: its value and which version (one per write, over all keys) it is.
struct Item {
    value: Vec<u8>,
    version: u64,
}

/// What the server must answer: the items, the unique each shown version got, and every
/// unique shown so far for each key (the CAS values a client could send back).
#[derive(Default)]
struct Model {
    items: HashMap<&'static str, Item>,
    versions: u64,
    unique_of_version: HashMap<u64, u64>,
    version_of_unique: HashMap<u64, u64>,
    highest_shown: u64,
    shown_for_key: HashMap<&'static str, Vec<u64>>,
}

impl Model {
    fn write(&mut self, key: &'static str, value: Vec<u8>) -> u64 {
        self.versions += 1;
        self.items.insert(key, Item { value, version: self.versions });
        self.versions
    }

    /// Checks a unique shown for `key`'s current version and records it.
    fn shown(&mut self, key: &'static str, unique: u64, context: &str) {
        let version = self.items[key].version;
        assert_ne!(unique, 0, "{context}: a shown CAS unique is never 0");
        match self.unique_of_version.get(&version) {
            Some(&earlier) => assert_eq!(unique, earlier, "{context}: one version, one unique"),
            None => {
                assert!(unique > self.highest_shown, "{context}: a new unique is above every earlier one");
                assert!(!self.version_of_unique.contains_key(&unique), "{context}: two versions share a unique");
                self.unique_of_version.insert(version, unique);
                self.version_of_unique.insert(unique, version);
                self.highest_shown = unique;
                self.shown_for_key.entry(key).or_default().push(unique);
            }
        }
    }

    /// The unique `key`'s current version was shown, if any.
    fn current_unique(&self, key: &str) -> Option<u64> {
        self.items.get(key).and_then(|item| self.unique_of_version.get(&item.version).copied())
    }

    /// A CAS a client might send for `key`: one shown for it (current or older), one shown
    /// for another key, one never handed out, or 0.
    fn some_cas(&self, rng: &mut SplitMix64, key: &str) -> u64 {
        let pick = |list: &[u64], rng: &mut SplitMix64| list[rng.below(list.len() as u64) as usize];
        match (rng.below(10), self.shown_for_key.get(key)) {
            (0..=5, Some(list)) => pick(list, rng),
            (6, _) => 0,
            (7, _) => self.highest_shown + 1 + rng.below(1000),
            _ => {
                let all: Vec<u64> = self.version_of_unique.keys().copied().collect();
                if all.is_empty() {
                    1
                } else {
                    pick(&all, rng)
                }
            }
        }
    }
}

fn value(rng: &mut SplitMix64) -> Vec<u8> {
    (0..1 + rng.below(20)).map(|_| b'a' + rng.below(26) as u8).collect()
}

fn text(line: &[u8]) -> String {
    String::from_utf8(line.to_vec()).unwrap()
}

/// Reads a `VALUE key flags length [cas]` block and its `END`, if any: (data, cas).
fn value_block(client: &mut Client) -> Option<(Vec<u8>, Option<u64>)> {
    let header = text(&client.line());
    if header == "END\r\n" {
        return None;
    }
    let words: Vec<&str> = header.trim_end().split(' ').collect();
    assert_eq!(words[0], "VALUE", "{header}");
    let mut data = client.line();
    data.truncate(data.len() - 2);
    assert_eq!(data.len(), words[3].parse::<usize>().unwrap());
    client.expect(b"END\r\n");
    Some((data, words.get(4).map(|w| w.parse().unwrap())))
}

fn run(running: &support::Running, seed: u64) {
    let mut clients = [Client::connect(running.address), Client::connect(running.address)];
    let mut rng = SplitMix64::new(seed);
    let mut model = Model::default();
    for step in 0..3_000 {
        let key = KEYS[rng.below(KEYS.len() as u64) as usize];
        let client = &mut clients[rng.below(2) as usize];
        let op = rng.below(11);
        let context = format!("KURA_TEST_SEED={seed}, step {step}, op {op}, key {key}");
        let present = model.items.contains_key(key);
        match op {
            // set, ms without c, append: a new version whose unique nobody saw.
            0..=2 => {
                let data = value(&mut rng);
                let request = match op {
                    0 => format!("set {key} 0 0 {}\r\n", data.len()),
                    1 => format!("ms {key} {}\r\n", data.len()),
                    _ => format!("append {key} 0 0 {}\r\n", data.len()),
                };
                client.send(request.as_bytes());
                client.send(&data);
                client.send(b"\r\n");
                let reply = text(&client.line());
                match (op, present) {
                    (0, _) => assert_eq!(reply, "STORED\r\n", "{context}"),
                    (1, _) => assert_eq!(reply, "HD\r\n", "{context}"),
                    (_, true) => assert_eq!(reply, "STORED\r\n", "{context}"),
                    (_, false) => assert_eq!(reply, "NOT_STORED\r\n", "{context}"),
                }
                if op == 2 && present {
                    let joined = [model.items[key].value.clone(), data].concat();
                    model.write(key, joined);
                } else if op != 2 {
                    model.write(key, data);
                }
            }
            // ms c: a new version, its unique shown at once.
            3 => {
                let data = value(&mut rng);
                client.send(format!("ms {key} {} c\r\n", data.len()).as_bytes());
                client.send(&data);
                client.send(b"\r\n");
                let reply = text(&client.line());
                let unique = reply.trim_end().strip_prefix("HD c").unwrap_or_else(|| panic!("{context}: {reply}"));
                model.write(key, data);
                model.shown(key, unique.parse().unwrap(), &context);
            }
            // gets, gats: the value and its unique.
            4 | 5 => {
                client.send(if op == 4 { format!("gets {key}\r\n") } else { format!("gats 0 {key}\r\n") }.as_bytes());
                match (value_block(client), model.items.get(key)) {
                    (None, None) => {}
                    (Some((data, unique)), Some(item)) => {
                        assert_eq!(data, item.value, "{context}");
                        model.shown(key, unique.unwrap(), &context);
                    }
                    (got, _) => panic!("{context}: {got:?}, model has it: {present}"),
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
                model.shown(key, words[2].strip_prefix('c').unwrap().parse().unwrap(), &context);
            }
            // cas: stores exactly with the unique shown for the current version.
            7 => {
                let cas = model.some_cas(&mut rng, key);
                let data = value(&mut rng);
                client.send(format!("cas {key} 0 0 {} {cas}\r\n", data.len()).as_bytes());
                client.send(&data);
                client.send(b"\r\n");
                let reply = text(&client.line());
                let expected = match model.current_unique(key) {
                    _ if !present => "NOT_FOUND\r\n",
                    Some(unique) if unique == cas => "STORED\r\n",
                    _ => "EXISTS\r\n",
                };
                assert_eq!(reply, expected, "{context}: cas {cas}");
                if expected == "STORED\r\n" {
                    model.write(key, data);
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
                    model.items.remove(key);
                }
            }
            // delete.
            9 => {
                let reply = text(&client.exchange_line(format!("delete {key}\r\n").as_bytes()));
                assert_eq!(reply, if present { "DELETED\r\n" } else { "NOT_FOUND\r\n" }, "{context}");
                model.items.remove(key);
            }
            // me: a version whose unique no client saw stores none (its size is the key, the
            // one header byte and the data); a shown one stores exactly that unique.
            _ => {
                let reply = text(&client.exchange_line(format!("me {key}\r\n").as_bytes()));
                let Some(item) = model.items.get(key) else {
                    assert_eq!(reply, "EN\r\n", "{context}");
                    continue;
                };
                let field = |name: &str| -> u64 {
                    let prefix = format!("{name}=");
                    reply.split_whitespace().find_map(|w| w.strip_prefix(prefix.as_str())).unwrap().parse().unwrap()
                };
                let unique = model.current_unique(key);
                assert_eq!(field("cas"), unique.unwrap_or(0), "{context}: {reply}");
                let varint = unique.map_or(0, |u| (64 - u.leading_zeros() as usize).div_ceil(7));
                let size = key.len() + 1 + varint + item.value.len();
                assert_eq!(field("size"), size as u64, "{context}: {reply}");
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
    let dir = tempfile::tempdir().unwrap();
    for db in [support::cache(), support::tree(dir.path())] {
        let running = support::start(Config::default(), db);
        run(&running, seed);
    }
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
