//! One input line to one record: TSV (`key<TAB>value`), escaped TSV (the same with both
//! fields escaped, `escape.rs`: what `kura export --escape` writes) or JSON lines
//! (`{"key": ..., "value": ...}`).
//!
//! A JSON value that is a string is stored as its text; any other JSON value (number, object,
//! array, true/false/null) as its compact JSON text, object keys in their input order. A JSON key is a string or a number (its
//! text); a line with no key, or `"key": null`, is a keyless row, which the importer gives a
//! generated key. serde_json checks that every string is valid UTF-8, so a key with invalid
//! UTF-8 is a malformed line like any other.

use std::borrow::Cow;
use std::path::Path;

use serde_json::Value;

use super::escape::unescape;
use crate::error::{Error, Result};

/// The input's line format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `key<TAB>value` lines.
    Tsv,
    /// `key<TAB>value` lines whose fields are escaped (`escape.rs`), so that any bytes fit.
    EscapedTsv,
    /// JSON lines: `{"key": ..., "value": ...}`, the key optional.
    Jsonl,
}

impl Format {
    /// The format called `tsv`, `tsv-escaped` or `jsonl`; InvalidArgument otherwise.
    pub fn from_name(name: &str) -> Result<Format> {
        match name {
            "tsv" => Ok(Format::Tsv),
            "tsv-escaped" => Ok(Format::EscapedTsv),
            "jsonl" | "ndjson" | "json" => Ok(Format::Jsonl),
            _ => Err(Error::invalid(format!("--format {name:?} is not tsv, tsv-escaped or jsonl"))),
        }
    }

    /// The format a file's extension suggests: `.jsonl`, `.ndjson` and `.json` are JSON
    /// lines, anything else TSV.
    pub fn of_file(path: &Path) -> Format {
        match path.extension().and_then(|e| e.to_str()) {
            Some("jsonl" | "ndjson" | "json") => Format::Jsonl,
            _ => Format::Tsv,
        }
    }
}

/// A parsed line.
pub enum Row<'a> {
    Keyed {
        key: Cow<'a, [u8]>,
        value: Cow<'a, [u8]>,
    },
    /// A record whose key the importer makes up.
    Keyless {
        value: Cow<'a, [u8]>,
    },
}

/// Parses one line (without its newline); the error says what is wrong with it.
pub fn parse_line(format: Format, line: &[u8]) -> std::result::Result<Row<'_>, String> {
    match format {
        Format::Tsv => {
            split_tsv(line).map(|(key, value)| Row::Keyed { key: Cow::Borrowed(key), value: Cow::Borrowed(value) })
        }
        Format::EscapedTsv => {
            let (key, value) = split_tsv(line)?;
            let in_key = |e: String| format!("key: {e}");
            let in_value = |e: String| format!("value: {e}");
            Ok(Row::Keyed { key: unescape(key).map_err(in_key)?, value: unescape(value).map_err(in_value)? })
        }
        Format::Jsonl => parse_json(line),
    }
}

/// A TSV line's key (up to the first tab) and value (the rest, tabs included).
fn split_tsv(line: &[u8]) -> std::result::Result<(&[u8], &[u8]), String> {
    let Some(tab) = line.iter().position(|&b| b == b'\t') else {
        // A JSON object read as TSV (from standard input, or a file without a .jsonl
        // extension, the format is TSV unless named): say which format reads it.
        let json_like = line.trim_ascii_start().starts_with(b"{");
        return Err(if json_like {
            "no tab between key and value; the line looks like JSON: read JSON lines with --format jsonl (format=\"jsonl\" from Python)"
        } else {
            "no tab between key and value"
        }
        .to_string());
    };
    let (key, rest) = line.split_at(tab);
    Ok((key, rest.get(1..).unwrap_or_default()))
}

fn parse_json(line: &[u8]) -> std::result::Result<Row<'static>, String> {
    let parsed: Value = serde_json::from_slice(line).map_err(|e| format!("not a JSON object: {e}"))?;
    let Value::Object(mut fields) = parsed else {
        return Err("not a JSON object".to_string());
    };
    let value = match fields.remove("value") {
        Some(Value::String(text)) => text.into_bytes(),
        Some(other) => other.to_string().into_bytes(),
        None => return Err("no \"value\" field".to_string()),
    };
    let value = Cow::Owned(value);
    match fields.remove("key") {
        None | Some(Value::Null) => Ok(Row::Keyless { value }),
        Some(Value::String(text)) => Ok(Row::Keyed { key: Cow::Owned(text.into_bytes()), value }),
        Some(Value::Number(number)) => Ok(Row::Keyed { key: Cow::Owned(number.to_string().into_bytes()), value }),
        Some(_) => Err("\"key\" is neither a string nor a number".to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keyed(format: Format, line: &str) -> (String, String) {
        match parse_line(format, line.as_bytes()) {
            Ok(Row::Keyed { key, value }) => {
                (String::from_utf8_lossy(&key).into_owned(), String::from_utf8_lossy(&value).into_owned())
            }
            Ok(Row::Keyless { .. }) => panic!("{line}: keyless"),
            Err(e) => panic!("{line}: {e}"),
        }
    }

    #[test]
    fn lines_parse_to_records_or_say_what_is_wrong() {
        assert_eq!(keyed(Format::Tsv, "k\tv\tw"), ("k".into(), "v\tw".into()));
        assert_eq!(keyed(Format::Tsv, "k\t"), ("k".into(), String::new()));
        assert!(parse_line(Format::Tsv, b"no tab").is_err());
        assert_eq!(keyed(Format::EscapedTsv, "k\\tey\tv\\nw\tx"), ("k\tey".into(), "v\nw\tx".into()));
        assert_eq!(keyed(Format::EscapedTsv, "a\\\\b\t"), ("a\\b".into(), String::new()));
        for bad in [&b"k\\q\tv"[..], b"k\tv\\", b"no tab"] {
            assert!(parse_line(Format::EscapedTsv, bad).is_err(), "{}", String::from_utf8_lossy(bad));
        }
        assert_eq!(keyed(Format::Jsonl, r#"{"key":"a","value":"text"}"#), ("a".into(), "text".into()));
        assert_eq!(keyed(Format::Jsonl, r#"{"key":7,"value":{"x": [1, 2]}}"#), ("7".into(), r#"{"x":[1,2]}"#.into()));
        assert!(matches!(parse_line(Format::Jsonl, br#"{"value":"v"}"#), Ok(Row::Keyless { .. })));
        assert!(matches!(parse_line(Format::Jsonl, br#"{"key":null,"value":1}"#), Ok(Row::Keyless { .. })));
        for bad in [&br#"{"key":"a","value":"#[..], br#"{"key":"a"}"#, br#"[1]"#, br#"{"key":[],"value":1}"#, b""] {
            assert!(parse_line(Format::Jsonl, bad).is_err(), "{}", String::from_utf8_lossy(bad));
        }
        assert!(parse_line(Format::Jsonl, b"{\"key\":\"\xff\",\"value\":\"v\"}").is_err(), "invalid UTF-8");
    }
}
