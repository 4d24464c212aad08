"""``vflpriv bench TARGET``: benchmarks (figures for the notes; never timed assertions in tests).

Each target is a module ``vflpriv.bench.<target>`` with ``add_arguments(parser)`` and
``run(args) -> int``; add its name to TARGETS.
"""
from __future__ import annotations

import importlib

TARGETS = {
    "accounting": "accounting: import time, DP-SGD epsilon (RDP, PLD), calibration; vs dp-accounting and opacus",
    "bcfw": "vertical engine: DP-BCFW-AS speed/memory (rcv1-sized), uplink compression, utility vs n, calibration",
    "utility": "vertical privacy-utility frontier: dp-bcfw, dp-bcfw-secure, dpfw over epsilon and n, with a plot",
    "kernels": "kernels: fused noisy argmax and seeded sketches; compiled vs numpy reference, scikit-learn, scipy",
    "transport": "seconds and bytes per round: in-process vs Flower simulation vs a loopback Flower deployment",
    "scale": "dp-bcfw-secure at large n (default 1e5 and 1e6, d=2000, K=4, T=200): wall time and peak RSS of vflpriv run; --table-rows: a CSV read under a memory limit",
    "secure": "dp-bcfw-secure (n=1e4, d=200, K=4): checkpoint size and write time, resume (offline phase recomputed) vs masked blocks saved once, in process vs roles over LocalLink; --traffic: the logistic loss's glm path beside its ssp path (bytes by kind, seconds, test AUC) on flights and a synthetic set",
    "peers": "held-out real tables (flights, caravan, default; seeds 0-2): scikit-learn l1 CV, diffprivlib, opacus DP-SGD, fw, dpfw, dp-bcfw-secure; test AUC, log-loss, eps spent, bytes, seconds",
    "align": "private set intersection: vflpriv's ECDH-PSI (X25519, K parties, led by the label party) vs openmined-psi on the same ID sets (default 1e5 and 1e6 per party, 3 parties)",
    "network": "dp-bcfw-secure on a deployment across Linux network namespaces, links shaped (tbf rate, relay delay; default 1gbit and 100mbit, 20 ms RTT): wall time, bytes and time on the wire per phase",
    "ring": "products over Z/2^64 (the secure paths' uint64 words): vector-matrix, sparse x dense and Gram blocks (n x p)^T (n x q), numpy's integer products vs vflpriv.kernels.ring_matmul (float64 BLAS limb products)",
    "gram": "the ssp path's one release as the columns grow (d 50..2000, n 2e4 and 1e5, K = 4, eps 4): bytes per party, CPU seconds, peak memory, test AUC; --spu PYTHON: SecretFlow SPU's SEMI2K Gram of the same rows beside it",
    "sparse": "horizontal sparse methods: rounds/s at 100 clients, d=1000 dense and d=100000 sparse; vs a per-client loop",
}


def register(sub):
    from .options import add_outputs

    p = sub.add_parser("bench", help="run a benchmark and print its figures",
                       description="Run a benchmark. Each target prints a table; --json FILE "
                       "writes the figures.")
    targets = p.add_subparsers(dest="target", metavar="TARGET", parser_class=type(p))
    for name, help_text in TARGETS.items():
        tp = targets.add_parser(name, help=help_text, description=help_text)
        add_outputs(tp, what="the figures", also=True)
        mod = f"vflpriv.bench.{name}"
        adder = getattr(importlib.import_module(mod), "add_arguments", None)
        if adder:
            adder(tp)
        tp.set_defaults(func=lambda args, mod=mod: _run(mod, args))
    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])


def _run(mod, args):
    if getattr(args, "json", None):
        from ..outputs import check_output

        check_output(args.json, "--json")      # before the benchmark's work
    from .progress import Spinner

    with Spinner(f"bench {args.target}", quiet=args.quiet):
        return importlib.import_module(mod).run(args)
