//! The codec registry: the one list of compression algorithms, with the name parameters and
//! the command line use, the id file headers store, and how to make one. Adding a codec is a
//! file implementing `Algorithm` plus a variant and an entry here; the CLI's help, `kura
//! inspect` and the codec tables of docs/format.md and docs/tree.md are checked against this
//! table by tests.

use super::algorithm::Algorithm;
use super::lz4::Lz4;
use super::lzma::Lzma;
use super::none::Identity;
use super::snappy::Snappy;
use super::zlib::Zlib;
use super::zstd::{Zstd, ZSTD_DICT_LEVELS, ZSTD_DICT_MEMORY_LEVELS, ZSTD_LEVELS};
use super::Residence;
use crate::error::{Error, Result};

/// The compression algorithm of a database, recorded in its file header by its id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CodecKind {
    /// Values stored as they are.
    None,
    /// Raw deflate (zlib's algorithm without its header).
    Zlib,
    /// Zstandard, one frame per value.
    Zstd,
    /// LZ4 blocks.
    Lz4,
    /// Raw LZMA2.
    Lzma,
    /// Snappy's raw format.
    Snappy,
    /// zstd with a dictionary trained on a sample of the database's own records and stored in
    /// the file. Until a dictionary exists (a database created empty), it behaves as zstd.
    ZstdDict,
    /// A codec that only the library's own unit tests have (`dummy.rs`): it proves that a
    /// codec is one file plus one registry entry, and that no engine needs a change for it.
    #[cfg(test)]
    Dummy,
}

/// One codec: its names and how to make it.
pub struct CodecSpec {
    /// The kind this entry describes.
    pub kind: CodecKind,
    /// The name in parameters and on the command line (`record_comp=zstd-dict`).
    pub name: &'static str,
    /// The byte stored in file headers: never reused for another codec.
    pub id: u8,
    /// Whether it is made with a dictionary stored in the file.
    pub uses_dictionary: bool,
    /// One line for help texts.
    pub summary: &'static str,
    make: fn(Vec<u8>, Residence) -> Result<Box<dyn Algorithm>>,
}

/// The codec table, with any entries given after the released ones.
macro_rules! codec_table {
    ($($test_only:expr),*) => {
        &[
            CodecSpec {
                kind: CodecKind::None,
                name: "none",
                id: 0,
                uses_dictionary: false,
                summary: "no compression",
                make: |_, _| Ok(Box::new(Identity)),
            },
            CodecSpec {
                kind: CodecKind::Zlib,
                name: "zlib",
                id: 1,
                uses_dictionary: false,
                summary: "raw deflate, level 6",
                make: |_, _| Ok(Box::<Zlib>::default()),
            },
            CodecSpec {
                kind: CodecKind::Zstd,
                name: "zstd",
                id: 2,
                uses_dictionary: false,
                summary: "one zstd frame per value, level 3",
                make: |_, residence| Ok(Box::new(Zstd::new(CodecKind::Zstd, ZSTD_LEVELS, Vec::new(), residence)?)),
            },
            CodecSpec {
                kind: CodecKind::Lz4,
                name: "lz4",
                id: 3,
                uses_dictionary: false,
                summary: "one LZ4 block per value",
                make: |_, _| Ok(Box::new(Lz4)),
            },
            CodecSpec {
                kind: CodecKind::Lzma,
                name: "lzma",
                id: 4,
                uses_dictionary: false,
                summary: "raw LZMA2, preset 6, 1 MiB window",
                make: |_, _| Ok(Box::new(Lzma)),
            },
            CodecSpec {
                kind: CodecKind::Snappy,
                name: "snappy",
                id: 5,
                uses_dictionary: false,
                summary: "snappy raw format",
                make: |_, _| Ok(Box::<Snappy>::default()),
            },
            CodecSpec {
                kind: CodecKind::ZstdDict,
                name: "zstd-dict",
                id: 6,
                uses_dictionary: true,
                summary:
                    "zstd with a dictionary trained on the database's records: level 12 for bulk writes (16 in memory), 3 for single ones",
                make: |dictionary, residence| {
                    let levels = match residence {
                        Residence::File => ZSTD_DICT_LEVELS,
                        Residence::Memory => ZSTD_DICT_MEMORY_LEVELS,
                    };
                    Ok(Box::new(Zstd::new(CodecKind::ZstdDict, levels, dictionary, residence)?))
                },
            },
            $($test_only),*
        ]
    };
}

/// Every codec, in id order: entry `i` is the codec of id `i` and `CodecKind` discriminant `i`
/// (checked when the crate compiles, below).
#[cfg(not(test))]
pub const CODECS: &[CodecSpec] = codec_table!();

/// Every codec, and in the library's unit tests one more, the dummy (`dummy.rs`).
#[cfg(test)]
pub const CODECS: &[CodecSpec] = codec_table!(CodecSpec {
    kind: CodecKind::Dummy,
    name: "dummy",
    id: 7,
    uses_dictionary: false,
    summary: "test only: run-length pairs",
    make: |_, _| Ok(Box::new(super::dummy::Dummy)),
});

impl CodecKind {
    /// Every codec kind, in id order.
    #[expect(clippy::indexing_slicing, reason = "evaluated at compile time: i stays below CODECS.len()")]
    pub const ALL: [CodecKind; CODECS.len()] = {
        let mut all = [CodecKind::None; CODECS.len()];
        let mut i = 0;
        while i < CODECS.len() {
            all[i] = CODECS[i].kind;
            i += 1;
        }
        all
    };

    /// This codec's registry entry.
    #[expect(clippy::indexing_slicing, reason = "TABLE_IS_IN_KIND_ORDER proves every kind indexes its own entry")]
    pub fn spec(self) -> &'static CodecSpec {
        &CODECS[self as usize]
    }

    /// The name used in parameters and on the command line (`record_comp=zstd-dict`).
    pub fn name(self) -> &'static str {
        self.spec().name
    }

    /// The byte stored in file headers.
    pub fn id(self) -> u8 {
        self.spec().id
    }

    /// Whether the codec is made with a dictionary trained on the database's own records and
    /// stored with them: what an engine asks before it trains one (never its name).
    pub fn uses_dictionary(self) -> bool {
        self.spec().uses_dictionary
    }

    /// Whether values stored with it are decoded on the way out: a read then costs more
    /// than a copy (a binding releases its interpreter's lock around such reads).
    pub fn decompresses(self) -> bool {
        self != CodecKind::None
    }

    /// The codec called `name` (case and `_`/`-` do not matter); InvalidArgument listing the known names otherwise.
    pub fn from_name(name: &str) -> Result<CodecKind> {
        let wanted = name.trim().to_ascii_lowercase().replace('_', "-");
        CODECS.iter().find(|spec| spec.name == wanted).map(|spec| spec.kind).ok_or_else(|| {
            Error::invalid(format!("unknown codec {name:?} (known: {})", names().collect::<Vec<_>>().join(" ")))
        })
    }

    /// The codec a file header's id byte names; BrokenData for an unknown id.
    pub fn from_id(id: u8) -> Result<CodecKind> {
        CODECS
            .iter()
            .find(|spec| spec.id == id)
            .map(|spec| spec.kind)
            .ok_or_else(|| Error::broken(format!("unknown codec id {id} in the file header")))
    }
}

/// Entry `i` of `CODECS` is the kind of discriminant `i` and has id `i`, and every kind has
/// an entry: a table out of order fails the build.
#[expect(clippy::indexing_slicing, reason = "evaluated at compile time: an index out of range fails the build")]
const TABLE_IS_IN_KIND_ORDER: () = {
    assert!(CODECS.len() == CodecKind::ALL.len());
    let mut i = 0;
    while i < CODECS.len() {
        assert!(CODECS[i].kind as usize == i && CODECS[i].id as usize == i);
        assert!(CodecKind::ALL[i] as usize == i);
        i += 1;
    }
};
const _: () = TABLE_IS_IN_KIND_ORDER;

impl CodecSpec {
    /// A ready algorithm, with `dictionary` when the codec uses one.
    pub(super) fn make(&self, dictionary: Vec<u8>, residence: Residence) -> Result<Box<dyn Algorithm>> {
        (self.make)(dictionary, residence)
    }
}

/// The codec names, in id order: for help texts and error messages.
pub fn names() -> impl Iterator<Item = &'static str> {
    CODECS.iter().map(|spec| spec.name)
}

/// The codecs a release build has, for comparing with the documentation: every entry but
/// the unit tests' dummy.
pub fn shipped() -> impl Iterator<Item = &'static CodecSpec> {
    #[cfg(test)]
    let shipped = |spec: &&CodecSpec| spec.kind != CodecKind::Dummy;
    #[cfg(not(test))]
    let shipped = |_: &&CodecSpec| true;
    CODECS.iter().filter(shipped)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_has_one_entry_with_a_unique_name_and_id() {
        for kind in CodecKind::ALL {
            assert_eq!(CODECS.iter().filter(|spec| spec.kind == kind).count(), 1, "{kind:?}");
        }
        assert_eq!(CODECS.len(), CodecKind::ALL.len());
        for (i, spec) in CODECS.iter().enumerate() {
            assert_eq!(CodecKind::from_name(spec.name).ok(), Some(spec.kind));
            assert_eq!(CodecKind::from_id(spec.id).ok(), Some(spec.kind));
            assert_eq!(usize::from(spec.id), i, "ids are dense and in table order");
        }
    }
}
