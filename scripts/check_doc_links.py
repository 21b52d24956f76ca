#!/usr/bin/python3
"""check_doc_links.py: does every link of README.md and docs/ lead somewhere?

Sections move between the README and the pages of docs/; a link to one
that moved breaks silently. For every markdown link and image
`[text](target)` of README.md and docs/*.md (outside code), whose target
is not a URL (http:, https:, mailto:):

- the file it names, relative to the page, exists;
- its `#anchor`, on a markdown page (or the same page, for `(#anchor)`),
  is one of that page's headings, as GitHub makes anchors of them:
  lowercased, punctuation dropped, spaces made hyphens, a repeated heading
  numbered -1, -2, ...

Exit status: the number of broken links. Usage:
scripts/check_doc_links.py [--readme README.md] [--docs docs]
Python's standard library only.
"""
import argparse
import os
import re
import sys

from check_doc_commands import prose
from doc_pages import pages

LINK_RE = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(([^)\s]+)\)")


def anchors(text):
    """The anchors GitHub makes of TEXT's headings."""
    seen, out = {}, set()
    for line in prose(text).splitlines():
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        slug = re.sub(r"[^\w\- ]", "", m.group(1).lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--readme", default="README.md")
    ap.add_argument("--docs", default="docs")
    args = ap.parse_args()
    problems, n = [], 0
    for path, text in pages(args.readme, args.docs):
        body = re.sub(r"`[^`]*`", lambda m: re.sub(r"[^\n]", " ", m.group(0)), prose(text))
        for m in LINK_RE.finditer(body):
            target = m.group(1)
            if re.match(r"^(https?|mailto):", target):
                continue
            n += 1
            where = f"{path}:{body.count(chr(10), 0, m.start()) + 1}"
            file, _, anchor = target.partition("#")
            dest = os.path.normpath(os.path.join(os.path.dirname(path), file)) if file else path
            if not os.path.exists(dest):
                problems.append(f"{where}: the link ({target}) names {dest}, which does not exist")
            elif anchor and dest.endswith(".md"):
                if anchor not in anchors(open(dest, encoding="utf-8").read()):
                    problems.append(f"{where}: the link ({target}): {dest} has no heading with the anchor #{anchor}")
    for p in problems:
        print(p)
    print(f"check_doc_links: {n} links, {len(problems)} broken")
    sys.exit(min(len(problems), 100))


if __name__ == "__main__":
    main()
