#!/usr/bin/env bash
# Installs a gem that `make gem` built into a scratch GEM_HOME with `gem install --local`
# (no index: the gem has no dependencies) and runs smoke.rb from a directory outside the
# repository, where only the installed gem can answer `require "kura"`.
#   ruby/test/installed/check.sh platform   the platform gem (nothing to compile; make test)
#   ruby/test/installed/check.sh source     the source gem: cargo compiles the extension at
#                                           install time (minutes; make test-gem-source)
set -euo pipefail
cd "$(dirname "$0")/../../.."
root=$PWD
kind=${1:-platform}
version=$(ruby -Iruby/lib -e 'require "kura/version"; print Kura::VERSION')
case $kind in
	platform) gem=$root/target/dist/kura-$version-$(ruby -e 'print Gem::Platform.local').gem ;;
	source) gem=$root/target/dist/kura-$version.gem ;;
	*) echo "usage: $0 platform|source" >&2; exit 2 ;;
esac
[ -f "$gem" ] || { echo "test-gem: $gem is missing (run make gem)" >&2; exit 1; }

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
cp ruby/test/installed/smoke.rb README.md "$scratch/"
export GEM_HOME=$scratch/gems GEM_PATH=$scratch/gems
# RUBYLIB and RUBYOPT could point back into the repository: cleared.
unset RUBYLIB RUBYOPT
gem install --local --no-document "$gem"
(cd "$scratch" && ruby smoke.rb "$root" README.md)
