//! No module of any crate of the workspace imports itself through others: each crate's folder
//! tree stays a layering that a newcomer can read from the bottom up. This test reads the
//! `src/` of every crate under `crates/` and fails on every cycle of modules whose `use` lines
//! (and `crate::`/`super::` paths) lead back to where they started, whatever its length.

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
    // Comments may name any module (`what crate::fuzz::session drives`): only code counts.
    let code: String = code.lines().filter(|line| !line.trim_start().starts_with("//")).collect::<Vec<_>>().join("\n");
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

/// Each crate's module graph: a module and the modules it names, outside its own subtree
/// and its ancestors (a parent naming its child, by `mod` items and re-exports, is the tree
/// itself; a child naming its parent's other items goes through the parent's re-exports).
fn module_graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let modules: BTreeSet<String> = files.iter().map(|f| module_of(src, f)).filter(|m| !m.is_empty()).collect();
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in &files {
        let module = module_of(src, file);
        if module.is_empty() {
            continue;
        }
        let is_mod_file = file.file_name().is_some_and(|n| n == "mod.rs");
        let text = std::fs::read_to_string(file).unwrap();
        let uses = references(&module, is_mod_file, &text, &modules)
            .into_iter()
            .filter(|other| !other.starts_with(&format!("{module}::")) && !module.starts_with(&format!("{other}::")))
            .collect();
        graph.insert(module, uses);
    }
    graph
}

/// The cycles of `graph`: each strongly connected component of more than one module (Tarjan's
/// algorithm), shown as its modules in order.
fn cycles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    /// A visited module's number (every module asked for was visited).
    fn at(numbers: &BTreeMap<&str, usize>, module: &str) -> usize {
        numbers.get(module).copied().unwrap()
    }
    struct Walk<'a> {
        graph: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        components: Vec<Vec<String>>,
    }
    impl<'a> Walk<'a> {
        fn visit(&mut self, module: &'a str) {
            let number = self.index.len();
            self.index.insert(module, number);
            self.low.insert(module, number);
            self.stack.push(module);
            self.on_stack.insert(module);
            for other in self.graph.get(module).into_iter().flatten() {
                let other = other.as_str();
                if !self.index.contains_key(other) {
                    self.visit(other);
                    let low = at(&self.low, module).min(at(&self.low, other));
                    self.low.insert(module, low);
                } else if self.on_stack.contains(other) {
                    let low = at(&self.low, module).min(at(&self.index, other));
                    self.low.insert(module, low);
                }
            }
            if at(&self.low, module) == at(&self.index, module) {
                let mut component = Vec::new();
                while let Some(top) = self.stack.pop() {
                    self.on_stack.remove(top);
                    component.push(top.to_string());
                    if top == module {
                        break;
                    }
                }
                if component.len() > 1 {
                    component.sort();
                    self.components.push(component);
                }
            }
        }
    }
    let mut walk = Walk {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        components: Vec::new(),
    };
    for module in graph.keys() {
        if !walk.index.contains_key(module.as_str()) {
            walk.visit(module);
        }
    }
    walk.components
}

/// The cycle finder finds a cycle of three (no pair of which names each other) and no cycle
/// in a chain.
#[test]
fn cycles_of_any_length_are_found() {
    let graph = |edges: &[(&str, &str)]| {
        let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (from, to) in edges {
            graph.entry(from.to_string()).or_default().insert(to.to_string());
            graph.entry(to.to_string()).or_default();
        }
        graph
    };
    assert_eq!(cycles(&graph(&[("a", "b"), ("b", "c"), ("c", "a"), ("c", "d")])), [["a", "b", "c"]]);
    assert!(cycles(&graph(&[("a", "b"), ("b", "c"), ("a", "c")])).is_empty());
}

#[test]
fn no_crate_of_the_workspace_has_an_import_cycle() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let mut found = Vec::new();
    let mut scanned = Vec::new();
    for entry in std::fs::read_dir(crates).unwrap() {
        let src = entry.unwrap().path().join("src");
        if !src.is_dir() {
            continue;
        }
        let graph = module_graph(&src);
        scanned.push((src.display().to_string(), graph.len()));
        found.extend(cycles(&graph).into_iter().map(|cycle| format!("{}: {}", src.display(), cycle.join(" -> "))));
    }
    assert!(found.is_empty(), "modules that import each other, directly or through others: {found:#?}");
    assert!(scanned.len() >= 6, "the scan found only {scanned:?}: is crates/ where it looks?");
    let kura = scanned.iter().find(|(src, _)| src.ends_with("kura/src")).map_or(0, |(_, n)| *n);
    assert!(kura > 40, "the scan found only {kura} modules of kura: is src/ where it looks?");
}
