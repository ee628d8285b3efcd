//! The text protocol, command by command, against a server started in-process: every reply
//! checked byte for byte (the expected bytes are memcached 1.6.18's, except where the case
//! says it is Kura's documented difference), plus pipelining, noreply, CAS races, expiry,
//! binary values, keys of any bytes, key and item size limits and commands split at every byte.
#![expect(
    clippy::unwrap_used,
    clippy::indexing_slicing,
    reason = "a test fails loudly on the first broken expectation"
)]

mod support;

use kura::split_mix::SplitMix64;
use support::{start_default, Client};

/// (request, reply) pairs run in order on one connection.
const SCRIPT: &[(&[u8], &[u8])] = &[
    (b"set a 5 0 3\r\nabc\r\n", b"STORED\r\n"),
    (b"get a\r\n", b"VALUE a 5 3\r\nabc\r\nEND\r\n"),
    (b"get a nope a\r\n", b"VALUE a 5 3\r\nabc\r\nVALUE a 5 3\r\nabc\r\nEND\r\n"),
    (b"add a 0 0 1\r\nx\r\n", b"NOT_STORED\r\n"),
    (b"add b 0 0 1\r\nx\r\n", b"STORED\r\n"),
    (b"replace nope 0 0 1\r\nx\r\n", b"NOT_STORED\r\n"),
    (b"replace b 9 0 2\r\nyy\r\n", b"STORED\r\n"),
    (b"get b\r\n", b"VALUE b 9 2\r\nyy\r\nEND\r\n"),
    (b"append nope 0 0 1\r\nx\r\n", b"NOT_STORED\r\n"),
    (b"prepend nope 0 0 1\r\nx\r\n", b"NOT_STORED\r\n"),
    (b"append a 1 0 2\r\nde\r\n", b"STORED\r\n"),
    (b"prepend a 1 0 2\r\n<<\r\n", b"STORED\r\n"),
    (b"get a\r\n", b"VALUE a 5 7\r\n<<abcde\r\nEND\r\n"),
    (b"delete a\r\n", b"DELETED\r\n"),
    (b"delete a\r\n", b"NOT_FOUND\r\n"),
    (b"delete a 0\r\n", b"NOT_FOUND\r\n"),
    (b"delete a 5\r\n", b"CLIENT_ERROR bad command line format.  Usage: delete <key> [noreply]\r\n"),
    (b"delete\r\n", b"ERROR\r\n"),
    (b"incr n 1\r\n", b"NOT_FOUND\r\n"),
    (b"set n 0 0 2\r\n10\r\n", b"STORED\r\n"),
    (b"incr n 5\r\n", b"15\r\n"),
    (b"decr n 100\r\n", b"0\r\n"),
    (b"get n\r\n", b"VALUE n 0 2\r\n0 \r\nEND\r\n"),
    (b"incr n abc\r\n", b"CLIENT_ERROR invalid numeric delta argument\r\n"),
    (b"incr n -1\r\n", b"CLIENT_ERROR invalid numeric delta argument\r\n"),
    (b"incr n 18446744073709551616\r\n", b"CLIENT_ERROR invalid numeric delta argument\r\n"),
    (b"incr b 1\r\n", b"CLIENT_ERROR cannot increment or decrement non-numeric value\r\n"),
    (b"set n 0 0 20\r\n18446744073709551615\r\n", b"STORED\r\n"),
    (b"incr n 1\r\n", b"0\r\n"),
    (b"get n\r\n", b"VALUE n 0 20\r\n0                   \r\nEND\r\n"),
    (b"set n 0 0 1\r\n9\r\n", b"STORED\r\n"),
    (b"incr n 1\r\n", b"10\r\n"),
    (b"get n\r\n", b"VALUE n 0 2\r\n10\r\nEND\r\n"),
    (b"incr\r\n", b"ERROR\r\n"),
    (b"touch b 100\r\n", b"TOUCHED\r\n"),
    (b"touch nope 100\r\n", b"NOT_FOUND\r\n"),
    (b"touch b abc\r\n", b"CLIENT_ERROR invalid exptime argument\r\n"),
    (b"touch b\r\n", b"ERROR\r\n"),
    (b"gat 100 b nope\r\n", b"VALUE b 9 2\r\nyy\r\nEND\r\n"),
    (b"gat abc b\r\n", b"CLIENT_ERROR invalid exptime argument\r\n"),
    (b"gat 100\r\n", b"END\r\n"),
    (b"gat\r\n", b"ERROR\r\n"),
    (b"set e 0 -1 1\r\nx\r\n", b"STORED\r\n"),
    (b"get e\r\n", b"END\r\n"),
    (b"set e 0 2592000 1\r\nx\r\n", b"STORED\r\n"),
    (b"get e\r\n", b"VALUE e 0 1\r\nx\r\nEND\r\n"),
    (b"set e 0 2592001 1\r\nx\r\n", b"STORED\r\n"),
    (b"get e\r\n", b"END\r\n"),
    (b"set e 0 0 1\r\nx\r\n", b"STORED\r\n"),
    (b"touch e -1\r\n", b"TOUCHED\r\n"),
    (b"get e\r\n", b"END\r\n"),
    (b"add e 0 0 1\r\ny\r\n", b"STORED\r\n"),
    (b"gat -1 e\r\n", b"VALUE e 0 1\r\ny\r\nEND\r\n"),
    (b"get e\r\n", b"END\r\n"),
    (b"set f 4294967295 0 1\r\nx\r\n", b"STORED\r\n"),
    (b"get f\r\n", b"VALUE f 4294967295 1\r\nx\r\nEND\r\n"),
    (b"set f -1 0 1\r\nx\r\n", b"CLIENT_ERROR bad command line format\r\nERROR\r\n"),
    (b"set f 0 0 -1\r\nx\r\n", b"CLIENT_ERROR bad command line format\r\nERROR\r\n"),
    (b"set f 0 0 abc\r\n", b"CLIENT_ERROR bad command line format\r\n"),
    (b"set f 0 0 1\r\nxyz\r\n", b"CLIENT_ERROR bad data chunk\r\nERROR\r\n"),
    (b"set f 0 0 1\r\nx\n\r\n", b"CLIENT_ERROR bad data chunk\r\nERROR\r\n"),
    (b"set\r\n", b"ERROR\r\n"),
    (b"set a 0 0\r\n", b"ERROR\r\n"),
    (b"set a 0 0 1 2 3\r\n", b"ERROR\r\n"),
    (b"cas a 0 0 1\r\n", b"ERROR\r\n"),
    (b"cas nope 0 0 1 1\r\nx\r\n", b"NOT_FOUND\r\n"),
    (b"cas b 0 0 1 abc\r\n", b"CLIENT_ERROR bad command line format\r\n"),
    (b"cas b 0 0 1 0\r\nx\r\n", b"EXISTS\r\n"),
    (b"bogus\r\n", b"ERROR\r\n"),
    (b"GET a\r\n", b"ERROR\r\n"),
    (b"\r\n", b"ERROR\r\n"),
    (b"get\r\n", b"ERROR\r\n"),
    (b"  get   b  \r\n", b"VALUE b 9 2\r\nyy\r\nEND\r\n"),
    (b"get b\n", b"VALUE b 9 2\r\nyy\r\nEND\r\n"),
    (b"stats nonsense\r\n", b"ERROR\r\n"),
    (b"stats sizes\r\n", b"STAT sizes_status disabled\r\nEND\r\n"),
    (b"verbosity 1\r\n", b"OK\r\n"),
    (b"verbosity 1 2\r\n", b"OK\r\n"),
    (b"verbosity\r\n", b"ERROR\r\n"),
    (b"verbosity abc\r\n", b"CLIENT_ERROR bad command line format\r\n"),
    (b"version\r\n", b"VERSION 1.6.18-kura\r\n"),
    (b"flush_all abc\r\n", b"CLIENT_ERROR invalid exptime argument\r\n"),
    (b"flush_all 0\r\n", b"OK\r\n"),
    (b"get b\r\n", b"END\r\n"),
    (b"set b 0 0 1\r\nx\r\n", b"STORED\r\n"),
    (b"flush_all -1\r\n", b"OK\r\n"),
    (b"get b\r\n", b"END\r\n"),
    (b"mn\r\n", b"MN\r\n"),
    (b"cache_memlimit 50\r\n", b"OK\r\n"),
    (b"cache_memlimit abc\r\n", b"CLIENT_ERROR bad command line format\r\n"),
    (b"stats cachedump 1 1\r\n", b"END\r\n"),
];

#[test]
fn every_command_and_error_replies_as_memcached_does() {
    let server = start_default();
    let mut client = Client::connect(server.address);
    for (request, reply) in SCRIPT {
        client.send(request);
        client.expect(reply);
    }
}

#[test]
fn the_whole_script_pipelined_in_one_write_gives_the_same_replies_in_order() {
    let server = start_default();
    let mut client = Client::connect(server.address);
    let requests: Vec<u8> = SCRIPT.iter().flat_map(|(request, _)| request.iter().copied()).collect();
    let replies: Vec<u8> = SCRIPT.iter().flat_map(|(_, reply)| reply.iter().copied()).collect();
    client.roundtrip(&requests, &replies);
}

#[test]
fn noreply_never_answers_not_even_errors() {
    let server = start_default();
    let mut client = Client::connect(server.address);
    let long_key = "k".repeat(251);
    let quiet = [
        "set a 0 0 1 noreply\r\nx\r\n".to_string(),
        "add a 0 0 1 noreply\r\nx\r\n".into(),
        "replace nope 0 0 1 noreply\r\nx\r\n".into(),
        "append a 0 0 1 noreply\r\ny\r\n".into(),
        "prepend a 0 0 1 noreply\r\nw\r\n".into(),
        "cas a 0 0 1 1 noreply\r\nz\r\n".into(),
        "set b 0 0 1 noreply\r\nxyz\r\n".into(),
        format!("set {long_key} 0 0 1 noreply\r\nx\r\n"),
        "set c 0 0 2000000 noreply\r\n".to_string() + &"x".repeat(2_000_000) + "\r\n",
        "incr a 1 noreply\r\n".into(),
        "incr a abc noreply\r\n".into(),
        "decr nope 1 noreply\r\n".into(),
        "touch a 100 noreply\r\n".into(),
        "touch a abc noreply\r\n".into(),
        "delete nope noreply\r\n".into(),
        "delete nope 0 noreply\r\n".into(),
        "verbosity 1 noreply\r\n".into(),
        "flush_all 100 noreply\r\n".into(),
    ];
    for request in &quiet {
        client.send(request.as_bytes());
    }
    // The bad data chunk of `b` left `z\r\n`... no: it consumed exactly 1 + 2 bytes ("xyz"),
    // and the following "\r\n" is an empty line, which memcached answers ERROR too.
    client.roundtrip(b"get a\r\n", b"ERROR\r\nVALUE a 0 3\r\nwxy\r\nEND\r\n");
}

#[test]
fn keys_of_250_bytes_work_and_251_are_refused_without_desync() {
    let server = start_default();
    let mut client = Client::connect(server.address);
    let key = "k".repeat(250);
    client.roundtrip(format!("set {key} 0 0 1\r\nx\r\n").as_bytes(), b"STORED\r\n");
    client.roundtrip(format!("get {key}\r\n").as_bytes(), format!("VALUE {key} 0 1\r\nx\r\nEND\r\n").as_bytes());
    let long = "k".repeat(251);
    // Kura skips the data block of the refused command (memcached would read it as a command).
    client.roundtrip(format!("set {long} 0 0 1\r\nx\r\n").as_bytes(), b"CLIENT_ERROR bad command line format\r\n");
    client.roundtrip(format!("get a {long}\r\n").as_bytes(), b"CLIENT_ERROR bad command line format\r\n");
    client.roundtrip(b"get a\r\n", b"END\r\n");
}

/// memcached 1.6.18 stores a key of any bytes but space, CR and LF (a CR inside the line
/// included: only the one before the LF goes), and ends a line at a NUL.
#[test]
fn keys_hold_any_byte_but_space_cr_lf_and_a_nul_ends_the_line_as_in_memcached() {
    let server = start_default();
    let mut client = Client::connect(server.address);
    // memcaslap's keys: eight 0x10 bytes, then printable ones.
    let memcaslap = b"\x10\x10\x10\x10\x10\x10\x10\x10abc";
    client.roundtrip(&[&b"set "[..], memcaslap, b" 0 0 1\r\nx\r\n"].concat(), b"STORED\r\n");
    client.roundtrip(
        &[&b"get "[..], memcaslap, b"\r\n"].concat(),
        &[&b"VALUE "[..], memcaslap, b" 0 1\r\nx\r\nEND\r\n"].concat(),
    );
    for byte in (1..=255u8).filter(|b| ![b' ', b'\r', b'\n'].contains(b)) {
        let key = [b'k', byte, b'x'];
        client.roundtrip(&[&b"set "[..], &key, b" 0 0 1\r\n5\r\n"].concat(), b"STORED\r\n");
        client.roundtrip(&[&b"incr "[..], &key, b" 1\r\n"].concat(), b"6\r\n");
        client.roundtrip(&[&b"mg "[..], &key, b" k v\r\n"].concat(), &[&b"VA 1 k"[..], &key, b"\r\n6\r\n"].concat());
        client.roundtrip(&[&b"delete "[..], &key, b"\r\n"].concat(), b"DELETED\r\n");
    }
    client.roundtrip(b"delete a\x7f\r\n", b"NOT_FOUND\r\n");
    client.roundtrip(b"set a\tb 0 0 1\r\nx\r\n", b"STORED\r\n");
    client.roundtrip(b"get a\tb\r\n", b"VALUE a\tb 0 1\r\nx\r\nEND\r\n");
    client.roundtrip(b"get\ta\r\n", b"ERROR\r\n");
    client.roundtrip(b"set a\rb 0 0 1\r\nx\r\n", b"STORED\r\n");
    client.roundtrip(b"get a\rb\r\n", b"VALUE a\rb 0 1\r\nx\r\nEND\r\n");
    client.roundtrip(b"set cr\r 0 0 1\r\nx\r\n", b"STORED\r\n");
    client.roundtrip(b"get cr\r\r\n", b"VALUE cr\r 0 1\r\nx\r\nEND\r\n");
    client.roundtrip(b"get cr\r\r\r\n", b"END\r\n");
    // A NUL ends the line: the bytes after it, up to the LF, are not read.
    client.roundtrip(b"set a 0 0 1\r\nx\r\n", b"STORED\r\n");
    client.roundtrip(b"get a\x00 a\r\n", b"VALUE a 0 1\r\nx\r\nEND\r\n");
    client.roundtrip(b"get zzz\x00 a\r\n", b"END\r\n");
    client.roundtrip(b"\x00get a\r\n", b"ERROR\r\n");
    client.roundtrip(b"incr a\x00 1\r\n", b"ERROR\r\n");
    client.roundtrip(b"set b 0 0 1\x00junk\r\ny\r\n", b"STORED\r\n");
    client.roundtrip(b"mg b\x00 v\r\n", b"HD\r\n");
    client.roundtrip(b"delete b\x00 junk\r\n", b"DELETED\r\n");
    client.roundtrip(b"ms c\x002 T0\r\nxy\r\n", b"CLIENT_ERROR bad command line format\r\nERROR\r\n");
}

#[test]
fn an_item_at_the_size_limit_is_stored_and_one_byte_over_is_refused_dropping_the_old_value() {
    let server = start_default();
    let mut client = Client::connect(server.address);
    let limit = 1 << 20;
    let value = vec![b'v'; limit];
    let mut request = format!("set big 0 0 {limit}\r\n").into_bytes();
    request.extend_from_slice(&value);
    request.extend_from_slice(b"\r\n");
    client.roundtrip(&request, b"STORED\r\n");
    let mut reply = format!("VALUE big 0 {limit}\r\n").into_bytes();
    reply.extend_from_slice(&value);
    reply.extend_from_slice(b"\r\nEND\r\n");
    client.roundtrip(b"get big\r\n", &reply);
    // One byte over: refused, its data skipped, and the old value dropped (as memcached).
    let mut over = format!("set big 0 0 {}\r\n", limit + 1).into_bytes();
    over.extend_from_slice(&vec![b'w'; limit + 1]);
    over.extend_from_slice(b"\r\n");
    client.roundtrip(&over, b"SERVER_ERROR object too large for cache\r\n");
    client.roundtrip(b"get big\r\n", b"END\r\n");
    // Append past the limit: NOT_STORED, the value kept.
    client.roundtrip(b"set small 0 0 1\r\nx\r\n", b"STORED\r\n");
    let mut append = format!("append small 0 0 {limit}\r\n").into_bytes();
    append.extend_from_slice(&value);
    append.extend_from_slice(b"\r\n");
    client.roundtrip(&append, b"NOT_STORED\r\n");
    client.roundtrip(b"get small\r\n", b"VALUE small 0 1\r\nx\r\nEND\r\n");
}

#[test]
fn values_are_binary_safe() {
    let server = start_default();
    let mut client = Client::connect(server.address);
    let mut random = SplitMix64::new(7);
    for round in 0..50 {
        let length = usize::try_from(random.next_u64() % 3000).unwrap();
        let value: Vec<u8> = (0..length).map(|_| random.next_u64() as u8).collect();
        let mut request = format!("set bin{round} {round} 0 {length}\r\n").into_bytes();
        request.extend_from_slice(&value);
        request.extend_from_slice(b"\r\n");
        client.roundtrip(&request, b"STORED\r\n");
        let mut reply = format!("VALUE bin{round} {round} {length}\r\n").into_bytes();
        reply.extend_from_slice(&value);
        reply.extend_from_slice(b"\r\nEND\r\n");
        client.roundtrip(format!("get bin{round}\r\n").as_bytes(), &reply);
    }
}

#[test]
fn a_command_split_at_every_byte_position_is_understood() {
    let server = start_default();
    let request: &[u8] = b"set split 3 0 5\r\nab\r\nc\r\nget split\r\n";
    let reply: &[u8] = b"STORED\r\nVALUE split 3 5\r\nab\r\nc\r\nEND\r\n";
    for cut in 1..request.len() {
        let mut client = Client::connect(server.address);
        let (head, tail) = request.split_at(cut);
        client.send(head);
        std::thread::sleep(std::time::Duration::from_millis(2));
        client.send(tail);
        client.expect(reply);
    }
}

#[test]
fn cas_races_between_two_connections_let_exactly_one_win() {
    let server = start_default();
    let mut first = Client::connect(server.address);
    let mut second = Client::connect(server.address);
    first.roundtrip(b"set race 0 0 1\r\n0\r\n", b"STORED\r\n");
    for round in 0..20 {
        let cas_first = first.cas_of("race");
        let cas_second = second.cas_of("race");
        assert_eq!(cas_first, cas_second);
        first.roundtrip(format!("cas race 0 0 1 {cas_first}\r\na\r\n").as_bytes(), b"STORED\r\n");
        second.roundtrip(format!("cas race 0 0 1 {cas_second}\r\nb\r\n").as_bytes(), b"EXISTS\r\n");
        assert!(second.cas_of("race") > cas_second, "round {round}: a store gives a new CAS");
    }
    // Both at once, many times: the counter ends at exactly the number of wins.
    first.roundtrip(b"set counter 0 0 1\r\n0\r\n", b"STORED\r\n");
    let address = server.address;
    let workers: Vec<_> = (0..2)
        .map(|_| {
            std::thread::spawn(move || {
                let mut client = Client::connect(address);
                let mut wins = 0;
                for _ in 0..200 {
                    client.send(b"gets counter\r\n");
                    let header = String::from_utf8(client.line()).unwrap();
                    let cas: u64 = header.trim_end().rsplit(' ').next().unwrap().parse().unwrap();
                    let value: u64 = String::from_utf8(client.line()).unwrap().trim().parse().unwrap();
                    client.expect(b"END\r\n");
                    let next = (value + 1).to_string();
                    client.send(format!("cas counter 0 0 {} {cas}\r\n{next}\r\n", next.len()).as_bytes());
                    let outcome = client.line();
                    if outcome == b"STORED\r\n" {
                        wins += 1;
                    } else {
                        assert_eq!(outcome, b"EXISTS\r\n");
                    }
                }
                wins
            })
        })
        .collect();
    let wins: u64 = workers.into_iter().map(|w| w.join().unwrap()).sum();
    first.send(b"get counter\r\n");
    first.line();
    let value: u64 = String::from_utf8(first.line()).unwrap().trim().parse().unwrap();
    assert_eq!(value, wins);
}

#[test]
fn stats_count_what_happened() {
    let server = start_default();
    let mut client = Client::connect(server.address);
    client
        .roundtrip(b"set a 0 0 1\r\nx\r\nget a b\r\ndelete a\r\n", b"STORED\r\nVALUE a 0 1\r\nx\r\nEND\r\nDELETED\r\n");
    client.send(b"stats\r\n");
    let mut stats = std::collections::HashMap::new();
    loop {
        let line = String::from_utf8(client.line()).unwrap();
        if line == "END\r\n" {
            break;
        }
        let mut words = line.trim_end().splitn(3, ' ');
        assert_eq!(words.next(), Some("STAT"));
        stats.insert(words.next().unwrap().to_string(), words.next().unwrap().to_string());
    }
    for name in [
        "pid",
        "uptime",
        "time",
        "version",
        "curr_connections",
        "total_connections",
        "rejected_connections",
        "cmd_get",
        "cmd_set",
        "get_hits",
        "get_misses",
        "delete_hits",
        "delete_misses",
        "incr_hits",
        "incr_misses",
        "cas_hits",
        "cas_misses",
        "cas_badval",
        "touch_hits",
        "touch_misses",
        "evictions",
        "curr_items",
        "total_items",
        "bytes",
        "limit_maxbytes",
        "threads",
    ] {
        assert!(stats.contains_key(name), "stats lacks {name}");
    }
    assert_eq!(stats["cmd_get"], "2");
    assert_eq!(stats["get_hits"], "1");
    assert_eq!(stats["get_misses"], "1");
    assert_eq!(stats["cmd_set"], "1");
    assert_eq!(stats["delete_hits"], "1");
    assert_eq!(stats["curr_items"], "0");
    assert_eq!(stats["curr_connections"], "1");
    client.send(b"stats settings\r\n");
    let mut settings = Vec::new();
    while settings.last().is_none_or(|l: &Vec<u8>| l != b"END\r\n") {
        settings.push(client.line());
    }
    assert!(settings.contains(&b"STAT item_size_max 1048576\r\n".to_vec()));
    client.roundtrip(b"quit\r\n", b"");
    assert!(client.closed());
}

#[test]
fn a_model_of_random_commands_agrees_with_a_map() {
    let server = start_default();
    let mut client = Client::connect(server.address);
    let mut model = std::collections::BTreeMap::<String, (u32, Vec<u8>)>::new();
    let mut random = SplitMix64::new(17);
    for _ in 0..2000 {
        let key = format!("m{}", random.next_u64() % 30);
        let flags = (random.next_u64() % 5) as u32;
        let value = format!("{}", random.next_u64() % 1000).into_bytes();
        let present = model.contains_key(&key);
        match random.next_u64() % 6 {
            0 => {
                client.send(format!("set {key} {flags} 0 {}\r\n", value.len()).as_bytes());
                client.roundtrip(&[&value[..], b"\r\n"].concat(), b"STORED\r\n");
                model.insert(key, (flags, value));
            }
            1 => {
                client.send(format!("add {key} {flags} 0 {}\r\n", value.len()).as_bytes());
                client.roundtrip(
                    &[&value[..], b"\r\n"].concat(),
                    if present { b"NOT_STORED\r\n" } else { b"STORED\r\n" },
                );
                model.entry(key).or_insert((flags, value));
            }
            2 => {
                client.send(format!("append {key} {flags} 0 {}\r\n", value.len()).as_bytes());
                client.roundtrip(
                    &[&value[..], b"\r\n"].concat(),
                    if present { b"STORED\r\n" } else { b"NOT_STORED\r\n" },
                );
                if let Some((_, old)) = model.get_mut(&key) {
                    old.extend_from_slice(&value);
                }
            }
            3 => {
                client.roundtrip(
                    format!("delete {key}\r\n").as_bytes(),
                    if present { b"DELETED\r\n" } else { b"NOT_FOUND\r\n" },
                );
                model.remove(&key);
            }
            _ => {
                let expected = match model.get(&key) {
                    Some((flags, value)) => {
                        [format!("VALUE {key} {flags} {}\r\n", value.len()).as_bytes(), value, b"\r\nEND\r\n"].concat()
                    }
                    None => b"END\r\n".to_vec(),
                };
                client.roundtrip(format!("get {key}\r\n").as_bytes(), &expected);
            }
        }
    }
}

/// Meta commands, each reply checked against memcached 1.6.18 on loopback.
const META_SCRIPT: &[(&[u8], &[u8])] = &[
    (b"ms mk 2 F5 T0\r\nhi\r\n", b"HD\r\n"),
    (b"mg mk v f s t k O123\r\n", b"VA 2 f5 s2 t-1 kmk O123\r\nhi\r\n"),
    (b"mg mk\r\n", b"HD\r\n"),
    (b"mg nope v\r\n", b"EN\r\n"),
    (b"mg nope v q\r\nmn\r\n", b"MN\r\n"),
    (b"ms mk 2 C999999\r\nxx\r\n", b"EX\r\n"),
    (b"ms mk 2 ME\r\nxx\r\n", b"NS\r\n"),
    (b"ms new 2 MA\r\nxx\r\n", b"NS\r\n"),
    (b"ms mk 2 MA\r\nzz\r\n", b"HD\r\n"),
    (b"mg mk v\r\n", b"VA 4\r\nhizz\r\n"),
    (b"ms mk 2 q\r\nqq\r\nmn\r\n", b"MN\r\n"),
    (b"md mk\r\n", b"HD\r\n"),
    (b"md mk\r\n", b"NF\r\n"),
    (b"md mk q\r\n", b"NF\r\n"),
    (b"ma cnt\r\n", b"NF\r\n"),
    (b"ma cnt N0 J10\r\n", b"HD\r\n"),
    (b"ma cnt v\r\n", b"VA 2\r\n11\r\n"),
    (b"ma cnt D5 MD v\r\n", b"VA 1\r\n6\r\n"),
    (b"ma cnt v t\r\n", b"VA 1 t-1\r\n7\r\n"),
    (b"ma cnt q\r\nmn\r\n", b"MN\r\n"),
    (b"ms a2Vr 1 b\r\nx\r\n", b"HD\r\n"),
    (b"mg a2Vr b k v\r\n", b"VA 1 ka2Vr b\r\nx\r\n"),
    (b"mg key v\r\n", b"EN\r\n"),
    (b"mg !!! b v\r\n", b"CLIENT_ERROR error decoding key\r\n"),
    (b"mg mk zz\r\n", b"CLIENT_ERROR invalid flag\r\n"),
    (b"mg\r\n", b"ERROR\r\n"),
    (b"ms mk\r\n", b"CLIENT_ERROR bad command line format\r\n"),
    (b"ms mk abc\r\n", b"CLIENT_ERROR bad command line format\r\n"),
    (b"ms t 1 T100\r\nx\r\n", b"HD\r\n"),
    (b"mg t T-1 v\r\n", b"VA 1\r\nx\r\n"),
    (b"mg t v\r\n", b"EN\r\n"),
    (b"ms c 1 MX\r\nx\r\nmn\r\n", b"CLIENT_ERROR invalid mode for ms M token\r\nMN\r\n"),
    (b"ms s 1\r\nx\r\n", b"HD\r\n"),
    (b"ma s\r\n", b"CLIENT_ERROR cannot increment or decrement non-numeric value\r\n"),
];

/// Stale items and win tokens (`mg N R`, `md I`, `ms I`, the `W X Z` flags), each reply
/// checked against memcached 1.6.18 on loopback (no `c` or `t` but `t-1`: CAS values and
/// remaining seconds depend on what ran before and on the clock).
const STALE_SCRIPT: &[(&[u8], &[u8])] = &[
    // Vivify on miss: an empty item, the first client wins, the next ones see Z.
    (b"mg nk v N30\r\n", b"VA 0 W\r\n\r\n"),
    (b"mg nk v N30\r\n", b"VA 0 Z\r\n\r\n"),
    (b"mg nk v s f\r\n", b"VA 0 s0 f0 Z\r\n\r\n"),
    (b"mg vv k O5 N30 v q\r\n", b"VA 0 kvv O5 W\r\n\r\n"),
    (b"mg vv k O5 N30 v q\r\n", b"VA 0 kvv O5 Z\r\n\r\n"),
    // A set replaces the vivified item: no flags any more.
    (b"ms nk 2 T60\r\nhi\r\n", b"HD\r\n"),
    (b"mg nk v\r\n", b"VA 2\r\nhi\r\n"),
    // Invalidate: the item stays, stale; one client wins, the others see Z X.
    (b"md nk I T30\r\n", b"HD\r\n"),
    (b"mg nk v\r\n", b"VA 2 X W\r\nhi\r\n"),
    (b"mg nk v\r\n", b"VA 2 Z X\r\nhi\r\n"),
    (b"mg nk k O7 s\r\n", b"HD knk O7 s2 Z X\r\n"),
    (b"ms nk 3 I\r\nnew\r\n", b"HD\r\n"),
    (b"mg nk v\r\n", b"VA 3\r\nnew\r\n"),
    (b"ms nk 3 C999999 I\r\nold\r\n", b"EX\r\n"),
    (b"mg nk v\r\n", b"VA 3\r\nnew\r\n"),
    (b"md vv I T0\r\n", b"HD\r\n"),
    (b"mg vv v t\r\n", b"VA 0 t-1 X W\r\n\r\n"),
    (b"md gone I\r\n", b"NF\r\n"),
    (b"md gone I q\r\n", b"NF\r\n"),
    // Recache: an item expiring sooner than R seconds wins once.
    (b"ms rk 2 T10\r\nhi\r\n", b"HD\r\n"),
    (b"mg rk R30 v\r\n", b"VA 2 W\r\nhi\r\n"),
    (b"mg rk R30 v\r\n", b"VA 2 Z\r\nhi\r\n"),
    (b"ms rk 2 T0\r\nhi\r\n", b"HD\r\n"),
    (b"mg rk R30 v t\r\n", b"VA 2 t-1\r\nhi\r\n"),
    (b"mg rk2 N30 R10 v\r\n", b"VA 0 W\r\n\r\n"),
    (b"mg rk2 N30 R10 v\r\n", b"VA 0 Z\r\n\r\n"),
    // Return flags in the order asked, k and O among them.
    (b"mg rk k v O77 s\r\n", b"VA 2 krk O77 s2\r\nhi\r\n"),
];

#[test]
fn stale_items_and_win_tokens_reply_as_memcached_does() {
    let server = start_default();
    let mut client = Client::connect(server.address);
    for (request, reply) in STALE_SCRIPT {
        client.roundtrip(request, reply);
    }
    // `ms I` with an older CAS stores, marked stale; `md I` with a wrong CAS is EX.
    let cas = client.cas_of("rk");
    client.roundtrip(b"ms rk 3\r\nnew\r\n", b"HD\r\n");
    client.roundtrip(format!("ms rk 3 C{cas} I\r\nold\r\n").as_bytes(), b"HD\r\n");
    client.roundtrip(b"mg rk v\r\n", b"VA 3 X W\r\nold\r\n");
    client.roundtrip(format!("md rk C{cas} I\r\n").as_bytes(), b"EX\r\n");
    // Two clients race for the win of one stale item: exactly one gets W.
    client.roundtrip(b"md rk I\r\n", b"HD\r\n");
    let mut other = Client::connect(server.address);
    client.send(b"mg rk\r\n");
    other.send(b"mg rk\r\n");
    let replies = [client.line(), other.line()];
    let wins = replies.iter().filter(|r| r.as_slice() == b"HD X W\r\n").count();
    let losses = replies.iter().filter(|r| r.as_slice() == b"HD Z X\r\n").count();
    assert_eq!((wins, losses), (1, 1), "{replies:?}");
    // Flags that need the last access time stay refused (see docs/server.md).
    for flag in ["h", "l", "u", "E5"] {
        client.roundtrip(format!("mg rk {flag}\r\n").as_bytes(), b"CLIENT_ERROR invalid flag\r\n");
    }
}

#[test]
fn meta_commands_reply_as_memcached_does() {
    let server = start_default();
    let mut client = Client::connect(server.address);
    for (request, reply) in META_SCRIPT {
        client.roundtrip(request, reply);
    }
    // CAS through meta: `ms c` returns it, `ms C` compares it, `md C` too.
    client.send(b"ms x 1 c\r\na\r\n");
    let line = String::from_utf8(client.line()).unwrap();
    let cas: u64 = line.trim_end().strip_prefix("HD c").unwrap().parse().unwrap();
    client.roundtrip(format!("ms x 1 C{}\r\nb\r\n", cas + 1).as_bytes(), b"EX\r\n");
    client.roundtrip(format!("ms x 1 C{cas}\r\nb\r\n").as_bytes(), b"HD\r\n");
    client.roundtrip(format!("md x C{cas}\r\n").as_bytes(), b"EX\r\n");
    let cas = client.cas_of("x");
    client.roundtrip(format!("md x C{cas}\r\n").as_bytes(), b"HD\r\n");
    // Too large: refused and its data skipped.
    let mut big = b"ms big 1048577\r\n".to_vec();
    big.extend_from_slice(&vec![b'x'; 1_048_577]);
    big.extend_from_slice(b"\r\nmn\r\n");
    client.roundtrip(&big, b"SERVER_ERROR object too large for cache\r\nMN\r\n");
}

#[test]
fn a_write_that_fails_consumes_no_cas_unique_as_in_memcached() {
    let server = start_default();
    let mut client = Client::connect(server.address);
    client.roundtrip(b"set a 0 0 1\r\nx\r\n", b"STORED\r\n");
    let first = client.cas_of("a");
    client.roundtrip(b"cas a 0 0 1 999999\r\ny\r\n", b"EXISTS\r\n");
    client.roundtrip(b"add a 0 0 1\r\ny\r\n", b"NOT_STORED\r\n");
    client.roundtrip(b"incr missing 1\r\n", b"NOT_FOUND\r\n");
    client.roundtrip(b"md missing I\r\n", b"NF\r\n");
    client.roundtrip(b"set b 0 0 1\r\nx\r\n", b"STORED\r\n");
    assert_eq!(client.cas_of("b"), first + 1);
}

/// A multi-get whose values outweigh the reply buffer many times over, on an engine that
/// shows values in the keys' order (the cache) and on one that shows them in sorted order
/// (TreeDbm), with repeated and missing keys: the replies come whole and in the request's
/// order, however the server cuts the batch to keep its buffer bounded.
#[test]
fn a_multi_get_heavier_than_the_reply_buffer_answers_every_key_in_order() {
    let dir = tempfile::tempdir().unwrap();
    for db in [support::cache(), support::tree(dir.path())] {
        let config = kura_server::Config { output_flush_bytes: 4096, ..kura_server::Config::default() };
        let server = support::start(config, db);
        let mut client = Client::connect(server.address);
        let mut random = SplitMix64::new(77);
        let mut values = std::collections::HashMap::new();
        for i in 0..150u64 {
            let key = format!("k{:03}", (i * 37) % 150);
            let value = vec![b'a' + (i % 26) as u8; 1 + random.below(3000) as usize];
            let mut request = format!("set {key} {i} 0 {}\r\n", value.len()).into_bytes();
            request.extend_from_slice(&value);
            request.extend_from_slice(b"\r\n");
            client.roundtrip(&request, b"STORED\r\n");
            values.insert(key, (i, value));
        }
        let keys: Vec<String> = (0..200u64).map(|_| format!("k{:03}", random.below(170))).collect();
        let mut expected = Vec::new();
        for key in &keys {
            if let Some((flags, value)) = values.get(key) {
                expected.extend_from_slice(format!("VALUE {key} {flags} {}\r\n", value.len()).as_bytes());
                expected.extend_from_slice(value);
                expected.extend_from_slice(b"\r\n");
            }
        }
        expected.extend_from_slice(b"END\r\n");
        client.roundtrip(format!("get {}\r\n", keys.join(" ")).as_bytes(), &expected);
    }
}

/// Items that never expire, then items with a one-second time to live that fill a small
/// cache and expire, then more items that never expire, the two sets together well within
/// what the cache holds: every one of them stays. The default engine (SegCacheDbm) knows each
/// item's expiry and reclaims the expired items' segments before it evicts a live item, where
/// CLOCK alone would compact the oldest segment, the first items', never read.
#[test]
fn expired_items_make_room_before_live_ones_are_evicted() {
    let cap = 128u64 << 10;
    let params = kura::Params::new().with("cap_rec_num", 100_000).with("cap_mem_bytes", cap).with("num_slots", 2);
    let engine = kura::registry::engine("segcache").unwrap();
    let db: std::sync::Arc<dyn kura::Dbm> =
        std::sync::Arc::from(engine.open(std::path::Path::new(""), kura::OpenMode::Create, &params).unwrap());
    let server = support::start(kura_server::Config::default(), db.clone());
    let mut client = Client::connect(server.address);
    let value = "v".repeat(100);
    let mut set = |key: &str, exptime: u32| {
        client.roundtrip(format!("set {key} 0 {exptime} 100\r\n{value}\r\n").as_bytes(), b"STORED\r\n");
    };
    let first: Vec<String> = (0..60).map(|i| format!("first{i}")).collect();
    let later: Vec<String> = (0..200).map(|i| format!("later{i}")).collect();
    first.iter().for_each(|key| set(key, 0));
    let mut short = 0;
    while db.file_size().unwrap() + 4_096 < cap {
        set(&format!("short{short}"), 1);
        short += 1;
    }
    assert!(short > 500, "{short} short-lived items fill the cache");
    // Every short-lived item expires at most one second after the last was written.
    let unix_now = || std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    let written = unix_now();
    while unix_now() <= written + 1 {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    later.iter().for_each(|key| set(key, 0));
    let stats = db.inspect().unwrap();
    assert_eq!(stats.caps.map(|caps| caps.evictions), Some(0), "a live item was evicted while expired ones were left");
    assert!(stats.number("expired").unwrap() > 0);
    for key in first.iter().chain(&later) {
        client.roundtrip(
            format!("get {key}\r\n").as_bytes(),
            format!("VALUE {key} 0 100\r\n{value}\r\nEND\r\n").as_bytes(),
        );
    }
    client.roundtrip(b"get short0\r\n", b"END\r\n");
}

/// A served file's CAS uniques are never handed out twice across restarts, however soon one
/// follows another (four runs within a second or so here) and whatever keys each run
/// rewrites: every run starts above the highest unique its items hold. (Starting from the
/// clock's second, as servers before this did, hands a second run within the same second
/// the uniques the first handed out.)
#[test]
fn cas_uniques_stay_unique_across_quick_restarts_of_a_served_file() {
    let dir = tempfile::tempdir().unwrap();
    let mut handed_out = std::collections::HashSet::new();
    let mut random = SplitMix64::new(41);
    for run in 0..4 {
        let server = support::start(kura_server::Config::default(), support::tree(dir.path()));
        let mut client = Client::connect(server.address);
        let highest_before = handed_out.iter().copied().max().unwrap_or(0);
        for _ in 0..40 {
            let key = format!("key{}", random.next_u64() % 50);
            client.roundtrip(format!("set {key} 0 0 1\r\nx\r\n").as_bytes(), b"STORED\r\n");
            let cas = client.cas_of(&key);
            assert!(handed_out.insert(cas), "run {run}: CAS unique {cas} was handed out before");
            assert!(cas > highest_before, "run {run}: CAS unique {cas} not above {highest_before}");
        }
        drop(client);
        drop(server);
    }
}
