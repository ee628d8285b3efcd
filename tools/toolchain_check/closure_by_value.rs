//! A miscompilation of rustc 1.95.0 at `-O`, which a release build of
//! crates/kura/tests/tree_model.rs ran into (2026-12-01), reduced to no Kura code at all.
//!
//! A closure takes a struct holding a `Vec` by value and is called again: optimized by 1.95.0,
//! the second call is handed the first call's argument, whose buffer a `realloc` has freed since,
//! instead of its own empty one; the program reads and writes that freed buffer (valgrind shows
//! it) and crashes. Built with `-C opt-level=1`, or by rustc 1.97.0-nightly (2026-05-19), it
//! prints six totals and exits 0. tools/check_toolchain.sh builds it with the rustc on the
//! PATH and says whether that compiler is affected: Kura's release builds (wheels, gems, the
//! CLI) are then suspect, though no test of the library has failed because of it.

#[derive(Debug, Clone, Default)]
struct Params {
    pairs: Vec<(String, String)>,
}

impl Params {
    fn new() -> Params {
        Params::default()
    }

    fn with(mut self, name: &str, value: impl ToString) -> Params {
        self.pairs.retain(|(n, _)| n != name);
        self.pairs.push((name.to_string(), value.to_string()));
        self
    }
}

#[inline(never)]
fn consume(params: &Params) -> usize {
    format!("{params:?}").len()
}

fn run(small_cache: bool, write_buffer: Option<u64>) -> usize {
    let with_cache = |params: Params| {
        let params = match write_buffer {
            Some(bytes) => params.with("write_buffer_bytes", bytes),
            None => params,
        };
        if small_cache {
            params.with("cache_bytes", 4096u64).with("memory_bytes", 4096u64)
        } else {
            params
        }
    };
    let first = with_cache(Params::new()).with("a", 1).with("b", 2).with("c", 3).with("d", 4);
    let mut total = consume(&first);
    for _ in 0..std::hint::black_box(3) {
        total += consume(&with_cache(Params::new()).with("c", 3).with("d", 4));
    }
    total
}

fn main() {
    for write_buffer in [Some(0), Some(6000), None] {
        for small_cache in [false, true] {
            println!("{}", run(small_cache, write_buffer));
        }
    }
}
