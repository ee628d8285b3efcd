//! No two modules of the library import each other: the folder tree stays a layering that a
//! newcomer can read from the bottom up. This test reads `src/` and fails on the first pair
//! of files whose `use` lines (and `crate::`/`super::` paths) name each other.

#![expect(clippy::unwrap_used, reason = "a test fails loudly on the first broken expectation")]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The module path of a source file: `src/hash_dbm/storage.rs` is `hash_dbm::storage`,
/// `src/hash_dbm/mod.rs` is `hash_dbm`.
fn module_of(src: &Path, file: &Path) -> String {
    let relative = file.strip_prefix(src).unwrap().with_extension("");
    let mut parts: Vec<String> = relative.iter().map(|p| p.to_string_lossy().into_owned()).collect();
    if parts.last().is_some_and(|p| p == "mod" || p == "lib") {
        parts.pop();
    }
    parts.join("::")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The modules a file refers to through `crate::a::b` or `super::x` paths (test modules
/// excluded: a `#[cfg(test)] mod tests` may use anything), as full module paths.
fn references(module: &str, is_mod_file: bool, text: &str, modules: &BTreeSet<String>) -> BTreeSet<String> {
    let code = text.split("#[cfg(test)]\nmod tests").next().unwrap_or_default();
    // `super` of `a::b` (file b.rs) is `a`; of `a::b` (file b/mod.rs) it is `a` too.
    let parent: Vec<&str> = {
        let mut parts: Vec<&str> = module.split("::").filter(|p| !p.is_empty()).collect();
        let _ = is_mod_file;
        parts.pop();
        parts
    };
    let mut found = BTreeSet::new();
    for (prefix, base) in [("crate::", Vec::new()), ("super::", parent)] {
        for (at, _) in code.match_indices(prefix) {
            let rest = &code[at + prefix.len()..];
            let path: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':').collect();
            let mut segments: Vec<&str> = base.clone();
            segments.extend(path.split("::").filter(|s| !s.is_empty()));
            // The longest prefix of the path that is a module of the crate.
            while !segments.is_empty() {
                let candidate = segments.join("::");
                if modules.contains(&candidate) {
                    found.insert(candidate);
                    break;
                }
                segments.pop();
            }
        }
    }
    found.remove(module);
    found
}

#[test]
fn no_two_modules_import_each_other() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let modules: BTreeSet<String> = files.iter().map(|f| module_of(&src, f)).filter(|m| !m.is_empty()).collect();
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in &files {
        let module = module_of(&src, file);
        if module.is_empty() {
            continue;
        }
        let is_mod_file = file.file_name().is_some_and(|n| n == "mod.rs");
        let text = std::fs::read_to_string(file).unwrap();
        graph.insert(module.clone(), references(&module, is_mod_file, &text, &modules));
    }
    let mut cycles = Vec::new();
    for (module, uses) in &graph {
        for other in uses {
            // A parent naming its child (re-exports, `mod` items) is the tree itself.
            if other.starts_with(&format!("{module}::")) || module.starts_with(&format!("{other}::")) {
                continue;
            }
            if module < other && graph.get(other).is_some_and(|back| back.contains(module)) {
                cycles.push(format!("{module} <-> {other}"));
            }
        }
    }
    assert!(cycles.is_empty(), "modules that import each other: {cycles:#?}");
    assert!(graph.len() > 40, "the scan found only {} modules: is src/ where it looks?", graph.len());
}
