//! The density benchmark's data sets: generated ones written as TSV (so that every
//! contender, in Rust, C++ or Python, loads the same bytes) and any TSV read back.

use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::Path;

use kura::split_mix::SplitMix64;
use kura::{Error, Result};

pub type Records = Vec<(Vec<u8>, Vec<u8>)>;

/// Writes `records` records of `kind` to `out`: `short` (12-byte keys, 20-60 byte values of
/// a session store: ids, expiry times, a role and a region) or `seq` (Tkrzw's perf workload:
/// key and value both the `%08d` sequence number).
pub fn generate(kind: &str, records: u64, out: &Path) -> Result<()> {
    let file = std::fs::File::create(out).map_err(|e| Error::io(format!("create {}", out.display()), e))?;
    let mut writer = BufWriter::with_capacity(1 << 20, file);
    let mut rng = SplitMix64::new(0x636f_6d70);
    let roles = ["user", "admin", "guest", "editor", "viewer"];
    let regions = ["tokyo", "osaka", "us-east", "eu-west", "sydney", "paris"];
    for i in 0..records {
        let line = match kind {
            "short" => {
                // An odd multiplier is a bijection modulo 2^44: distinct keys that look random.
                let key = format!("s{:011x}", i.wrapping_mul(0x9e37_79b9_7f4a_7c15) & 0xfff_ffff_ffff);
                let mut value = format!(
                    "u={};e={};r={}",
                    rng.below(10_000_000),
                    1_700_000_000 + rng.below(10_000_000),
                    roles.get(rng.below(roles.len() as u64) as usize).copied().unwrap_or("user")
                );
                if rng.below(2) == 0 {
                    value.push_str(";g=");
                    value.push_str(regions.get(rng.below(regions.len() as u64) as usize).copied().unwrap_or("tokyo"));
                }
                if rng.below(3) == 0 {
                    value.push_str(&format!(";n={}", rng.below(1_000_000_000)));
                }
                format!("{key}\t{value}\n")
            }
            "seq" => format!("{i:08}\t{i:08}\n"),
            other => return Err(Error::invalid(format!("unknown data set kind {other:?} (short, seq)"))),
        };
        writer.write_all(line.as_bytes()).map_err(|e| Error::io("write the data set", e))?;
    }
    writer.flush().map_err(|e| Error::io("write the data set", e))
}

/// The records of a TSV file (first tab splits key and value), at most `limit` of them.
pub fn load(path: &Path, limit: u64) -> Result<Records> {
    let file = std::fs::File::open(path).map_err(|e| Error::io(format!("open {}", path.display()), e))?;
    let mut records = Vec::new();
    for line in BufReader::with_capacity(1 << 20, file).split(b'\n') {
        if records.len() as u64 >= limit {
            break;
        }
        let line = line.map_err(|e| Error::io(format!("read {}", path.display()), e))?;
        if let Some(tab) = line.iter().position(|&b| b == b'\t') {
            let (key, value) = line.split_at(tab);
            records.push((key.to_vec(), value.get(1..).unwrap_or_default().to_vec()));
        }
    }
    records.shrink_to_fit();
    Ok(records)
}
