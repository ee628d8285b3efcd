//! Times the lz4 codec's decoder alone, value by value, on dictionary values: Kura's decode
//! before liblz4 (the frame header, then lz4_flex's safe decoder into a zeroed buffer) against
//! `Codec::decode` now (the same header, then liblz4's `LZ4_decompress_safe`), on the same
//! frames, taking turns round after round so that a neighbour's load hits both alike.
//!
//! Two sets each round: every value loaded (100,000 by default, 35 MB of frames, beyond the
//! caches, as a get meets them) and the first 1,000 decoded 100 times over (in the caches:
//! the decoders' own speed). Prints each round and the medians.
//!
//! Run: `cargo run --release -p kura-bench --bin lz4_decode -- [TSV] [VALUES] [ROUNDS]`, where
//! TSV is `key<TAB>value` lines (default bench/data/dictionary.tsv, which `make dictionary`
//! makes; English-like text is generated when there is none).

use std::io::Write;
use std::time::Instant;

use kura::codec::{liblz4_version, Codec, CodecKind, Effort, MAX_RATIO};
use kura::encoding::decode_varint;
use kura::split_mix::SplitMix64;

const HOT_VALUES: usize = 1_000;
const HOT_REPEAT: usize = 100;

fn main() -> kura::Result<()> {
    let mut args = std::env::args().skip(1);
    let path = args.next().unwrap_or_else(|| "bench/data/dictionary.tsv".to_string());
    let count: usize = args.next().and_then(|n| n.parse().ok()).unwrap_or(100_000);
    let rounds: usize = args.next().and_then(|n| n.parse().ok()).unwrap_or(15);

    let (values, source) = match std::fs::read(&path) {
        Ok(text) => (tsv_values(&text, count), path),
        Err(_) => (generated_values(count), "generated English-like text".to_string()),
    };
    let codec = Codec::new(CodecKind::Lz4, Vec::new())?;
    let mut frames = Vec::with_capacity(values.len());
    for value in &values {
        let mut frame = Vec::new();
        if codec.encode(value, Effort::Dense, &mut frame)? {
            frames.push(frame);
        }
    }
    let raw: usize = values.iter().map(Vec::len).sum();
    let stored: usize = frames.iter().map(Vec::len).sum();
    let mut old = Vec::new();
    let mut new = Vec::new();
    for frame in &frames {
        old_decode(frame, &mut old)?;
        codec.decode(frame, true, &mut new)?;
        assert!(old == new, "the two decoders disagree");
    }
    let hot = frames.get(..HOT_VALUES.min(frames.len())).unwrap_or_default();
    let mut out = std::io::stdout().lock();
    let _ = writeln!(
        out,
        "{} values from {source}: {} compressed, {:.1} bytes raw and {:.1} stored on average; liblz4 {}",
        values.len(),
        frames.len(),
        raw as f64 / values.len().max(1) as f64,
        stored as f64 / frames.len().max(1) as f64,
        liblz4_version()
    );

    // [all values, hot set] x [old, new], ns per decode, one entry per round.
    let mut times = [[Vec::new(), Vec::new()], [Vec::new(), Vec::new()]];
    let mut buffer = Vec::new();
    for round in 0..rounds {
        for set in 0..2 {
            let (set_frames, repeat) = if set == 0 { (frames.as_slice(), 1) } else { (hot, HOT_REPEAT) };
            let decodes = (set_frames.len() * repeat).max(1) as f64;
            for turn in 0..2 {
                // Even rounds start with the old decoder, odd ones with the new.
                let which = (turn + round) % 2;
                let mut bytes = 0usize;
                let started = Instant::now();
                for _ in 0..repeat {
                    for frame in set_frames {
                        if which == 0 {
                            old_decode(frame, &mut buffer)?;
                        } else {
                            codec.decode(frame, true, &mut buffer)?;
                        }
                        bytes += std::hint::black_box(&buffer).len();
                    }
                }
                let elapsed = started.elapsed().as_nanos() as f64 / decodes;
                std::hint::black_box(bytes);
                if let Some(list) = times.get_mut(set).and_then(|pair| pair.get_mut(which)) {
                    list.push(elapsed);
                }
            }
        }
        let last = |set: usize, which: usize| {
            times.get(set).and_then(|pair| pair.get(which)).and_then(|list| list.last()).copied().unwrap_or(0.0)
        };
        let _ = writeln!(
            out,
            "round {:2}: all values lz4_flex {:6.1} ns, liblz4 {:6.1} ns | hot {} lz4_flex {:6.1} ns, liblz4 {:6.1} ns",
            round + 1,
            last(0, 0),
            last(0, 1),
            hot.len(),
            last(1, 0),
            last(1, 1)
        );
    }
    for (set, name) in [(0, "all values"), (1, "hot set")] {
        let old = median(times.get(set).and_then(|pair| pair.first()));
        let new = median(times.get(set).and_then(|pair| pair.get(1)));
        let _ = writeln!(
            out,
            "median of {rounds} rounds, {name}: lz4_flex {old:.1} ns, liblz4 {new:.1} ns a decode ({:.2}x the time)",
            new / old
        );
    }
    Ok(())
}

/// `Codec::decode` of an lz4 frame as it was before liblz4: the same checks, then lz4_flex
/// decoding into a buffer zeroed to the claimed length.
fn old_decode(stored: &[u8], out: &mut Vec<u8>) -> kura::Result<()> {
    out.clear();
    let (raw_len, header_len) = decode_varint(stored).ok_or_else(|| kura::Error::broken("truncated header"))?;
    let body = stored.get(header_len..).unwrap_or_default();
    let raw_len = usize::try_from(raw_len).map_err(|_| kura::Error::broken("impossible raw length"))?;
    if raw_len == 0 || raw_len > stored.len().saturating_mul(MAX_RATIO) {
        return Err(kura::Error::broken("impossible raw length"));
    }
    out.reserve_exact(raw_len);
    out.resize(raw_len, 0);
    let written = lz4_flex::block::decompress_into(body, out.as_mut_slice())
        .map_err(|e| kura::Error::broken(format!("corrupted lz4 frame: {e}")))?;
    out.truncate(written);
    if out.len() != raw_len {
        return Err(kura::Error::broken("lz4 frame of the wrong length"));
    }
    Ok(())
}

fn median(list: Option<&Vec<f64>>) -> f64 {
    let mut sorted = list.cloned().unwrap_or_default();
    sorted.sort_by(f64::total_cmp);
    sorted.get(sorted.len() / 2).copied().unwrap_or(f64::NAN)
}

/// The values of the first `count` lines of a `key<TAB>value` file.
fn tsv_values(text: &[u8], count: usize) -> Vec<Vec<u8>> {
    text.split(|&byte| byte == b'\n')
        .filter_map(|line| {
            let tab = line.iter().position(|&byte| byte == b'\t')?;
            line.get(tab + 1..).map(<[u8]>::to_vec)
        })
        .filter(|value| !value.is_empty())
        .take(count)
        .collect()
}

/// `count` JSON-ish definitions of about 540 bytes, drawn from a small vocabulary as the
/// dictionary's glosses are.
fn generated_values(count: usize) -> Vec<Vec<u8>> {
    const WORDS: &[&str] = &[
        "a",
        "the",
        "of",
        "to",
        "in",
        "or",
        "and",
        "that",
        "which",
        "is",
        "used",
        "for",
        "with",
        "person",
        "small",
        "large",
        "water",
        "plant",
        "animal",
        "having",
        "being",
        "state",
        "quality",
        "act",
        "make",
        "move",
        "cause",
        "part",
        "body",
        "something",
        "especially",
        "form",
        "light",
        "place",
        "time",
        "family",
        "genus",
        "tree",
    ];
    let mut rng = SplitMix64::new(542);
    let mut pick = move || WORDS.get((rng.next_u64() % WORDS.len() as u64) as usize).copied().unwrap_or("a");
    (0..count)
        .map(|i| {
            let mut value = format!("[{{\"word\":\"{}\",\"item\":[", pick());
            while value.len() < 520 {
                value.push_str("{\"label\":\"wn\",\"pos\":\"noun\",\"text\":\"");
                for _ in 0..12 {
                    value.push_str(pick());
                    value.push(' ');
                }
                value.push_str("\"},");
            }
            value.push_str(&format!("],\"id\":{i}}}]"));
            value.into_bytes()
        })
        .collect()
}
