"""tools/readme_blocks.py: how it reads the README's blocks and markers, what it refuses, and
that the committed README and its generated Rust example agree. Running the blocks against
the build is `make test-readme`'s job."""

import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import readme_blocks  # noqa: E402


def test_blocks_carry_their_language_line_setup_and_skip_reason():
    text = (
        "# Title\n\n"
        "<!-- readme-test: skip (needs the network) -->\n"
        "```sh\ncurl example.org\n```\n\n"
        "<!-- readme-test: setup import kura -->\n"
        "<!-- readme-test: setup db = kura.open('x.kuh', 'c') -->\n"
        "```python\ndb[b'k'] = b'v'\n```\n"
        "```rust\nfn main() {}\n```\n"
    )
    skipped, python, rust = readme_blocks.parse(text)
    assert (skipped.line, skipped.language, skipped.skip) == (4, "sh", "needs the network")
    assert (python.line, python.setup, python.code) == (10, "import kura\ndb = kura.open('x.kuh', 'c')\n", "db[b'k'] = b'v'\n")
    assert (rust.line, rust.language, rust.skip, rust.setup) == (13, "rust", "", "")


@pytest.mark.parametrize("text, complaint", [
    ("```toml\na = 1\n```\n", "no runner for this language"),
    ("```\nplain\n```\n", "no runner for this language"),
    ("<!-- readme-test: skip -->\n```sh\ntrue\n```\n", "a skip must say why"),
    ("<!-- readme-test: skip () -->\n```sh\ntrue\n```\n", "a skip must say why"),
    ("<!-- readme-test: skip (why) -->\nSome prose.\n```sh\ntrue\n```\n", "not right above a fence"),
    ("```sh\ntrue\n", "never closed"),
])
def test_what_the_runner_refuses(text, complaint):
    with pytest.raises(readme_blocks.ReadmeError, match=complaint):
        readme_blocks.parse(text)


def test_an_unknown_language_passes_when_skipped():
    (block,) = readme_blocks.parse("<!-- readme-test: skip (configuration, not code) -->\n```toml\na = 1\n```\n")
    assert block.skip == "configuration, not code"


def test_rust_blocks_become_numbered_modules_fragments_wrapped_after_their_setup():
    blocks = readme_blocks.parse(
        "```rust\nfn main() -> kura::Result<()> {\n    Ok(())\n}\n```\n"
        "<!-- readme-test: skip (illustration) -->\n```rust\nnot rust at all\n```\n"
        "<!-- readme-test: setup let x = 1; -->\n```rust\nassert_eq!(x, 1);\n```\n")
    source = readme_blocks.rust_example(blocks)
    assert "pub mod block_1 {\n    pub fn main() -> kura::Result<()> {" in source
    assert "pub fn main() -> Result<(), Box<dyn std::error::Error>> {\n        let x = 1;\n        assert_eq!(x, 1);\n        Ok(())" in source
    assert "not rust at all" not in source
    assert "let blocks: [Entry; 2] = [" in source


def test_a_failing_shell_block_fails_with_its_output(tmp_path):
    (block,) = readme_blocks.parse("<!-- readme-test: setup echo from-setup -->\n```sh\nfalse\necho unreachable\n```\n")
    options = SimpleNamespace(kura=str(tmp_path / "kura"), python=sys.executable, ruby_lib=str(tmp_path))
    ok, output = readme_blocks.run_script(block, tmp_path, options)
    assert not ok
    assert "from-setup" in output and "unreachable" not in output


def test_the_readme_parses_and_its_rust_example_is_current():
    blocks = readme_blocks.parse(readme_blocks.README.read_text())
    assert any(not block.skip for block in blocks)
    assert all(block.language or block.skip for block in blocks)
    assert readme_blocks.RUST_EXAMPLE.read_text() == readme_blocks.rust_example(blocks), \
        "run python3 tools/readme_blocks.py --write-rust"
