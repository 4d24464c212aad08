"""No stale reference: every file a page or a docstring names exists, and every page in docs/ is
reachable from the docs index (docs/README.md).

Scanned: README.md, datasets/README.md, every ``.md`` under docs/, and the docstrings (module,
class, function) of vflpriv/, accounting/ and the scripts in docs/.  A reference is

* a Markdown link ``[text](target)`` (resolved from the page's folder; web links are skipped);
* a repository path: a word starting ``docs/``, ``vflpriv/``, ``accounting/``, ``tests/``,
  ``datasets/`` or ``_ext/`` (from the repository's root); a path with a capitalised placeholder
  (``docs/fedp3/eps_E_seedS.json``) or a ``*`` must match at least one file;
* a bare page name ``NAME.md``: some file in the repository has that name;
* a path that leaves the repository (``../something`` from the page's folder; from the root in
  a docstring), which is never right in a shipped page.
"""
import ast
import glob
import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_PREFIX = r"(?:docs|vflpriv|accounting|tests|datasets|_ext)/"
_PATH = re.compile(r"(?<![\w./-])(" + _PREFIX + r"[\w./*{},-]*[\w*}])")
_BARE = re.compile(r"(?<![\w./-])([\w-]+\.md)\b")
_OUTSIDE = re.compile(r"(?<![\w./-])((?:\.\./)+[\w./-]*\w)")
_LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")

#: paths that name a file inside another package, not this repository
FOREIGN = {
    "datasets/fair/fair.csv": "statsmodels' copy of the Fair (1978) data (the peers' tables)",
    "datasets/anes96/anes96.csv": "statsmodels' copy of ANES 1996 (the peers' tables)",
}
#: placeholders written as a file name (any tutorial: docs/tutorials/01_certify.py, ...)
PLACEHOLDERS = {"NAME.md", "NN_name.md", "docs/tutorials/NN_name.py"}

#: (file, reference) pairs in files other engineers are changing at the same time; each to be
#: fixed there (the reference and the fix are named)
PENDING = {
}


def _names():
    out = set()
    for d, dirs, files in os.walk(ROOT):
        dirs[:] = [x for x in dirs if not x.startswith(".") and not x.endswith(".egg-info")]
        out.update(files)
    return out


def _exists(token):
    if token in FOREIGN or token in PLACEHOLDERS or "{" in token:
        return True
    pattern = re.sub(r"[A-Z]+", "*", token)
    if "*" in pattern:
        return bool(glob.glob(os.path.join(ROOT, pattern)))
    return os.path.exists(os.path.join(ROOT, token))


def _stale(text, names, base=""):
    """Every stale reference in ``text`` (paths from the repository's root, bare page names, and
    ``../`` paths that leave the repository from ``base``, the page's folder)."""
    bad = []
    for m in _PATH.finditer(text):
        tok = m.group(1).rstrip(".,;:")
        if not _exists(tok):
            bad.append(tok)
    bad += [m.group(1) for m in _BARE.finditer(text)
            if m.group(1) not in names and m.group(1) not in PLACEHOLDERS]
    bad += [m.group(1) for m in _OUTSIDE.finditer(text)
            if os.path.normpath(os.path.join(base, m.group(1))).startswith("..")]
    return bad


def _pages():
    return ["README.md", os.path.join("datasets", "README.md")] + sorted(
        os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "docs", "**", "*.md"),
                                                     recursive=True))


def _links(page):
    """The local targets of ``page``'s Markdown links, as paths from the repository's root."""
    with open(os.path.join(ROOT, page)) as fh:
        text = fh.read()
    out = []
    for m in _LINK.finditer(text):
        target = m.group(1)
        if re.match(r"[a-z]+:", target):
            continue
        out.append(os.path.normpath(os.path.join(os.path.dirname(page), target)))
    return out


def _docstrings(path):
    with open(path) as fh:
        tree = ast.parse(fh.read())
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node, clean=False)
            if doc:
                yield doc


def _sources():
    out = []
    for top in ("vflpriv", "accounting"):
        out += glob.glob(os.path.join(ROOT, top, "**", "*.py"), recursive=True)
    out += glob.glob(os.path.join(ROOT, "docs", "**", "*.py"), recursive=True)
    return sorted(os.path.relpath(p, ROOT) for p in out)


def _drop_pending(where, refs):
    return [r for r in refs if (where, r) not in PENDING]


@pytest.mark.parametrize("page", _pages())
def test_page_names_only_files_that_exist(page):
    names = _names()
    with open(os.path.join(ROOT, page)) as fh:
        text = fh.read()
    bad = _drop_pending(page, _stale(text, names, os.path.dirname(page)))
    bad += [f"link {t}" for t in _links(page) if not os.path.exists(os.path.join(ROOT, t))]
    assert not bad, f"{page}: {bad}"


def test_docstrings_name_only_files_that_exist():
    names = _names()
    bad = []
    for src in _sources():
        for doc in _docstrings(os.path.join(ROOT, src)):
            bad += [f"{src}: {r}" for r in _drop_pending(src, _stale(doc, names))]
    assert not bad, bad


def test_the_scan_finds_what_it_should():
    names = _names()
    assert _stale("see DESIGN.md, docs/nope.md and ../shared/DESIGN.md", names) == \
        ["docs/nope.md", "DESIGN.md", "../shared/DESIGN.md"]
    assert _stale("docs/fedp3/eps_E_seedS.json, vflpriv/flower/*.py, docs/README.md.", names) == []
    assert _stale("vflpriv/flower/sparse.py", names) == ["vflpriv/flower/sparse.py"]


def test_every_docs_page_is_reachable_from_the_index():
    """From docs/README.md, following local links (a folder reaches its README.md, or every page
    in it when it has none), every ``.md`` under docs/ is reached."""
    start = os.path.join("docs", "README.md")
    seen, todo = {start}, [start]
    while todo:
        page = todo.pop()
        for t in _links(page):
            full = os.path.join(ROOT, t)
            if os.path.isdir(full):
                idx = os.path.join(t, "README.md")
                found = [idx] if os.path.exists(os.path.join(ROOT, idx)) else sorted(
                    os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(full, "*.md")))
            else:
                found = [t] if t.endswith(".md") and os.path.exists(full) else []
            for f in found:
                if f not in seen:
                    seen.add(f)
                    todo.append(f)
    pages = {p for p in _pages() if p.startswith("docs" + os.sep)}
    assert not pages - seen, sorted(pages - seen)


def test_the_readme_links_the_index():
    assert os.path.join("docs", "README.md") in _links("README.md")
