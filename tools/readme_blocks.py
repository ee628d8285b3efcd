#!/usr/bin/env python3
"""Runs every fenced code block of README.md, so that the README's examples cannot rot
(issue 45: "every README code block runs in make test").

Each block runs by its language, in a scratch directory of its own, against what the build
made: sh/bash/shell with bash -e -o pipefail and the `kura` binary first on the PATH
(--kura), python with --python (the .venv's, which has the package), ruby with
`ruby -I --ruby-lib` (the extension `make ruby` put there), rust as modules of one example
of the library crate, crates/kura/examples/readme.rs, generated from the README by
`--write-rust` and committed (cargo compiles it with the other examples; a stale copy fails
the run and says how to refresh it).

HTML comments on the lines right above a fence, invisible on GitHub, say how to run it:

    <!-- readme-test: skip (why it cannot run here) -->
    <!-- readme-test: setup CODE -->

A skip must say why; the runner prints each reason. CODE (in the block's language) runs first,
in the same script: the files an example reads, or the `db` a fragment uses. A block in a
language the runner does not know fails the run unless it is skipped, so that no block goes
unchecked unnoticed.

    tools/readme_blocks.py --kura target/debug/kura --python .venv/bin/python --ruby-lib ruby/lib
    tools/readme_blocks.py --write-rust
"""

import argparse
import dataclasses
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
RUST_EXAMPLE = ROOT / "crates" / "kura" / "examples" / "readme.rs"
LANGUAGES = {"sh": "sh", "bash": "sh", "shell": "sh", "python": "python", "ruby": "ruby", "rust": "rust"}
MARKER = re.compile(r"^<!--\s*readme-test:\s*(skip|setup)\b\s*(.*?)\s*-->\s*$")
FENCE = re.compile(r"^```(\S*)\s*$")
# A block's time limit: the whole run is meant to take seconds, so a block that hangs (a
# server left running, a prompt) fails rather than stalls make test.
TIMEOUT_SECONDS = 60


class ReadmeError(Exception):
    """The README breaks the runner's rules (an unmarked unknown language, a skip without a
    reason, an unclosed fence)."""


@dataclasses.dataclass
class Block:
    line: int        # the opening fence's line, 1-based, to name the block in reports
    info: str        # the fence's info string as written (`sh`, `rust`, ...)
    language: str    # sh, python, ruby, rust; "" when unknown
    code: str
    setup: str = ""
    skip: str = ""   # the reason, when skipped

    @property
    def name(self):
        return f"README.md line {self.line} ({self.info or 'no language'})"


def parse(text):
    """The fenced blocks of `text`, each with the markers of the lines right above it."""
    blocks, markers, lines = [], [], text.splitlines()
    index = 0
    while index < len(lines):
        line = lines[index]
        marker = MARKER.match(line.strip())
        fence = FENCE.match(line)
        if marker:
            markers.append((index + 1, marker.group(1), marker.group(2)))
        elif fence:
            start = index
            index += 1
            body = []
            while index < len(lines) and not lines[index].startswith("```"):
                body.append(lines[index])
                index += 1
            if index == len(lines):
                raise ReadmeError(f"README.md line {start + 1}: the fence is never closed")
            blocks.append(make_block(start + 1, fence.group(1), "\n".join(body) + "\n", markers))
            markers = []
        elif line.strip():
            for number, kind, _ in markers:
                raise ReadmeError(f"README.md line {number}: a readme-test {kind} marker not right above a fence")
        index += 1
    return blocks


def make_block(line, info, code, markers):
    block = Block(line=line, info=info, language=LANGUAGES.get(info.split(",")[0].lower(), ""), code=code)
    for number, kind, argument in markers:
        if kind == "skip":
            reason = argument.strip()
            if reason.startswith("(") and reason.endswith(")"):
                reason = reason[1:-1].strip()
            if not reason:
                raise ReadmeError(f"README.md line {number}: a skip must say why: <!-- readme-test: skip (why) -->")
            block.skip = reason
        else:
            block.setup += argument + "\n"
    if not block.skip and not block.language:
        raise ReadmeError(f"{block.name}: no runner for this language; mark it <!-- readme-test: skip (why) -->")
    return block


def rust_example(blocks):
    """crates/kura/examples/readme.rs for the Rust blocks that run: each a module whose `main`
    the example's own main calls in a fresh directory. A block with its own `fn main` keeps
    it; a fragment becomes the body of one, after its setup."""
    modules, calls = [], []
    # Numbered in order, not by README line: an edit above a block does not make this stale.
    for number, block in enumerate(rust_blocks(blocks), 1):
        module = f"block_{number}"
        code = block.code.rstrip("\n")
        if re.search(r"^fn main\(", code, re.M):
            body = re.sub(r"^fn main\(", "pub fn main(", code, flags=re.M)
        else:
            inner = "\n".join(filter(None, [block.setup.rstrip("\n"), code]))
            body = ("pub fn main() -> Result<(), Box<dyn std::error::Error>> {\n"
                    + indent(inner) + "\n    Ok(())\n}")
        modules.append(f"/// The README's Rust block {number}.\npub mod {module} {{\n{indent(body)}\n}}")
        calls.append(f'        &|| Ok({module}::main()?),')
    header = '''//! Generated by tools/readme_blocks.py from README.md's Rust code blocks: do not edit it, run
//! `python3 tools/readme_blocks.py --write-rust` after changing them. It exists so that the
//! README's Rust examples are compiled with the other examples (`cargo test --workspace`) and
//! run by `make test` (tools/readme_blocks.py runs it in a scratch directory): each block is a
//! module, run in a fresh directory of its own.

// Generated and laid out as the README has it, so rustfmt leaves it alone; the README's
// fragments leave names unused, and its calls return errors of their own types (hence `Ok(..?)`).
#[rustfmt::skip]
#[allow(unused, clippy::all, reason = "the README's fragments: names left unused, and written for readers, not lints")]
mod blocks {
'''
    footer = '''
/// A block's entry point, with its error made common.
type Entry<'a> = &'a dyn Fn() -> Result<(), Box<dyn std::error::Error>>;

/// Runs each block in a fresh directory under the current one.
pub fn run_all() -> Result<(), Box<dyn std::error::Error>> {
    let blocks: [Entry; {count}] = [
{calls}
    ];
    let top = std::env::current_dir()?;
    for (index, run) in blocks.iter().enumerate() {
        let number = index + 1;
        let directory = top.join(format!("rust-block-{number}"));
        std::fs::create_dir_all(&directory)?;
        std::env::set_current_dir(&directory)?;
        run().map_err(|error| format!("rust block {number}: {error}"))?;
        println!("rust block {number}: ok");
    }
    Ok(())
}
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    blocks::run_all()
}
'''
    return header + "\n\n".join(modules) + "\n" + footer.replace("{calls}", "\n".join(calls)).replace("{count}", str(len(calls)))


def rust_blocks(blocks):
    return [block for block in blocks if block.language == "rust" and not block.skip]


def indent(text):
    return "\n".join("    " + line if line.strip() else "" for line in text.split("\n"))


def run_script(block, directory, options):
    """Runs a sh, python or ruby block in `directory`; returns (ok, output)."""
    script = block.setup + block.code
    suffix = {"sh": ".sh", "python": ".py", "ruby": ".rb"}[block.language]
    path = directory / f"readme-block{suffix}"
    path.write_text(script)
    env = dict(os.environ)
    if block.language == "sh":
        env["PATH"] = f"{Path(options.kura).resolve().parent}{os.pathsep}{env.get('PATH', '')}"
        command = ["bash", "-e", "-o", "pipefail", path.name]
    elif block.language == "python":
        command = [options.python, path.name]
    else:
        command = ["ruby", "-I", str(Path(options.ruby_lib).resolve()), path.name]
    return run(command, directory, env)


def run(command, directory, env=None, timeout=TIMEOUT_SECONDS):
    try:
        done = subprocess.run(command, cwd=directory, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return False, f"did not finish within {timeout} s"
    return done.returncode == 0, (done.stdout + done.stderr).strip()


def run_rust(directory, options):
    """Builds the examples as `cargo test --workspace` does (nothing to do after it: `cargo run
    -p kura` would resolve features for kura alone and build it again) and runs readme's."""
    build = [options.cargo, "build", "--quiet", "--workspace", "--examples",
             "--manifest-path", str(ROOT / "Cargo.toml")]
    # Nothing to build after `cargo test --workspace`; a build from scratch takes minutes.
    ok, output = run(build, ROOT, timeout=1800)
    if not ok:
        return False, output
    target = Path(os.environ.get("CARGO_TARGET_DIR") or ROOT / "target")
    return run([str((ROOT / target / "debug" / "examples" / "readme").resolve())], directory)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--readme", default=str(README))
    parser.add_argument("--kura", default=str(ROOT / "target" / "debug" / "kura"),
                        help="the kura binary the shell blocks call")
    parser.add_argument("--python", default=str(ROOT / ".venv" / "bin" / "python"))
    parser.add_argument("--ruby-lib", default=str(ROOT / "ruby" / "lib"))
    parser.add_argument("--cargo", default=os.environ.get("CARGO", "cargo"))
    parser.add_argument("--only", action="append", choices=sorted(set(LANGUAGES.values())),
                        help="run the blocks of this language only (repeatable)")
    parser.add_argument("--write-rust", action="store_true", help=f"regenerate {RUST_EXAMPLE.relative_to(ROOT)}")
    parser.add_argument("--keep", action="store_true", help="keep the scratch directory")
    options = parser.parse_args(argv)
    # The blocks run in a scratch directory: paths given relative to here must still lead here.
    options.kura, options.python, options.ruby_lib = (
        os.path.abspath(path) for path in (options.kura, options.python, options.ruby_lib))
    if os.sep in options.cargo:
        options.cargo = os.path.abspath(options.cargo)

    try:
        blocks = parse(Path(options.readme).read_text())
    except ReadmeError as error:
        print(f"readme_blocks: {error}", file=sys.stderr)
        return 2
    generated = rust_example(blocks)
    if options.write_rust:
        RUST_EXAMPLE.write_text(generated)
        print(f"readme_blocks: wrote {RUST_EXAMPLE.relative_to(ROOT)}")
        return 0
    if not RUST_EXAMPLE.exists() or RUST_EXAMPLE.read_text() != generated:
        print(f"readme_blocks: {RUST_EXAMPLE.relative_to(ROOT)} is not the README's Rust blocks; "
              "run python3 tools/readme_blocks.py --write-rust", file=sys.stderr)
        return 1

    wanted = {b.language for b in blocks if not b.skip and (not options.only or b.language in options.only)}
    missing = [f"{what} {path}" for language, what, path in
               [("sh", "the kura binary", options.kura), ("python", "the Python", options.python)]
               if language in wanted and not os.access(path, os.X_OK)]
    if missing:
        print(f"readme_blocks: no {' and no '.join(missing)}: build first (cargo test --workspace, make python)",
              file=sys.stderr)
        return 2

    scratch = Path(tempfile.mkdtemp(prefix="readme-blocks-"))
    failures, ran, skipped = [], [], []
    started = time.monotonic()
    try:
        for block in blocks:
            if block.skip:
                skipped.append(block)
                continue
            if options.only and block.language not in options.only:
                continue
            if block.language == "rust":
                continue  # all Rust blocks run below, as the one example
            directory = scratch / f"line-{block.line}"
            directory.mkdir()
            ok, output = run_script(block, directory, options)
            ran.append(block)
            print(f"{block.name}: {'ok' if ok else 'FAILED'}")
            if not ok:
                failures.append(block)
                print("    " + output.replace("\n", "\n    "))
        rust = rust_blocks(blocks)
        if rust and (not options.only or "rust" in options.only):
            ok, output = run_rust(scratch, options)
            ran.extend(rust)
            # The example numbers its blocks; name them by their README lines here.
            for number, block in enumerate(rust, 1):
                output = re.sub(rf"^rust block {number}:", f"{block.name}:", output, flags=re.M)
            print(output if ok else "rust blocks: FAILED\n    " + output.replace("\n", "\n    "))
            if not ok:
                failures.extend(rust)
    finally:
        if options.keep:
            print(f"readme_blocks: scratch kept in {scratch}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)
    counts = {}
    for block in ran:
        counts[block.language] = counts.get(block.language, 0) + 1
    by_language = ", ".join(f"{language} {count}" for language, count in sorted(counts.items()))
    print(f"readme_blocks: {len(ran)} blocks ran ({by_language}), {len(failures)} failed, "
          f"{len(skipped)} skipped, in {time.monotonic() - started:.1f} s")
    for block in skipped:
        print(f"    skipped {block.name}: {block.skip}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
