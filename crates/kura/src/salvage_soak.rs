//! What every salvage soak reads from its environment (`make salvage-soak`,
//! `salvage-soak-tree`, `salvage-soak-sets`; docs/durability.md): the soaks of HashDbm files,
//! of shard sets and of TreeDbm files take the same settings, read here once.

#![expect(clippy::unwrap_used, reason = "a soak fails loudly when it cannot make its directory")]

/// A soak's size, positions and working directory.
pub struct SoakSettings {
    /// Records of each file (`KURA_SALVAGE_RECORDS`, default 2,000).
    pub records: u32,
    /// Every `step`-th byte is damaged (`KURA_SALVAGE_STEP`, default 1: every byte).
    pub step: u64,
    /// Where the damaged copies are written: `KURA_SALVAGE_DIR`, else /dev/shm, where the
    /// restores' syncs cost nothing, else the system's temporary directory.
    pub dir: tempfile::TempDir,
}

fn number(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|n| n.parse::<u64>().ok())
}

/// `KURA_SALVAGE_STEP`, at least 1.
pub fn step() -> u64 {
    number("KURA_SALVAGE_STEP").unwrap_or(1).max(1)
}

pub fn settings() -> SoakSettings {
    let dir = tempfile::tempdir_in(std::env::var("KURA_SALVAGE_DIR").unwrap_or_else(|_| "/dev/shm".into()))
        .or_else(|_| tempfile::tempdir())
        .unwrap();
    SoakSettings {
        records: number("KURA_SALVAGE_RECORDS").map_or(2000, |n| u32::try_from(n).unwrap_or(u32::MAX)),
        step: step(),
        dir,
    }
}
