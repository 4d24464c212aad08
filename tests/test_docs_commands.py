"""Every ``vflpriv ...`` command in a code block of README.md and docs/*.md runs as written.

The commands are extracted from the pages (a ``$`` prompt and ``\\`` continuations allowed;
lines of output such as ``vflpriv run: warning: ...`` are not commands), and each page's
commands run in order, in one fresh working directory, so a page's later command sees what its
earlier ones wrote (a ledger, a JSON).  A code block whose first line is ``# relative/path``
(a plan in docs/certify.md) is written to that path first.  A command that cannot run here is
in :data:`SKIP` with the reason; one that takes more than a few seconds is in :data:`SLOW` and
runs only in the slow selection (``-m slow``).  A command shown ending with another exit code
than 0 (a refused run) is in :data:`EXIT`.  A command in a page that is not in the pages any
more fails the table test, so the tables cannot rot.
"""
import os
import re
import shlex
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAGES = ["README.md"] + sorted(os.path.join("docs", f) for f in os.listdir(os.path.join(ROOT, "docs"))
                               if f.endswith(".md"))

#: command (as extracted, continuations joined) -> why it cannot run in the test suite
SKIP = {
    "vflpriv fedp3 --data digits --clients 10 --rounds 15 --scheme opu2 --local-pruning fixed "
    "--keep-ratio 0.9 --epsilon E --delta 1e-5 --clip 1 --batch-size 16 --seed 0 --json e_E.json":
        "a template: E stands for each epsilon of the table",
    "vflpriv fedp3 --data digits --model M --clients 10 --rounds 10 --scheme S --global-pruning G "
    "--keep-ratio 0.9 --local-epochs 2 --lr 0.3 --batch-size 16 --epsilon inf --seed 0 --json s.json":
        "a template: M, S and G stand for the model, scheme and pruning of each row",
    "vflpriv flower spec sparse --out run1 --data mydata.svm --clients 8 --algorithm fediterht "
    "--rounds 50 --lr 0.01 --batch-size 40 --epsilon 4 --delta 1e-5 --privacy record":
        "mydata.svm is the reader's own file (tests/test_flower_sparse_deploy.py runs spec sparse)",
    "vflpriv flower node node3.toml --superlink server.example.org:9092 --root-certificates ca.crt":
        "separate machines: a SuperLink at server.example.org with TLS certificates",
    "vflpriv flower node consortium/node1.toml --superlink server.example.org:9092 "
    "--root-certificates ca.crt":
        "separate machines: a SuperLink at server.example.org with TLS certificates "
        "(tests/test_flower_align_deploy.py starts SuperNodes from such files on loopback)",
    "vflpriv flower node scoring/node1.toml --superlink server.example.org:9092 "
    "--root-certificates ca.crt":
        "separate machines: a SuperLink at server.example.org with TLS certificates "
        "(tests/test_flower_predict_deploy.py starts SuperNodes from such files on loopback)",
    "vflpriv flower launch consortium --superlink server.example.org:9092 "
    "--root-certificates ca.crt":
        "separate machines: a SuperLink at server.example.org with TLS certificates "
        "(tests/test_deployed_result.py launches a description on loopback)",
    "vflpriv flower launch run1 --superlink server.example.org:9092 --root-certificates ca.crt":
        "separate machines: a SuperLink at server.example.org with TLS certificates "
        "(tests/test_deployed_result.py launches a description on loopback)",
    "vflpriv flower schema --party-data bank.csv --id cid --label y --json schema.json "
    "--identity-key id.key --ledger bank.ledger":
        "bank.csv is the organisation's own file (tests/test_deployed_result.py writes schemas "
        "with --ledger from party files)",
    "vflpriv flower spec run --out desc --party-schema 0=bank/schema.json --party-schema "
    "1=retail/schema.json --party-schema 2=telco/schema.json --label y --label-party 0 --loss "
    "logistic --epsilon 1 --delta 1e-6 --feature-bound 1 --label-bound 1":
        "the three organisations' schemas, written on their machines "
        "(tests/test_deployed_result.py writes descriptions from such schemas)",
    "vflpriv flower node node0.toml --superlink server.example.org:9092 --root-certificates ca.crt":
        "separate machines: a SuperLink at server.example.org with TLS certificates",
    "vflpriv flower launch desc --superlink server.example.org:9092 --root-certificates ca.crt":
        "separate machines: a SuperLink at server.example.org with TLS certificates "
        "(tests/test_deployed_result.py launches a description on loopback)",
    "vflpriv ledger release run.ledger 3f2a9c1e":
        "3f2a9c1e stands for the id of a run that died holding a reservation "
        "(tests/test_ledger_reservations.py)",
    "vflpriv ledger verify cv.ledger":
        "the ledger the Python block before it writes (tests/test_docs_estimators.py runs both)",
    "vflpriv run --data synthetic:n=100000,d=2000,density=0.05,sparsity=0.01 --parties 4 "
    "--algorithm dp-bcfw-secure --iterations 200 --epsilon 4 --delta 1e-6 --feature-bound 1 "
    "--label-bound 1 --row-clip 4 --max-features 10 --rnm gumbel --seed 0":
        "a long benchmark: n = 1e5, d = 2000 (95 s, 2.6 GB on the page)",
    "vflpriv run --data synthetic:n=100000,d=2000,density=0.05,sparsity=0.01 --parties 4 "
    "--algorithm dp-bcfw-secure --epsilon 4 --delta 1e-6 --feature-bound 1 --label-bound 1 "
    "--iterations 200 --reference --seed 0":
        "a long benchmark: n = 1e5, d = 2000 with a certified reference",
    "vflpriv run --data synthetic:n=N,d=2000,density=0.05,seed=0 --algorithm dp-bcfw-secure "
    "--parties 4 --iterations 200 --epsilon 1 --delta 1e-6 --feature-bound 5 --label-bound 20 "
    "--seed 0 --quiet --json OUT.json":
        "a template of vflpriv bench scale's runs (N = 1e5, 1e6: minutes and GB each)",
    "vflpriv bench network --sizes 1e5 --json network_bench.json":
        "a long benchmark: real deployments across network namespaces, minutes each "
        "(tests/test_flower_netns_deploy.py runs the harness at test size)",
    "vflpriv bench network --sizes 1e5 --losses logistic --json network_bench_logistic.json":
        "a long benchmark: real deployments across network namespaces, minutes each "
        "(tests/test_flower_netns_deploy.py runs the harness at test size)",
    "vflpriv reproduce 004-fig6 --out results/":
        "a long benchmark: full settings, 5 seeds",
    "vflpriv reproduce 002-table2 --seeds 10":
        "a long benchmark: 10 seeds of a horizontal training",
    "vflpriv reproduce --all --fast --out results/":
        "a long benchmark: every entry (tests/test_tutorials_reproduce.py runs them at test size)",
    "vflpriv audit --json docs/audit/full.json":
        "a long benchmark: the full audit of every mechanism (tests/test_audit*.py at test size)",
    "vflpriv run --data synthetic:n=2000,d=40,density=0.3,seed=0 --parties 3 --loss logistic "
    "--algorithm dp-bcfw-secure --epsilon 4 --delta 1e-6 --feature-bound 1 --label-bound 1 "
    "--iterations 20 --seed 0 --backend flower-sim --json docs/flower_glm_sim.json "
    "--logistic-path glm":
        "a measurement (25 s on flower-sim); tests/test_flower_glm.py runs the logistic path on "
        "flower-sim at test size",
}

#: commands that take more than a few seconds (each well under a minute)
SLOW = {
    "vflpriv run --data flights --loss logistic --algorithm dp-bcfw-secure --label-party 0 "
    "--epsilon 1 --delta 1e-6 --feature-bound 1 --label-bound 1 --test-fraction 0.2",
    "vflpriv run --data diabetes --epsilon 16 --delta 1e-5 --feature-bound 1 --label-bound 1 "
    "--iterations 20 --backend flower-sim",
    "vflpriv horizontal --algorithm feddyn --elastic-net --data digits --clients 20 --rounds 50 "
    "--participation 0.1 --alpha 0.3 --seed 0 --json run.json --plot run.png",
    "vflpriv fedp3 --data digits --clients 10 --rounds 15 --scheme opu2 --local-pruning fixed "
    "--keep-ratio 0.9 --epsilon 4 --delta 1e-5 --clip 1 --batch-size 16 --seed 0 --json run.json",
    "vflpriv audit --mechanism gaussian --samples 10000000 --json docs/audit/gaussian_1e7.json",
    "vflpriv reproduce 004-fig6 --fast",
}

#: commands the page shows ending with another exit code
EXIT = {
    "vflpriv run --data synthetic:n=200,d=40,seed=1 --algorithm dp-bcfw --parties 2 "
    "--feature-bound 1 --label-bound 1 --delta 1e-5 --iterations 20 --seed 3 "
    "--ledger run.ledger --epsilon 1.5": 1,
}

#: what a page's commands need that the page states in prose, made before its first command
SETUP = {
    # the audits and runs write their JSON where the page keeps it (docs/audit/, docs/sparse/)
    "docs/audit.md": lambda d: os.makedirs(os.path.join(d, "docs", "audit")),
    "docs/sparse.md": lambda d: os.makedirs(os.path.join(d, "docs", "sparse")),
    # the page's Python block writes the three party files its commands read
    "docs/alignment.md": lambda d: _run_python_block(d, "docs/alignment.md"),
    # "Changing only noise = "gumbel"" of the plan written above
    "docs/certify.md": lambda d: _write(
        d, "plans/feature-selection-gumbel.toml",
        _read(d, "plans/feature-selection.toml").replace('noise = "laplace"', 'noise = "gumbel"')),
    # the first run on the ledger, described in the paragraph before the refused second run
    "docs/ledger.md": lambda d: _vflpriv(
        d, "vflpriv run --data synthetic:n=200,d=40,seed=1 --algorithm dp-bcfw --parties 2 "
           "--feature-bound 1 --label-bound 1 --delta 1e-5 --iterations 20 --seed 3 "
           "--ledger run.ledger --epsilon 1.5"),
}


def _run_python_block(d, page):
    """Run the page's first ``python`` code block in the working directory ``d``."""
    with open(os.path.join(ROOT, page)) as fh:
        code = re.search(r"^```python\n(.*?)^```", fh.read(), re.S | re.M).group(1)
    subprocess.run([sys.executable, "-c", code], cwd=d, check=True, timeout=120)


def _read(d, rel):
    with open(os.path.join(d, rel)) as fh:
        return fh.read()


def _write(d, rel, text):
    path = os.path.join(d, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as fh:
        fh.write(text)


def _blocks(page):
    """Fenced code blocks, then indented ones (4 spaces after a blank line, outside fences)."""
    with open(os.path.join(ROOT, page)) as fh:
        text = fh.read()
    fenced = [m.group(1) for m in re.finditer(r"^```\w*\n(.*?)^```", text, re.S | re.M)]
    rest = re.sub(r"^```\w*\n.*?^```", "", text, flags=re.S | re.M)
    indented = [re.sub(r"^    ", "", m.group(1), flags=re.M) for m in
                re.finditer(r"(?:^\n)((?:^    \S.*\n(?:^    .*\n)*))", rest, re.M)]
    return fenced + indented


def _strip_comment(line):
    """The command without a trailing ``# comment`` (shlex knows the quoting)."""
    lex = shlex.shlex(line, posix=True, punctuation_chars=False)
    lex.whitespace_split, lex.commenters = True, "#"
    return " ".join(shlex.quote(t) if re.search(r"[\s;'\"]", t) else t for t in lex)


def commands(page):
    """``vflpriv`` commands of ``page``'s code blocks, continuations joined, in page order."""
    out = []
    for body in _blocks(page):
        body = re.sub(r"\\\n\s*", " ", body)
        for line in body.splitlines():
            s = line.strip()
            if s.startswith("$ "):
                s = s[2:]
            if not s.startswith("vflpriv ") or s.split()[1].endswith(":"):
                continue              # not a command (a line of output: "vflpriv run: ...")
            out.append(_strip_comment(s))
    return out


def written_files(page):
    """``(path, text)`` of the blocks that start with ``# relative/path``."""
    out = []
    for body in _blocks(page):
        first = body.splitlines()[0] if body.strip() else ""
        m = re.fullmatch(r"#\s*([\w./-]+\.\w+)\s*", first)
        if m and not m.group(1).startswith(("$", "/")):
            out.append((m.group(1), body))
    return out


#: commands run in a process of their own, as the reader runs them: ``vflpriv reproduce`` pins
#: the numeric libraries' environment before they load (tests/test_reproduce_environment.py),
#: which a process that has loaded them refuses.  Every other command runs in this process
#: through ``vflpriv.cli.main.main`` (the ``vflpriv`` entry point), in the page's folder, with
#: the same argument list: a Python start and the command's imports each (about 1 s) saved
OWN_PROCESS = {"reproduce"}


def _vflpriv(cwd, cmd, timeout=120):
    import vflpriv

    argv = shlex.split(cmd)
    datasets = os.path.join(ROOT, "datasets")
    # this checkout's vflpriv, whatever is installed: in this process only if it is the one
    # imported here
    here_is_root = os.path.dirname(os.path.dirname(os.path.abspath(vflpriv.__file__))) == ROOT
    if argv[1] in OWN_PROCESS or not here_is_root:
        # this checkout's vflpriv, whatever is installed (the commands run in a temporary folder)
        env = dict(os.environ, VFLPRIV_DATASETS=datasets,
                   PYTHONPATH=os.pathsep.join([ROOT] + [p for p in os.environ.get(
                       "PYTHONPATH", "").split(os.pathsep) if p]))
        return subprocess.run([sys.executable, "-m", "vflpriv", *argv[1:]], cwd=cwd, env=env,
                              capture_output=True, text=True, timeout=timeout)
    import contextlib
    import io
    import types

    from vflpriv.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    here, before = os.getcwd(), os.environ.get("VFLPRIV_DATASETS")
    os.chdir(cwd)
    os.environ["VFLPRIV_DATASETS"] = datasets
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(argv[1:])
            except SystemExit as exc:           # argparse: --help, or a bad option
                code = exc.code if isinstance(exc.code, int) else (exc.code is not None)
    finally:
        os.chdir(here)
        if before is None:
            os.environ.pop("VFLPRIV_DATASETS", None)
        else:
            os.environ["VFLPRIV_DATASETS"] = before
    return types.SimpleNamespace(returncode=code, stdout=out.getvalue(), stderr=err.getvalue())


def _path(cmd):
    """Paths the commands name relative to the repository (the shipped examples)."""
    return cmd.replace(" vflpriv/examples/", f" {ROOT}/vflpriv/examples/")


def _run_page(page, tmp_path, slow):
    for rel, text in written_files(page):
        _write(str(tmp_path), rel, text)
    if page in SETUP:
        SETUP[page](str(tmp_path))
    ran = 0
    for cmd in commands(page):
        if cmd in SKIP or (cmd in SLOW) != slow:
            continue
        r = _vflpriv(str(tmp_path), _path(cmd))
        assert r.returncode == EXIT.get(cmd, 0), f"{page}: {cmd}\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}"
        ran += 1
    return ran


PAGES_WITH_COMMANDS = [p for p in PAGES if commands(p)]


@pytest.mark.parametrize("page", PAGES_WITH_COMMANDS)
def test_page_commands_run_as_written(page, tmp_path):
    _run_page(page, tmp_path, slow=False)


@pytest.mark.slow
@pytest.mark.usefixtures("one_ray")         # README's flower-sim run, in this process
@pytest.mark.parametrize("page", [p for p in PAGES_WITH_COMMANDS
                                  if any(c in SLOW for c in commands(p))])
def test_page_slow_commands_run_as_written(page, tmp_path):
    assert _run_page(page, tmp_path, slow=True) > 0


def test_tables_name_only_commands_on_the_pages():
    shown = {c for p in PAGES for c in commands(p)}
    for table in (SKIP, SLOW, EXIT):
        stale = set(table) - shown
        assert not stale, f"not on any page any more: {stale}"
    assert not set(SKIP) & set(SLOW)
    # the README's data-set commands are not skipped
    readme = commands("README.md")
    assert any(c.startswith("vflpriv run --data diabetes") and c not in SKIP for c in readme)


#: README's commands in running text (the others there are synopses: NAME, FILE, a|b)
README_INLINE = ["vflpriv --help", "vflpriv certify dpsgd.toml",
                 "vflpriv certify vertical_selection"]


@pytest.mark.parametrize("cmd", README_INLINE)
def test_readme_inline_commands_run_from_any_directory(cmd, tmp_path):
    with open(os.path.join(ROOT, "README.md")) as fh:
        assert f"`{cmd}`" in fh.read()
    r = _vflpriv(str(tmp_path), cmd)
    assert r.returncode == 0, r.stderr
