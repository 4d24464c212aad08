"""The layers of docs/architecture.md hold: no import cycle, no import from a lower layer up.

accounting <- vflpriv core (errors, data, optim, kernels, runtime) <- families (vertical, sparse,
horizontal) <- backends (vflpriv.flower) <- commands (cli, bench, reproduce, audit, ...).

The import graph is read from the source (every ``import``, at module level or inside a function,
except under ``if TYPE_CHECKING``).  A name imported from a package resolves to the submodule
that defines it when the package's ``__init__`` only re-exports it, so ``from . import x`` inside
a package is not a cycle with that package, while a module importing a name its own package
defines (or a package's ``__init__`` importing back) is.
"""
import ast
import functools
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGES = ("accounting", "vflpriv")


def _modules():
    mods = {}
    for pkg in PACKAGES:
        for dirpath, _, files in os.walk(os.path.join(ROOT, pkg)):
            for f in files:
                if f.endswith(".py"):
                    path = os.path.join(dirpath, f)
                    name = os.path.relpath(path, ROOT)[:-3].replace(os.sep, ".")
                    mods[name.removesuffix(".__init__")] = path
    return mods


def _extension(package, name):
    """``package.name`` is a compiled extension module (no .py source to read)."""
    folder = os.path.join(ROOT, *package.split("."))
    return os.path.isdir(folder) and any(f.startswith(name + ".") and not f.endswith(".py")
                                         for f in os.listdir(folder))


def _imports(tree):
    """Import nodes, skipping ``if TYPE_CHECKING:`` blocks."""
    out = []

    def visit(node):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                continue
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                out.append(child)
            visit(child)
    visit(tree)
    return out


@functools.lru_cache(maxsize=1)
def _graph():
    """The import graph of the source, read once for the module's tests (each only reads it:
    parsing every module takes 2-20 s on this machine)."""
    mods = _modules()
    trees = {m: ast.parse(open(p).read()) for m, p in mods.items()}
    is_pkg = {m: p.endswith("__init__.py") for m, p in mods.items()}

    def absolute(m, node):
        if not node.level:
            return node.module
        base = m.split(".") if is_pkg[m] else m.split(".")[:-1]
        base = base[:len(base) - (node.level - 1)]
        return ".".join(base + ([node.module] if node.module else []))

    # names each package's __init__ re-exports from a submodule: pkg -> {name: module}
    reexports = {}
    for m, tree in trees.items():
        if not is_pkg[m]:
            continue
        names = {}
        for node in tree.body:
            if isinstance(node, ast.ImportFrom):
                src = absolute(m, node)
                for a in node.names:
                    target = f"{src}.{a.name}" if f"{src}.{a.name}" in mods else src
                    if target in mods and target != m:
                        names[a.asname or a.name] = target
        reexports[m] = names

    def owner(name):
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name

    edges = {m: set() for m in mods}
    for m, tree in trees.items():
        for node in _imports(tree):
            if isinstance(node, ast.Import):
                targets = [owner(a.name) for a in node.names]
            else:
                src = absolute(m, node)
                targets = []
                for a in node.names:
                    if f"{src}.{a.name}" in mods:
                        targets.append(f"{src}.{a.name}")
                    elif _extension(src, a.name):
                        continue                      # a compiled module (accounting._kernels)
                    elif a.name in reexports.get(src, {}):
                        targets.append(reexports[src][a.name])
                    else:
                        targets.append(owner(src))
            edges[m].update(t for t in targets if t and t != m)
    return edges


def _cycles(edges):
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def strong(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    import sys
    sys.setrecursionlimit(10000)
    for v in sorted(edges):
        if v not in index:
            strong(v)
    return out


#: layer of each top-level part (higher imports lower, never the reverse)
LAYERS = {"accounting": 0,
          "vflpriv": 1, "vflpriv.errors": 1, "vflpriv.outputs": 1, "vflpriv.data": 1,
          "vflpriv.optim": 1, "vflpriv.kernels": 1, "vflpriv.runtime": 1, "vflpriv.noise": 1,
          "vflpriv.vertical": 2, "vflpriv.sparse": 2, "vflpriv.horizontal": 2,
          "vflpriv.estimators": 3, "vflpriv.flower": 3, "vflpriv.align": 3, "vflpriv.model": 3,
          "vflpriv.audit": 4, "vflpriv.bench": 4, "vflpriv.examples": 4,
          # reproduce drives the commands as a user would (a figure = a command line)
          "vflpriv.cli": 5, "vflpriv.reproduce": 5, "vflpriv.__main__": 5}


def _layer(module):
    parts = module.split(".")
    for n in (2, 1):
        key = ".".join(parts[:n])
        if key in LAYERS:
            return key, LAYERS[key]
    raise KeyError(module)


def test_no_import_cycle():
    cycles = _cycles(_graph())
    assert cycles == [], "import cycles: " + "; ".join(" <-> ".join(c) for c in cycles)


def test_every_module_has_a_layer():
    for m in _graph():
        _layer(m)


def test_no_import_from_a_lower_layer_up():
    upward = []
    for m, targets in sorted(_graph().items()):
        part, level = _layer(m)
        for t in sorted(targets):
            tpart, tlevel = _layer(t)
            if tlevel > level and m != "vflpriv":        # the package root re-exports lazily
                upward.append(f"{m} -> {t}")
    assert upward == [], "upward imports: " + "; ".join(upward)


def test_the_families_and_the_core_never_import_flower_or_the_cli():
    bad = [f"{m} -> {t}" for m, ts in _graph().items() for t in ts
           if _layer(m)[1] <= 2 and t.split(".")[:2] in (["vflpriv", "flower"], ["vflpriv", "cli"])]
    assert bad == []


def test_the_checker_finds_a_cycle_and_an_upward_import():
    # the checks can fail: a made-up graph with a cycle through a package and an upward edge
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}
    assert _cycles(edges) == [["a", "b", "c"]]
    with pytest.raises(KeyError):
        _layer("elsewhere.module")
