#!/usr/bin/env bash
# Builds the two gems into target/dist/ (`make gem`, after `make ruby` built the extension):
#   kura-VERSION.gem               the source gem: lib/ plus ext/kura/ (extconf.rb and the
#                                  crates kura and kura-ruby in a workspace of their own);
#                                  `gem install` compiles the extension with cargo
#   kura-VERSION-PLATFORM.gem      the platform gem: lib/ with this machine's compiled
#                                  lib/kura/kura_ext.so, for this Ruby's ABI; nothing to build
# Both are built from a staging copy under target/gem/, so nothing is written into ruby/.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
dist=$root/target/dist
stage=$root/target/gem/stage
extension=$root/ruby/lib/kura/kura_ext.so
[ -f "$extension" ] || { echo "gem: $extension is missing (run make ruby)" >&2; exit 1; }

rm -rf "$stage"
mkdir -p "$stage/lib/kura" "$stage/ext/kura/crates" "$dist"
cp ruby/kura.gemspec README.md LICENSE CHANGELOG.md "$stage/"
cp ruby/lib/kura.rb "$stage/lib/"
cp ruby/lib/kura/*.rb "$stage/lib/kura/"
cp ruby/ext/kura/extconf.rb "$stage/ext/kura/"
# The crates as git tracks them (no build output), their sources only: tests, examples and
# benchmarks stay in the repository.
for crate in kura kura-ruby; do
	git ls-files "crates/$crate/Cargo.toml" "crates/$crate/build.rs" "crates/$crate/src" |
		while read -r file; do
			mkdir -p "$stage/ext/kura/$(dirname "$file")"
			cp "$file" "$stage/ext/kura/$file"
		done
done
# A workspace of the two crates, with the settings they inherit from the repository's
# (version, edition, license, lints, the release profile) and its lock file: the gem builds
# the same dependency versions the repository tests.
python3 - "$root/Cargo.toml" "$stage/ext/kura/Cargo.toml" <<'PY'
import re, sys
source = open(sys.argv[1]).read()
kept = []
for section in re.split(r"(?m)^(?=\[)", source):
    name = section.split("]", 1)[0].lstrip("[")
    if name.startswith(("workspace.package", "workspace.lints", "profile.release")):
        kept.append(section.rstrip() + "\n")
header = ('# Written by ruby/gem.sh: the crates the Ruby extension builds from.\n'
          '[workspace]\nresolver = "2"\nmembers = ["crates/kura", "crates/kura-ruby"]\n\n')
open(sys.argv[2], "w").write(header + "\n".join(kept))
PY
cp Cargo.lock "$stage/ext/kura/Cargo.lock"

rm -f "$dist"/kura-*.gem
cd "$stage"
KURA_GEM=source gem build kura.gemspec --output "$dist/kura-source.gem"
cp "$extension" "$stage/lib/kura/kura_ext.so"
KURA_GEM=platform gem build kura.gemspec --output "$dist/kura-platform.gem"
# Named as RubyGems names them (gem build --output takes the name as given).
version=$(ruby -Ilib -e 'require "kura/version"; print Kura::VERSION')
platform=$(ruby -e 'print Gem::Platform.local')
mv "$dist/kura-source.gem" "$dist/kura-$version.gem"
mv "$dist/kura-platform.gem" "$dist/kura-$version-$platform.gem"
ls -l "$dist"/kura-*.gem
