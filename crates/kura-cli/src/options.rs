//! Turns command-line flags into engine parameters (`kura::Params`).
//!
//! `--record-comp` and `--buckets` are shorthands for the engine's codec parameter
//! (`record_comp=`, CompactDbm's `bucket_comp=`: the registry says which) and `num_buckets=`;
//! `--params` passes any parameter the engine knows. The flags win over `--params`.

use std::path::Path;

use kura::{CodecKind, Params};

use crate::LayoutArgs;

/// Parameters from `--params` alone.
pub fn plain_params(global: Option<&str>) -> kura::Result<Params> {
    let params = match global {
        Some(text) => Params::parse(text)?,
        None => Params::new(),
    };
    // Every engine's codec parameter (the registry names them), so that a typo lists the
    // known codecs before any file is touched.
    for name in kura::engines().iter().filter_map(|engine| engine.codec_param) {
        if let Some(codec) = params.get(name) {
            CodecKind::from_name(codec)?;
        }
    }
    Ok(params)
}

/// Parameters from `--params` plus the layout flags, for the database at `path`.
pub fn engine_params(path: &Path, global: Option<&str>, layout: &LayoutArgs) -> kura::Result<Params> {
    let mut params = plain_params(global)?;
    if let Some(codec) = &layout.record_comp {
        // Checked here so that a typo lists the known names before any file is touched.
        let codec = CodecKind::from_name(codec)?;
        let name = kura::registry::codec_param(path, &params)
            .map_err(|e| kura::Error::invalid(format!("--record-comp: {}", e.message())))?;
        params = params.with(name, codec.name());
    }
    if let Some(buckets) = &layout.buckets {
        let count = kura::parse_size(buckets).map_err(|e| kura::Error::invalid(format!("--buckets: {e}")))?;
        params = params.with("num_buckets", count);
    }
    Ok(params)
}
