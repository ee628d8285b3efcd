//! The one entry point: open any engine by the path's extension or an `engine=` parameter.

use std::path::Path;

use crate::dbm::{Dbm, Params};
use crate::error::{Error, Result};
use crate::hash::HashDbm;
use crate::memory::{BabyDbm, CacheDbm, TinyDbm};
use crate::tree::TreeDbm;

/// How a database file is opened; the letters match Python's `dbm` flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpenMode {
    /// `r`: read only; the file must exist. Takes a shared lock.
    ReadOnly,
    /// `w`: read and write; the file must exist. Takes the exclusive lock.
    Write,
    /// `c`: read and write, creating the file if it does not exist.
    Create,
    /// `n`: read and write, always starting from a new empty database.
    Truncate,
}

impl OpenMode {
    pub fn from_flag(flag: &str) -> Result<OpenMode> {
        match flag {
            "r" => Ok(OpenMode::ReadOnly),
            "w" => Ok(OpenMode::Write),
            "c" => Ok(OpenMode::Create),
            "n" => Ok(OpenMode::Truncate),
            _ => Err(Error::invalid(format!("open flag {flag:?} is not one of r, w, c, n"))),
        }
    }

    pub fn is_writable(self) -> bool {
        self != OpenMode::ReadOnly
    }
}

/// The engines `open` knows, each with its file extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EngineKind {
    Hash,
    Tiny,
    Baby,
    Cache,
    Tree,
}

impl EngineKind {
    pub const ALL: [EngineKind; 5] =
        [EngineKind::Hash, EngineKind::Tiny, EngineKind::Baby, EngineKind::Cache, EngineKind::Tree];

    pub fn name(self) -> &'static str {
        match self {
            EngineKind::Hash => "hash",
            EngineKind::Tiny => "tiny",
            EngineKind::Baby => "baby",
            EngineKind::Cache => "cache",
            EngineKind::Tree => "tree",
        }
    }

    pub fn extension(self) -> &'static str {
        match self {
            EngineKind::Hash => "kuh",
            EngineKind::Tiny => "kumt",
            EngineKind::Baby => "kumb",
            EngineKind::Cache => "kumc",
            EngineKind::Tree => "kut",
        }
    }

    pub fn from_name(name: &str) -> Result<EngineKind> {
        EngineKind::ALL.into_iter().find(|e| e.name() == name).ok_or_else(|| {
            let names: Vec<&str> = EngineKind::ALL.iter().map(|e| e.name()).collect();
            Error::invalid(format!("unknown engine {name:?} (known: {})", names.join(" ")))
        })
    }

    /// The engine named by `params` (`engine=hash`), else by the path's extension.
    pub fn resolve(path: &Path, params: &Params) -> Result<EngineKind> {
        if let Some(name) = params.get("engine") {
            return EngineKind::from_name(name);
        }
        let extension = path.extension().and_then(|e| e.to_str()).unwrap_or("");
        EngineKind::ALL.into_iter().find(|e| e.extension() == extension).ok_or_else(|| {
            Error::invalid(format!(
                "cannot tell the engine of {}: use a known extension ({}) or engine=NAME",
                path.display(),
                EngineKind::ALL.iter().map(|e| format!(".{}", e.extension())).collect::<Vec<_>>().join(" ")
            ))
        })
    }
}

/// Opens (or creates) a database, choosing the engine by `params["engine"]` or by extension.
/// The remaining parameters go to the engine, which rejects names it does not know.
pub fn open(path: impl AsRef<Path>, mode: OpenMode, params: &Params) -> Result<Box<dyn Dbm>> {
    let path = path.as_ref();
    let engine = EngineKind::resolve(path, params)?;
    let mut engine_params = Params::new();
    for name in params.names().filter(|n| *n != "engine") {
        engine_params = engine_params.with(name, params.get(name).unwrap_or_default());
    }
    Ok(match engine {
        EngineKind::Hash => Box::new(HashDbm::open(path, mode, &engine_params)?),
        EngineKind::Tiny => Box::new(TinyDbm::open(path, mode, &engine_params)?),
        EngineKind::Baby => Box::new(BabyDbm::open(path, mode, &engine_params)?),
        EngineKind::Cache => Box::new(CacheDbm::open(path, mode, &engine_params)?),
        EngineKind::Tree => Box::new(TreeDbm::open(path, mode, &engine_params)?),
    })
}
