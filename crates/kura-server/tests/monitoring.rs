//! `stats items`, `stats slabs` and `stats sizes` as monitoring tools read them: the same
//! fields in the same order as memcached 1.6.18 (compared with a running memcached when one is
//! installed), and Debian's `memcached-tool` (a perl script of the `memcached` package) run
//! against the server without an error, showing the items.
#![expect(
    clippy::unwrap_used,
    clippy::indexing_slicing,
    reason = "a test fails loudly on the first broken expectation"
)]

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use support::{start_default, Client};

const MEMCACHED_TOOL: &str = "/usr/share/memcached/scripts/memcached-tool";

fn start_memcached() -> Option<support::memcached::Memcached> {
    support::memcached::start(&["-t", "1"])
}

/// Sends `request` and reads its reply up to and including `END\r\n`.
fn ask(stream: &mut TcpStream, request: &[u8]) -> String {
    stream.write_all(request).unwrap();
    let mut reply = Vec::new();
    let mut chunk = [0u8; 4096];
    while !reply.ends_with(b"END\r\n") {
        let n = stream.read(&mut chunk).unwrap();
        assert!(n > 0, "closed before END: {}", String::from_utf8_lossy(&reply));
        reply.extend_from_slice(&chunk[..n]);
    }
    String::from_utf8(reply).unwrap()
}

/// The field names of a stats reply, in order (`STAT items:1:number 3` gives `items:1:number`).
fn names(reply: &str) -> Vec<&str> {
    reply.lines().filter_map(|line| line.strip_prefix("STAT ")).filter_map(|l| l.split(' ').next()).collect()
}

const ITEMS: &[u8] = b"set a 0 0 3\r\nabc\r\nset b 0 0 5\r\nhello\r\nset c 0 0 1\r\nx\r\nget a b\r\n";

#[test]
fn items_slabs_and_sizes_list_memcached_s_fields_in_its_order() {
    let server = start_default();
    let mut kura = TcpStream::connect(server.address).unwrap();
    kura.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    // Empty: no class at all, as memcached.
    assert_eq!(ask(&mut kura, b"stats items\r\n"), "END\r\n");
    assert_eq!(ask(&mut kura, b"stats slabs\r\n"), "STAT active_slabs 0\r\nSTAT total_malloced 0\r\nEND\r\n");
    assert_eq!(ask(&mut kura, b"stats sizes\r\n"), "STAT sizes_status disabled\r\nEND\r\n");
    ask(&mut kura, ITEMS);
    let items = ask(&mut kura, b"stats items\r\n");
    let slabs = ask(&mut kura, b"stats slabs\r\n");
    assert!(items.starts_with("STAT items:1:number 3\r\n"), "{items}");
    assert!(items.contains("STAT items:1:hits_to_cold 2\r\n"), "{items}");
    assert!(slabs.contains("STAT 1:used_chunks 3\r\n") && slabs.contains("STAT 1:get_hits 2\r\n"), "{slabs}");
    assert!(slabs.contains("STAT 1:cmd_set 3\r\nSTAT 1:delete_hits 0\r\n"), "{slabs}");
    assert!(slabs.contains("STAT active_slabs 1\r\n"), "{slabs}");

    let Some(memcached) = start_memcached() else {
        println!("skipped the comparison: memcached is absent (Debian package memcached)");
        return;
    };
    let mut model = TcpStream::connect(("127.0.0.1", memcached.port)).unwrap();
    model.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    assert_eq!(ask(&mut model, b"stats items\r\n"), "END\r\n");
    ask(&mut model, ITEMS);
    // The three small items share memcached's class 1 too.
    assert_eq!(names(&items), names(&ask(&mut model, b"stats items\r\n")));
    assert_eq!(names(&slabs), names(&ask(&mut model, b"stats slabs\r\n")));
    assert_eq!(ask(&mut kura, b"stats sizes\r\n"), ask(&mut model, b"stats sizes\r\n"));
}

/// Runs `memcached-tool ADDRESS MODE`; None (with a note) when perl or the script is missing.
fn memcached_tool(address: &str, mode: &str) -> Option<String> {
    if !Path::new(MEMCACHED_TOOL).exists() || !Path::new("/usr/bin/perl").exists() {
        println!("skipped: {MEMCACHED_TOOL} or perl is absent (Debian package memcached)");
        return None;
    }
    let output = Command::new("/usr/bin/perl").args([MEMCACHED_TOOL, address, mode]).output().unwrap();
    let (stdout, stderr) = (String::from_utf8(output.stdout).unwrap(), String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "memcached-tool {mode} failed: {stdout}{stderr}");
    assert!(stderr.is_empty(), "memcached-tool {mode} complained: {stderr}");
    Some(stdout)
}

#[test]
fn memcached_tool_display_and_stats_show_the_items() {
    let server = start_default();
    let mut client = Client::connect(server.address);
    client.roundtrip(ITEMS, b"STORED\r\nSTORED\r\nSTORED\r\nVALUE a 0 3\r\nabc\r\nVALUE b 0 5\r\nhello\r\nEND\r\n");
    let address = server.address.to_string();
    let Some(display) = memcached_tool(&address, "display") else { return };
    let mut lines = display.lines();
    assert!(lines.next().unwrap().contains("Item_Size  Max_age   Pages   Count   Full?"), "{display}");
    // `  1      NNB         0s       1       3      no        0        0    0`
    let class: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(class.first(), Some(&"1"), "{display}");
    assert_eq!(class.get(4), Some(&"3"), "the count of items: {display}");
    assert_eq!(class.get(5), Some(&"no"), "not full: {display}");
    assert_eq!(lines.next(), None, "{display}");

    let stats = memcached_tool(&address, "stats").unwrap();
    let field = |name: &str| {
        stats.lines().find_map(|line| {
            let mut words = line.split_whitespace();
            (words.next() == Some(name)).then(|| words.next().unwrap().to_string())
        })
    };
    assert_eq!(field("curr_items").as_deref(), Some("3"), "{stats}");
    assert_eq!(field("get_hits").as_deref(), Some("2"), "{stats}");
    let sizes = memcached_tool(&address, "sizes").unwrap();
    assert!(sizes.contains("sizes_status"), "{sizes}");
}
