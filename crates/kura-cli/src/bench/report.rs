//! How a phase's figures are printed: Tkrzw-style lines for people, JSON lines for scripts.

use std::time::Duration;

use serde_json::json;

use crate::commands::print_line;

/// The figures of one timed phase.
pub struct Phase<'a> {
    pub engine: &'a str,
    pub name: &'static str,
    pub threads: usize,
    /// Operations timed (all threads together).
    pub operations: u64,
    /// Records in the database after the phase.
    pub records: u64,
    pub elapsed: Duration,
    pub file_size: u64,
    /// Gets that found no record.
    pub misses: u64,
    /// Extra fields for the JSON line (workload description).
    pub context: serde_json::Value,
}

impl Phase<'_> {
    pub fn qps(&self) -> f64 {
        let seconds = self.elapsed.as_secs_f64();
        if seconds > 0.0 {
            self.operations as f64 / seconds
        } else {
            0.0
        }
    }

    /// Prints the phase's line(s); a stdout that cannot take them is an I/O error.
    pub fn print(&self, as_json: bool) -> kura::Result<()> {
        let rss = resident_bytes();
        if as_json {
            let mut line = json!({
                "engine": self.engine,
                "phase": self.name,
                "threads": self.threads,
                "operations": self.operations,
                "records": self.records,
                "elapsed_s": self.elapsed.as_secs_f64(),
                "qps": self.qps(),
                "file_size": self.file_size,
                "rss_bytes": rss,
                "misses": self.misses,
            });
            if let (Some(line), Some(extra)) = (line.as_object_mut(), self.context.as_object()) {
                for (name, value) in extra {
                    line.insert(name.clone(), value.clone());
                }
            }
            print_line(line)
        } else {
            print_line(format_args!(
                "{} done: elapsed_time={:.6} num_records={} qps={:.0} mem={}\n  file_size={} misses={}\n",
                title(self.name),
                self.elapsed.as_secs_f64(),
                self.records,
                self.qps(),
                rss,
                self.file_size,
                self.misses
            ))
        }
    }
}

/// "set" -> "Setting", the words `tkrzw_dbm_perf` prints.
pub fn title(phase: &str) -> &'static str {
    match phase {
        "set" => "Setting",
        "get" => "Getting",
        "get_batch" => "Getting in batches",
        "iterate" => "Iterating",
        "remove" => "Removing",
        "scan" => "Scanning",
        "scan_back" => "Scanning backward",
        "range" => "Range scanning",
        _ => "Running",
    }
}

/// The process's resident memory (VmRSS) in bytes; 0 where /proc is not available.
pub fn resident_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kib| kib * 1024)
}
