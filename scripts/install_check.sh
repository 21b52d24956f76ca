#!/usr/bin/env bash
# install_check.sh: does `make install` install tinygpt, and `make uninstall`
# remove it, exactly?
#
#   scripts/install_check.sh      (from the top of the repository; make install-check)
#
# Twice, each time into a fresh temporary DESTDIR: with the Makefile's
# default PREFIX (/usr/local), then with PREFIX=/opt/tinygpt. Each round:
#
# 1. Two files of someone else's are put where ours go (bin/ and man1/).
# 2. make install: $PREFIX/bin/tinygpt (mode 755, the same bytes as
#    ./tinygpt) and $PREFIX/share/man/man1/tinygpt.1 (mode 644, the same as
#    build/tinygpt.1) must be there, and no other new file.
# 3. The installed tinygpt, found on the PATH from a directory outside the
#    repository, prints the same --version as ./tinygpt, and --help of
#    itself and of every command it lists exits 0.
# 4. The installed page is rendered (man -l, else groff, else mandoc, else
#    its roff text read as it is), without a warning from the formatter: it
#    must have NAME, SYNOPSIS, DESCRIPTION and COMMANDS, name the installed
#    version, and hold a subsection "tinygpt COMMAND" for every command, in
#    which every flag of that command's --help appears.
# 5. make uninstall with the same DESTDIR and PREFIX: only the two files of
#    step 1 remain.
#
# Exit status 0 when all holds; otherwise each failure is printed and the
# status is 1.
set -euo pipefail
cd "$(dirname "$0")/.."

# The rounds test the Makefile's own default PREFIX: nothing from a calling
# make's command line or the environment may set it.
unset MAKEFLAGS MFLAGS MAKELEVEL PREFIX DESTDIR
export LC_ALL=C

failures=0
fail() { echo "install-check: FAIL: $*" >&2; failures=$((failures + 1)); }

for f in tinygpt build/tinygpt.1; do
    [[ -s $f ]] || { echo "install-check: no $f; run make install-check" >&2; exit 1; }
done
want_version=$(./tinygpt --version)
mapfile -t commands < <(./tinygpt --help | awk '/^commands:/ { on = 1; next } on && /^$/ { exit } on && $1 !~ /^-/ { print $1 }')
((${#commands[@]} >= 1)) || { echo "install-check: ./tinygpt --help lists no commands" >&2; exit 1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# files DIR: every file and link under DIR, one a line, sorted.
files() { (cd "$1" && find . \( -type f -o -type l \) | sort); }

# render PAGE: the page as plain text; what the formatter warned, in
# $tmp/warnings. Without a formatter, the roff text itself, its headings
# put where man puts them and its escapes removed.
render() {
    if command -v man >/dev/null; then
        MANWIDTH=100 man --warnings -l "$1" 2>"$tmp/warnings"
    elif command -v groff >/dev/null; then
        groff -man -Tascii -ww -P-cbou "$1" 2>"$tmp/warnings"
    elif command -v mandoc >/dev/null; then
        mandoc -Tascii -Wwarning "$1" 2>"$tmp/warnings" | sed "s/.\x08//g"
    else
        echo "install-check: no man, groff or mandoc: the page is read as roff" >&2
        : >"$tmp/warnings"
        sed -e '/^\.SH /{s/^\.SH "\{0,1\}\([^"]*\)"\{0,1\}$/\1/;b' -e '}' \
            -e '/^\.SS /{s/^\.SS "\([^"]*\)"$/   \1/;b' -e '}' \
            -e 's/^\.TH //' -e '/^\./d' -e 's/\\f[BIRP]//g' -e 's/\\-/-/g' -e 's/^/       /' "$1"
    fi
}

round=0
for prefix in "" /opt/tinygpt; do
    round=$((round + 1))
    dest=$tmp/dest$round
    p=${prefix:-/usr/local}
    make_args=(DESTDIR="$dest")
    [[ -n $prefix ]] && make_args+=(PREFIX="$prefix")
    bin=$dest$p/bin/tinygpt
    page=$dest$p/share/man/man1/tinygpt.1
    echo "install-check: round $round: make install ${make_args[*]}"

    # 1. Someone else's files, which uninstall must leave.
    mkdir -p "$dest$p/bin" "$dest$p/share/man/man1"
    echo other >"$dest$p/bin/other-tool"
    echo other >"$dest$p/share/man/man1/other-tool.1"
    before=$(files "$dest")

    # 2. What install put, and where.
    make --no-print-directory install "${make_args[@]}" >"$tmp/install.log" 2>&1 ||
        { cat "$tmp/install.log" >&2; fail "make install ${make_args[*]} failed"; continue; }
    added=$(comm -13 <(echo "$before") <(files "$dest"))
    expected=$(printf './%s\n' "${bin#"$dest"/}" "${page#"$dest"/}" | sort)
    [[ $added == "$expected" ]] || fail "make install added"$'\n'"$added"$'\n'"instead of"$'\n'"$expected"
    [[ -f $bin ]] || { fail "no $bin"; continue; }
    [[ -f $page ]] || { fail "no $page"; continue; }
    [[ $(stat -c %a "$bin") == 755 ]] || fail "$bin has mode $(stat -c %a "$bin"), not 755"
    [[ $(stat -c %a "$page") == 644 ]] || fail "$page has mode $(stat -c %a "$page"), not 644"
    cmp -s "$bin" tinygpt || fail "$bin is not ./tinygpt"
    cmp -s "$page" build/tinygpt.1 || fail "$page is not build/tinygpt.1"

    # 3. The installed tinygpt runs, by name, away from the repository.
    got_version=$(cd "$tmp" && PATH="$dest$p/bin:$PATH" tinygpt --version) || fail "installed tinygpt --version failed"
    [[ $got_version == "$want_version" ]] || fail "installed tinygpt --version says '$got_version', ./tinygpt '$want_version'"
    (cd "$tmp" && PATH="$dest$p/bin:$PATH" tinygpt --help >/dev/null) || fail "installed tinygpt --help failed"
    for c in "${commands[@]}"; do
        (cd "$tmp" && PATH="$dest$p/bin:$PATH" tinygpt "$c" --help >"$tmp/help-$c") || fail "installed tinygpt $c --help failed"
    done

    # 4. The page renders and covers every command.
    render "$page" >"$tmp/page.txt" || fail "rendering $page failed"
    if [[ -s $tmp/warnings ]]; then fail "rendering $page warned: $(cat "$tmp/warnings")"; fi
    for section in NAME SYNOPSIS DESCRIPTION COMMANDS; do
        grep -qx "$section" "$tmp/page.txt" || fail "the page has no section $section"
    done
    grep -qF "$want_version" "$tmp/page.txt" || fail "the page does not name the version '$want_version'"
    for c in "${commands[@]}"; do
        # The subsection: from its heading to the next heading.
        awk -v head="   tinygpt $c" '$0 == head { on = 1; next } on && (/^   tinygpt [a-z0-9_-]+$/ || /^[A-Z]/) { exit } on' \
            "$tmp/page.txt" >"$tmp/section-$c"
        if [[ ! -s $tmp/section-$c ]]; then
            fail "the page has no subsection 'tinygpt $c'"
            continue
        fi
        while read -r flag; do
            grep -qE -- "(^|[^a-z0-9-])$flag([^a-z0-9-]|\$)" "$tmp/section-$c" ||
                fail "the page's 'tinygpt $c' does not name its flag $flag"
        done < <(grep -oE '^  --[a-z0-9-]+' "$tmp/help-$c" | sed 's/^ *//')
    done

    # 5. Uninstall leaves what was there before, no more, no less.
    make --no-print-directory uninstall "${make_args[@]}" >"$tmp/uninstall.log" 2>&1 ||
        { cat "$tmp/uninstall.log" >&2; fail "make uninstall ${make_args[*]} failed"; continue; }
    after=$(files "$dest")
    [[ $after == "$before" ]] || fail "after make uninstall ${make_args[*]}, the files are"$'\n'"$after"$'\n'"instead of"$'\n'"$before"
done

if ((failures)); then
    echo "install-check: $failures failures" >&2
    exit 1
fi
echo "install-check: make install and uninstall, default PREFIX and PREFIX=/opt/tinygpt: the binary runs, the page renders with all ${#commands[@]} commands and their flags, uninstall leaves only others' files"
