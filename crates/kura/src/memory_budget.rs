//! How much memory this process may use, so that default cache sizes fit the machine.
//!
//! TreeDbm's page cache defaults to 256 MiB, and its modified pages wait for a checkpoint on
//! top of that. In a container or a memory cgroup of 128 or 512 MiB (page cache included),
//! that default alone would push the process into its own limit: the kernel then evicts the
//! file's pages and the database crawls, or the OOM killer ends it. The budget is the least of
//! the memory the kernel says is available (`MemAvailable`) and every memory limit on the
//! process's cgroup path (cgroup v2 `memory.max`, v1 `memory.limit_in_bytes`, each ancestor
//! included), read once per open; None when none of them can be read (not Linux).

use std::path::{Path, PathBuf};

/// The memory this process may use: the least of the machine's available memory and its
/// cgroups' limits; None when none is known.
pub fn available_bytes() -> Option<u64> {
    let available = std::fs::read_to_string("/proc/meminfo").ok().and_then(|text| mem_available(&text));
    let limit = std::fs::read_to_string("/proc/self/cgroup")
        .ok()
        .and_then(|text| cgroup_limit(&text, Path::new("/sys/fs/cgroup"), |path| std::fs::read_to_string(path).ok()));
    match (available, limit) {
        (Some(a), Some(l)) => Some(a.min(l)),
        (a, l) => a.or(l),
    }
}

/// `MemAvailable` of /proc/meminfo, in bytes.
fn mem_available(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|line| line.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// Limits at or above this are "no limit" (cgroup v1 writes one page short of 2^63).
const UNLIMITED: u64 = 1 << 62;

/// The least memory limit on the cgroup paths of `proc_cgroup` (/proc/self/cgroup), each
/// directory from the process's own up to the root of the hierarchy, read through `read`.
fn cgroup_limit(proc_cgroup: &str, root: &Path, read: impl Fn(&Path) -> Option<String>) -> Option<u64> {
    let mut least: Option<u64> = None;
    for line in proc_cgroup.lines() {
        // "hierarchy-id:controllers:path"; v2 is "0::path".
        let mut fields = line.splitn(3, ':');
        let (Some(_), Some(controllers), Some(path)) = (fields.next(), fields.next(), fields.next()) else {
            continue;
        };
        let (base, file) = if controllers.is_empty() {
            (if root.join("unified").is_dir() { root.join("unified") } else { root.to_path_buf() }, "memory.max")
        } else if controllers.split(',').any(|c| c == "memory") {
            (root.join("memory"), "memory.limit_in_bytes")
        } else {
            continue;
        };
        let mut dir: PathBuf = base.join(path.trim_start_matches('/'));
        loop {
            let limit =
                read(&dir.join(file)).and_then(|text| text.trim().parse::<u64>().ok()).filter(|&l| l < UNLIMITED);
            if let Some(limit) = limit {
                least = Some(least.map_or(limit, |l| l.min(limit)));
            }
            if dir == base || !dir.pop() {
                break;
            }
        }
    }
    least
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn reader(files: &[(&str, &str)]) -> impl Fn(&Path) -> Option<String> {
        let files: HashMap<PathBuf, String> = files.iter().map(|(p, t)| (PathBuf::from(p), t.to_string())).collect();
        move |path: &Path| files.get(path).cloned()
    }

    #[test]
    fn mem_available_is_read_in_bytes() {
        let meminfo = "MemTotal:       24684140 kB\nMemFree:        21000000 kB\nMemAvailable:   23879928 kB\n";
        assert_eq!(mem_available(meminfo), Some(23_879_928 * 1024));
        assert_eq!(mem_available("MemTotal: 1 kB\n"), None);
    }

    #[test]
    fn the_least_limit_on_the_path_counts_and_unlimited_ones_do_not() {
        let root = Path::new("/cg");
        let v1 = "4:memory:/outer/inner\n3:cpu:/\n";
        let files = [
            ("/cg/memory/outer/inner/memory.limit_in_bytes", "9223372036854771712\n"),
            ("/cg/memory/outer/memory.limit_in_bytes", "536870912\n"),
            ("/cg/memory/memory.limit_in_bytes", "9223372036854771712\n"),
        ];
        assert_eq!(cgroup_limit(v1, root, reader(&files)), Some(512 << 20), "the parent's limit applies");
        let v2 = "0::/app\n";
        let files = [("/cg/app/memory.max", "134217728\n"), ("/cg/memory.max", "max\n")];
        assert_eq!(cgroup_limit(v2, root, reader(&files)), Some(128 << 20));
        assert_eq!(cgroup_limit("0::/\n", root, reader(&[("/cg/memory.max", "max\n")])), None);
        assert_eq!(cgroup_limit("garbage", root, reader(&[])), None);
    }
}
