//! What `Dbm::inspect` reports, typed: the counts, sizes, codec, key order, caps and health
//! flag that code acts on (ShardDbm sums its shards' through these fields, the server reads
//! an engine's caps, the CLI its key order), plus each engine's own figures. The string form
//! (`kura inspect`, Python's `inspect()`, Ruby's `stats`) is derived from it here, in one
//! place: `Stats::entries` names every figure, `Stat`'s `Display` writes it.

use std::fmt;
use std::path::PathBuf;

use crate::codec::CodecKind;
use crate::tree_dbm::comparator::Comparator;

/// One figure of an engine's own (`Stats::details`), typed so that each reader translates it
/// into its own types: an `int`, a `bool`, a `str`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stat {
    /// A count or a size in bytes.
    Number(u64),
    /// Yes or no.
    Flag(bool),
    /// A name from a fixed set (a policy, an update mode, a codec).
    Name(&'static str),
    /// Text made at run time (a path).
    Text(String),
}

impl fmt::Display for Stat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Stat::Number(n) => write!(f, "{n}"),
            Stat::Flag(b) => write!(f, "{b}"),
            Stat::Name(name) => f.write_str(name),
            Stat::Text(text) => f.write_str(text),
        }
    }
}

/// The codec an engine stores its values with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CodecStat {
    /// The parameter that chose it (`record_comp`, `bucket_comp`): the name it is shown under,
    /// and the engine's `Engine::codec_param`.
    pub param: &'static str,
    /// The codec.
    pub kind: CodecKind,
}

/// The caps a cache engine evicts under (CacheDbm, SegCacheDbm).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Caps {
    /// The most records it keeps (`cap_rec_num`).
    pub records: u64,
    /// The most bytes of memory it keeps (`cap_mem_bytes`); None: unlimited.
    pub memory: Option<u64>,
    /// Records evicted so far.
    pub evictions: u64,
}

/// What `Dbm::inspect` reports about an open database. Engines build it with `Stats::new`
/// (non-exhaustive: a field may be added without breaking its readers).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    /// The engine's class (`HashDbm`, ...), as its registry entry names it.
    pub class: &'static str,
    /// The file it lives in (or is saved to); None for a memory database without a file.
    pub path: Option<PathBuf>,
    /// Records.
    pub count: u64,
    /// Bytes the database occupies in its file, or in memory for a memory engine.
    pub file_size: u64,
    /// The clean-close flag of a file's header, not a check of the data (`Dbm::check` reads
    /// it all); always true for a memory engine.
    pub healthy: bool,
    /// Its codec, for an engine that compresses.
    pub codec: Option<CodecStat>,
    /// Its key order, for an engine whose order is chosen (TreeDbm).
    pub key_order: Option<Comparator>,
    /// Its caps, for an engine that evicts.
    pub caps: Option<Caps>,
    /// The engine's own figures, in the order they are shown.
    pub details: Vec<(&'static str, Stat)>,
    /// A shard set's shards' stats, in shard order (the fields above sum them up); empty for
    /// one database.
    pub shards: Vec<Stats>,
}

impl Stats {
    /// The stats every engine has, with nothing engine-specific yet.
    pub fn new(class: &'static str, count: u64, file_size: u64, healthy: bool) -> Stats {
        Stats {
            class,
            path: None,
            count,
            file_size,
            healthy,
            codec: None,
            key_order: None,
            caps: None,
            details: Vec::new(),
            shards: Vec::new(),
        }
    }

    /// The figure named `name` among the engine's own (`details`).
    pub fn detail(&self, name: &str) -> Option<&Stat> {
        self.details.iter().find(|(n, _)| *n == name).map(|(_, stat)| stat)
    }

    /// The engine's own figure `name` if it is a number.
    pub fn number(&self, name: &str) -> Option<u64> {
        match self.detail(name) {
            Some(Stat::Number(n)) => Some(*n),
            _ => None,
        }
    }

    /// Every figure under the name it is shown by (`kura inspect`, Python's `inspect()`,
    /// Ruby's `stats`): `class`, `path`, `count`, `file_size`, `healthy`, the codec under its
    /// parameter's name, `key_comparator`, the caps (`cap_rec_num`, `cap_mem_bytes`, which is
    /// `unlimited` when there is none, `evictions`), the engine's own, and each shard's
    /// `shard_NNNNN_count`, `_file_size` and `_healthy`.
    pub fn entries(&self) -> Vec<(String, Stat)> {
        let mut entries = vec![("class".to_string(), Stat::Name(self.class))];
        if let Some(path) = &self.path {
            entries.push(("path".to_string(), Stat::Text(path.display().to_string())));
        }
        entries.push(("count".to_string(), Stat::Number(self.count)));
        entries.push(("file_size".to_string(), Stat::Number(self.file_size)));
        entries.push(("healthy".to_string(), Stat::Flag(self.healthy)));
        if let Some(codec) = self.codec {
            entries.push((codec.param.to_string(), Stat::Name(codec.kind.name())));
        }
        if let Some(order) = self.key_order {
            entries.push(("key_comparator".to_string(), Stat::Name(order.name())));
        }
        if let Some(caps) = self.caps {
            entries.push(("cap_rec_num".to_string(), Stat::Number(caps.records)));
            let memory = caps.memory.map_or(Stat::Name("unlimited"), Stat::Number);
            entries.push(("cap_mem_bytes".to_string(), memory));
            entries.push(("evictions".to_string(), Stat::Number(caps.evictions)));
        }
        entries.extend(self.details.iter().map(|(name, stat)| (name.to_string(), stat.clone())));
        for (index, shard) in self.shards.iter().enumerate() {
            entries.push((format!("shard_{index:05}_count"), Stat::Number(shard.count)));
            entries.push((format!("shard_{index:05}_file_size"), Stat::Number(shard.file_size)));
            entries.push((format!("shard_{index:05}_healthy"), Stat::Flag(shard.healthy)));
        }
        entries
    }

    /// `entries` as text, as `kura inspect` prints them (`name=value`).
    pub fn properties(&self) -> Vec<(String, String)> {
        self.entries().into_iter().map(|(name, stat)| (name, stat.to_string())).collect()
    }

    /// The text of the figure shown as `name`, if there is one.
    pub fn property(&self, name: &str) -> Option<String> {
        self.entries().into_iter().find(|(n, _)| n == name).map(|(_, stat)| stat.to_string())
    }
}

#[cfg(test)]
mod tests {
    #![expect(clippy::unwrap_used, reason = "a test fails loudly on the first broken expectation")]
    use super::*;

    /// Every typed field is shown once, under its name, and shard figures follow the set's.
    #[test]
    fn entries_show_every_field_once() {
        let mut shard = Stats::new("CacheDbm", 3, 40, false);
        shard.caps = Some(Caps { records: 10, memory: None, evictions: 2 });
        let mut set = Stats::new("ShardDbm", 3, 40, false);
        set.path = Some(PathBuf::from("/x/db.kumc"));
        set.codec = Some(CodecStat { param: "record_comp", kind: CodecKind::None });
        set.key_order = Some(Comparator::Numeric);
        set.caps = shard.caps;
        set.details.push(("num_shards", Stat::Number(1)));
        set.shards.push(shard);
        let properties = set.properties();
        let names: Vec<&str> = properties.iter().map(|(n, _)| n.as_str()).collect();
        let unique: std::collections::BTreeSet<&str> = names.iter().copied().collect();
        assert_eq!(names.len(), unique.len(), "{names:?}");
        assert_eq!(names.first(), Some(&"class"));
        assert_eq!(set.property("path").unwrap(), "/x/db.kumc");
        assert_eq!(set.property("record_comp").unwrap(), CodecKind::None.name());
        assert_eq!(set.property("key_comparator").unwrap(), "numeric");
        assert_eq!(set.property("cap_mem_bytes").unwrap(), "unlimited");
        assert_eq!(set.property("shard_00000_healthy").unwrap(), "false");
        assert_eq!(set.number("num_shards"), Some(1));
        assert_eq!(set.property("missing"), None);
    }
}
