"""doc_pages.py: the pages the documentation checks read.

tinygpt's documentation is README.md (what it is, the commands, the reading
path) and one page per subject in docs/*.md. The checks of `make
readme-check` (check_readme_flags.py, check_readme_keys.py,
check_doc_commands.py) read them all through pages(), so a table or an
example may live on whichever page suits it. Python's standard library only.
"""
import glob
import os


def pages(readme="README.md", docs="docs"):
    """[(path, text)]: README first, then every DOCS/*.md in name order.
    A page that cannot be read stops the check, naming it."""
    paths = [readme] + sorted(glob.glob(os.path.join(docs, "*.md")))
    out = []
    for path in paths:
        try:
            with open(path, encoding="utf-8") as f:
                out.append((path, f.read()))
        except (OSError, UnicodeDecodeError) as e:
            raise SystemExit(f"{path}: cannot be read: {e}")
    return out
