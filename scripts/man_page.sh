#!/usr/bin/env bash
# man_page.sh: tinygpt's man page, made from its own --help texts.
#
#   scripts/man_page.sh TINYGPT OUT.1
#
# help2man (Debian's tool for this; `scripts/setup.sh --man` installs it)
# turns `tinygpt --help` and `--version` into the page's NAME, DESCRIPTION
# (the list of commands) and version. help2man knows one --help per
# program, so each command's own page is made by help2man too, with
# --help-option "COMMAND --help", and the body of each (its usage line,
# description, flags and example) becomes a subsection "tinygpt COMMAND" of
# a COMMANDS section, passed to the main page through --include. The
# commands are read from `tinygpt --help`, so a new command is in the page
# without a change here. Nothing is written to OUT.1 unless every step
# succeeds.
set -euo pipefail

if (($# != 2)); then
    echo "usage: $0 TINYGPT OUT.1" >&2
    exit 2
fi
tinygpt=$1 out=$2
command -v help2man >/dev/null || { echo "man_page: no help2man; run scripts/setup.sh --man" >&2; exit 1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The commands: the first word of each line of the "commands:" block of
# `tinygpt --help`, up to its first blank line.
mapfile -t commands < <("$tinygpt" --help | awk '/^commands:/ { on = 1; next } on && /^$/ { exit } on && $1 !~ /^-/ { print $1 }')
if ((${#commands[@]} == 0)); then
    echo "man_page: found no commands in '$tinygpt --help'" >&2
    exit 1
fi

name="train GPT models on a text file, with every forward and backward pass written by hand"
{
    echo "[SYNOPSIS]"
    echo ".B tinygpt"
    echo ".I COMMAND"
    echo ".RI [ flags ]"
    echo ".br"
    echo ".B tinygpt"
    echo ".I COMMAND"
    echo ".B \\-\\-help"
    echo ".br"
    echo ".B tinygpt"
    echo ".B \\-\\-version"
    echo "[COMMANDS]"
    for c in "${commands[@]}"; do
        help2man --no-info --name "$name" --help-option "$c --help" --output "$tmp/$c.1" "$tinygpt"
        echo ".SS \"tinygpt $c\""
        # The body: all after DESCRIPTION; its own subsection titles
        # ("flags:", "example:") become bold paragraphs within this one; a
        # line that help2man's --include would read as a section ("[...]" or
        # "/.../") starts with \& (roff's nothing) instead.
        sed -n '/^\.SH DESCRIPTION$/,$p' "$tmp/$c.1" |
            sed -e '1d' -e 's/^\.SS "\(.*\)"$/.PP\n.B "\1"/' -e 's|^\([[/]\)|\\\&\1|'
        if ! grep -q '^\.TP' "$tmp/$c.1"; then
            echo "man_page: '$tinygpt $c --help' listed no flags" >&2
            exit 1
        fi
    done
} > "$tmp/include"

help2man --no-info --name "$name" --include "$tmp/include" --output "$tmp/tinygpt.1" "$tinygpt"
mkdir -p "$(dirname "$out")"
mv "$tmp/tinygpt.1" "$out"
