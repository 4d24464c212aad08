"""``vflpriv bench gram``: the ssp path's one release as the columns grow (issue 55): bytes per
party, CPU seconds, peak memory and test AUC of ``vflpriv run --algorithm dp-bcfw-secure --loss
logistic`` (the ssp path: each party's block opened once, to the server; ``ssp/gram.py``) at
d in {50, 200, 800, 2000} and n in {2e4, 1e5}, K = 4, eps 4, in process.

Each (n, d) is one child process running the real command line on
``synthetic:n=N,d=D,density=...`` (generation included), so that its figures are its own: CPU
seconds (user + system) and the peak resident set from ``os.wait4``'s rusage; bytes from the
run's JSON (each party's uplink, the downlink, and all bytes sent: every party's uplink plus
what the server sends); the test AUC on a held-out fifth (``--test-fraction 0.2``).

``--spu PYTHON``: also SecretFlow's SPU (SEMI2K, K parties, its in-process simulator) computing
the same Gram matrix A^T A of the same rows, run by that interpreter (SPU installed there; it
needs its own jax), with its CPU seconds, peak memory and bytes sent (K times rank 0's link
total, which SPU's profile logs; the simulator shares the inputs outside the link, so their
sharing, (K - 1) n d words in a deployment, is not in it); no DP, no fit.  Where SPU does not
run, the row says why.  Heavy: at n = 1e5, d = 2000 one run takes minutes and GBs; the machine is shared.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

from ..units import format_bytes


def add_arguments(p):
    p.add_argument("--n", default="20000,100000", help="comma-separated sample sizes")
    p.add_argument("--d", default="50,200,800,2000", help="comma-separated column counts")
    p.add_argument("--density", type=float, default=0.05, help="nonzero fraction (default 0.05)")
    p.add_argument("--parties", type=int, default=4, help="K (default 4)")
    p.add_argument("--epsilon", type=float, default=4.0, help="privacy budget (default 4)")
    p.add_argument("--delta", type=float, default=1e-6)
    p.add_argument("--seed", type=int, default=0, help="the data's and the noise's seed")
    p.add_argument("--spu", default=None, metavar="PYTHON",
                   help="an interpreter with SecretFlow's spu installed: also time SPU's "
                        "SEMI2K Gram of the same rows (default: none)")


def _ints(text, name):
    from ..errors import InputError

    try:
        out = [int(float(v)) for v in str(text).split(",") if v.strip()]
    except ValueError:
        raise InputError(f"--{name} must be comma-separated integers, got {text!r}") from None
    if not out or min(out) < 1:
        raise InputError(f"--{name} must be positive integers, got {text!r}")
    return out


def _child(cmd, env=None):
    """``(returncode, wall seconds, cpu seconds, peak RSS bytes, stderr tail)`` of one child."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    err = proc.stderr.read().decode(errors="replace")
    _, status, ru = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    rc = os.waitstatus_to_exitcode(status)
    return rc, wall, ru.ru_utime + ru.ru_stime, ru.ru_maxrss * 1024, err[-400:]


def _ours(n, d, args, tmp):
    out = os.path.join(tmp, f"run_{n}_{d}.json")
    data = f"synthetic:n={n},d={d},density={args.density},sparsity=0.01,seed={args.seed}"
    cmd = [sys.executable, "-m", "vflpriv", "run", "--data", data, "--parties",
           str(args.parties), "--algorithm", "dp-bcfw-secure", "--loss", "logistic",
           "--epsilon", str(args.epsilon), "--delta", str(args.delta), "--feature-bound", "1",
           "--label-bound", "1", "--seed", str(args.seed), "--test-fraction", "0.2", "--quiet",
           "--json", out]
    rc, wall, cpu, rss, err = _child(cmd)
    row = {"system": "vflpriv ssp", "n": n, "d": d, "rc": rc, "wall_seconds": wall,
           "cpu_seconds": cpu, "peak_rss_bytes": rss}
    if rc != 0:
        row["error"] = err
        return row
    with open(out) as fh:
        doc = json.load(fh)
    up = [int(v) for v in doc["uplink_bytes_framed"].values()]
    down = [int(v) for v in doc["downlink_bytes_framed"].values()]
    by = doc["secure"].get("bytes_by_type") or {}
    relayed = sum(int(v[1]) for k, v in by.items() if k in ("GramKey",))
    row.update(uplink_bytes_per_party=up, downlink_bytes=sum(down),
               # every party's uplink, and what the server sends: its own messages (the
               # downlink) less the relayed keys, which the parties' uplink already counts
               sent_bytes=sum(up) + sum(down) - relayed,
               test_auc=doc.get("test_auc"), epsilon_spent=doc.get("epsilon_spent"),
               release_seconds=doc["secure"].get("setup_seconds"))
    return row


_SPU = r"""
import json, sys, time, resource
import numpy as np
n, d, K, seed, density, rows = [float(v) for v in sys.argv[1:7]]
n, d, K, seed, rows = int(n), int(d), int(K), int(seed), int(rows)
import spu.utils.simulation as spsim
import spu.libspu as libspu
from vflpriv_gram_data import blocks
parts = [b[:rows] for b in blocks(n, d, K, seed, density)]
conf = libspu.RuntimeConfig(protocol=libspu.ProtocolKind.SEMI2K, field=libspu.FieldType.FM64,
                            fxp_fraction_bits=18)
conf.enable_pphlo_profile = True      # rank 0 logs its link's bytes ("Link details")
sim = spsim.Simulator(K, conf)
def gram(*bs):
    import jax.numpy as jnp
    A = jnp.concatenate(bs, axis=1)
    return A.T @ A
t0 = time.process_time()
G = spsim.sim_jax(sim, gram)(*parts)
cpu = time.process_time() - t0
A = np.concatenate(parts, axis=1)
err = float(np.max(np.abs(np.asarray(G) - A.T @ A)))
print(json.dumps({"cpu_seconds": cpu, "max_abs_error": err,
                  "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}))
"""


def _spu(n, d, args, tmp, python):
    """SPU's SEMI2K Gram of the same table (``vflpriv.data.loaders.make_synthetic``'s A, clipped
    to [-1, 1], split in K column blocks; its first 0.8 n rows, as many as the release
    multiplies), in a child interpreter."""
    helper = os.path.join(tmp, "vflpriv_gram_data.py")
    with open(helper, "w") as fh:
        fh.write(_DATA.format(root=os.path.dirname(os.path.dirname(os.path.dirname(
            os.path.abspath(__file__))))))
    script = os.path.join(tmp, "spu_gram.py")
    with open(script, "w") as fh:
        fh.write(_SPU)
    env = dict(os.environ, PYTHONPATH=tmp)
    t0 = time.perf_counter()
    # as many rows as the release multiplies (the run holds out a fifth for its test AUC)
    rows = n - int(round(0.2 * n))
    proc = subprocess.run([python, script, str(n), str(d), str(args.parties), str(args.seed),
                           str(args.density), str(rows)], capture_output=True, env=env)
    row = {"system": "SPU SEMI2K (Gram only)", "n": n, "d": d, "rc": proc.returncode,
           "wall_seconds": time.perf_counter() - t0}
    if proc.returncode != 0:
        row["error"] = proc.stderr.decode(errors="replace")[-400:]
        return row
    out = proc.stdout.decode(errors="replace")
    row.update(json.loads([ln for ln in out.strip().splitlines() if ln.startswith("{")][-1]))
    import re

    sent = re.findall(r"Link details: total send bytes (\d+)", out + proc.stderr.decode(
        errors="replace"))
    if sent:
        # rank 0's link (SPU profiles rank 0 only; SEMI2K's parties are symmetric); the inputs'
        # sharing is done by the simulator outside the link, so it is not counted here
        row["rank0_sent_bytes"] = int(sent[-1])
        row["sent_bytes"] = int(sent[-1]) * args.parties
    return row


#: the rows SPU multiplies: the same synthetic A as ``vflpriv run --data synthetic:...`` reads
#: (the project's generator, imported from its source tree), clipped to [-1, 1]
_DATA = r"""
import sys
sys.path.insert(0, {root!r})
import numpy as np
def blocks(n, d, K, seed, density):
    from vflpriv.data.loaders import make_synthetic
    A = np.clip(np.asarray(make_synthetic(n=n, d=d, density=density, sparsity=0.01,
                                          seed=seed)[0].todense()), -1, 1)
    ends = np.linspace(0, d, K + 1).astype(int)
    return [A[:, ends[k]:ends[k + 1]] for k in range(K)]
"""


def run(args) -> int:
    ns, ds = _ints(args.n, "n"), _ints(args.d, "d")
    rows = []
    with tempfile.TemporaryDirectory(prefix="vflpriv-bench-gram-") as tmp:
        for n in ns:
            for d in ds:
                rows.append(_ours(n, d, args, tmp))
                if args.spu:
                    rows.append(_spu(n, d, args, tmp, args.spu))
    print(f"{'system':<24}{'n':>8}{'d':>6}{'up/party max':>14}{'sent in all':>13}"
          f"{'CPU s':>9}{'peak RSS':>10}{'test AUC':>10}")
    for r in rows:
        if r.get("rc"):
            print(f"{r['system']:<24}{r['n']:>8}{r['d']:>6}  failed: "
                  f"{r.get('error', '').strip().splitlines()[-1:]}")
            continue
        up = max(r["uplink_bytes_per_party"]) if "uplink_bytes_per_party" in r else None
        print(f"{r['system']:<24}{r['n']:>8}{r['d']:>6}"
              f"{format_bytes(up) if up else '-':>14}"
              f"{format_bytes(r['sent_bytes']) if 'sent_bytes' in r else '-':>13}"
              f"{r['cpu_seconds']:>9.1f}{format_bytes(r['peak_rss_bytes']):>10}"
              f"{(format(r['test_auc'], '.4f') if r.get('test_auc') is not None else '-'):>10}")
    if args.json:
        from . import write_json

        write_json(args.json, {"command": "vflpriv bench gram " + " ".join(sys.argv[3:]),
                               "parties": args.parties, "epsilon": args.epsilon,
                               "density": args.density, "rows": rows})
    return 0
