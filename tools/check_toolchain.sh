#!/bin/sh
# Builds each program of tools/toolchain_check/ with the rustc on the PATH at -O and compares
# what it prints with its .expected file: a compiler that miscompiles one of them is named,
# with the program, so that whoever builds Kura's release artifacts with it knows. Warns (exit
# 0) unless STRICT_TOOLCHAIN=1, since CI's own compiler may be the affected one; the tests
# themselves run debug builds.
set -u
here=$(cd "$(dirname "$0")" && pwd)
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
version=$(rustc --version)
failed=0
for program in "$here"/toolchain_check/*.rs; do
    name=$(basename "$program" .rs)
    if ! rustc --edition 2021 -O "$program" -o "$scratch/$name" 2>"$scratch/$name.log"; then
        echo "check-toolchain: $version could not build $program:"; cat "$scratch/$name.log"; failed=1; continue
    fi
    if "$scratch/$name" >"$scratch/$name.out" 2>&1 && cmp -s "$scratch/$name.out" "$here/toolchain_check/$name.expected"; then
        echo "check-toolchain: $version builds $name correctly at -O"
    else
        echo "check-toolchain: WARNING: $version miscompiles tools/toolchain_check/$name.rs at -O (see its" \
             "header); release builds of Kura from this compiler are suspect: build them with a rustc that" \
             "passes this check"
        failed=1
    fi
done
if [ "$failed" = 1 ] && [ "${STRICT_TOOLCHAIN:-0}" = 1 ]; then
    exit 1
fi
exit 0
