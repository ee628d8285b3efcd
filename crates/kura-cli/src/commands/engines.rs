//! `kura engines` and `kura codecs`: the engine and codec registries as people and tools read
//! them.
//!
//! The benchmark driver (`bench/run.py`) and anything else outside Rust learn the engines and
//! codecs from `kura engines --json` and `kura codecs --json` instead of keeping lists of
//! their own.

use std::io::Write;

use kura::registry::Fact;
use serde_json::json;

use super::write_error;

pub fn list(as_json: bool) -> kura::Result<()> {
    let mut out = std::io::stdout().lock();
    // Columns as wide as their longest entry, so that every row lines up.
    let name_width = kura::engines().iter().map(|e| e.name.len()).max().unwrap_or(0);
    let extension_width = kura::engines().iter().map(|e| e.extension.len()).max().unwrap_or(0);
    for engine in kura::engines() {
        let line = if as_json {
            let facts = engine.description().map(|(name, fact)| {
                let value = match fact {
                    Fact::Text(text) => json!(text),
                    Fact::Flag(flag) => json!(flag),
                    Fact::Names(names) => json!(names),
                    // [offset, bytes in hex] pairs.
                    Fact::Marks(marks) => json!(marks
                        .iter()
                        .map(|mark| json!([
                            mark.offset,
                            mark.bytes.iter().map(|b| format!("{b:02x}")).collect::<String>()
                        ]))
                        .collect::<Vec<_>>()),
                    Fact::Nothing => serde_json::Value::Null,
                };
                (name.to_string(), value)
            });
            serde_json::Value::Object(facts.into_iter().collect()).to_string()
        } else {
            format!(
                "{:<name_width$} .{:<extension_width$} {:<6} {:<9} {}",
                engine.name,
                engine.extension,
                engine.storage.name(),
                engine.order.name(),
                engine.summary
            )
        };
        writeln!(out, "{line}").map_err(write_error("stdout"))?;
    }
    out.flush().map_err(write_error("stdout"))
}

pub fn codecs(as_json: bool) -> kura::Result<()> {
    let mut out = std::io::stdout().lock();
    for codec in kura::codec::CODECS {
        let line = if as_json {
            json!({
                "name": codec.name,
                "id": codec.id,
                "uses_dictionary": codec.uses_dictionary,
                "summary": codec.summary,
            })
            .to_string()
        } else {
            format!("{:<10} {:>2}  {}", codec.name, codec.id, codec.summary)
        };
        writeln!(out, "{line}").map_err(write_error("stdout"))?;
    }
    out.flush().map_err(write_error("stdout"))
}
