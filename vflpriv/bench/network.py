"""``vflpriv bench network``: dp-bcfw-secure on a deployment across network namespaces, over
links shaped like a real network (vflpriv/flower/netns.py; docs/network.md).

For each ``--rates`` value one :class:`~vflpriv.flower.netns.ShapedNetwork` is built: a namespace
for the SuperLink, one per party, each party on its own veth link shaped to the rate each way
(tbf) with ``--rtt-ms`` of round-trip delay (a userspace relay; this machine's kernel has no
netem).  In it, for each loss and n, one seeded run of ``vflpriv.solve(...,
algorithm="dp-bcfw-secure", backend="flower")`` (the real SuperLink, SuperNodes, ServerApp and
ClientApps, started and stopped by the run; synthetic n x d data, K parties).  Reported per run:

- wall seconds, split into start-up (party files, SuperLink and SuperNodes up, the ServerApp
  started), the protocol's phases as the ServerApp timed its exchanges -- setup (key exchange,
  the masked blocks in pieces, the label products), rounds, close (the parties delete their
  blocks) -- and the rest (the result read back, every process stopped);
- bytes: the project's frames (the in-process count) and the Flower messages that carried them
  (protobuf size), per phase and direction; and the relay's count of what crossed each party's
  link (TCP payload: HTTP framing, SuperNode polls and heartbeats included);
- time on the wire per phase, **a model, not a measurement**: exchanges x RTT + (sum over the
  phase's exchanges of the largest party's Flower bytes down + up) x 8 / rate, i.e. what the
  link alone would cost if every exchange were one request and one reply of exactly the Flower
  message sizes, parties in parallel.  It leaves out TCP/IP and HTTP overhead, the extra round
  trips of Flower's protocol (a message is pulled, its objects pulled, its receipt confirmed, its
  reply pushed: several requests per exchange) and the SuperNodes' 3-second idle poll; the
  measured seconds beside it show what those and the processes cost.

Logistic dp-bcfw-secure runs through the same harness (its server role times its phases the same
way); a vflpriv whose logistic path still refuses Flower is reported as "not available on Flower
yet" instead of failing.  Where network namespaces cannot be made (not root,
no iproute2), one line says why and the command exits 2.  Heavy: a deployed exchange costs
seconds (the SuperNodes poll every 3 s when idle, and each message starts a ClientApp process),
and the setup sends the masked blocks in pieces of about 8.4 MB (one exchange each).
"""
from __future__ import annotations

import os
import tempfile
import time


def add_arguments(p):
    p.add_argument("--sizes", default="100000,1000000",
                   help="comma-separated n (default 1e5,1e6; 1e5 style accepted)")
    p.add_argument("--losses", default="squared,logistic",
                   help="comma-separated losses: squared, logistic (default both)")
    p.add_argument("--rates", "--rate", dest="rates", default="1gbit,100mbit",
                   help="comma-separated link rates, tc syntax, each way per party "
                        "(default 1gbit,100mbit)")
    p.add_argument("--rtt-ms", type=float, default=20.0,
                   help="round-trip time of every party's link, ms (default 20)")
    p.add_argument("--iterations", type=int, default=10, help="T (default 10)")
    p.add_argument("--d", type=int, default=200, help="features (default 200)")
    p.add_argument("--density", type=float, default=0.05, help="nonzero fraction (default 0.05)")
    p.add_argument("--parties", type=int, default=4, help="K (default 4)")
    p.add_argument("--epsilon", type=float, default=1.0, help="budget of each run (default 1)")
    p.add_argument("--delta", type=float, default=1e-6)
    p.add_argument("--run-dir", default=None,
                   help="keep the runs' files and logs here (default: a temporary folder, "
                        "removed)")


def _list(text, name, conv=str):
    from ..errors import InputError

    try:
        out = [conv(v.strip()) for v in str(text).split(",") if v.strip()]
    except ValueError:
        raise InputError(f"--{name} must be a comma-separated list, got {text!r}") from None
    if not out:
        raise InputError(f"--{name} is empty")
    return out


def _size(v):
    n = int(float(v))
    if n < 10:
        raise ValueError(v)
    return n


def _data(n, d, density, parties, loss):
    import numpy as np

    from ..data import VerticalData, make_synthetic

    A, y, _ = make_synthetic(n=n, d=d, density=density, seed=0)
    if loss == "logistic":
        y = np.where(y > np.median(y), 1.0, -1.0)
    return VerticalData.from_arrays(A, y, "balanced", parties=parties)


def _phase_rows(phases, rate_bits, rtt_s):
    rows = {}
    for name in ("setup", "rounds", "close"):
        p = (phases or {}).get(name)
        if not p:
            continue
        wire = p["exchanges"] * rtt_s + (p["max_party_uplink_bytes"]
                                         + p["max_party_downlink_bytes"]) * 8 / rate_bits
        rows[name] = {"seconds": p["end"] - p["start"], "seconds_in_exchanges": p["seconds"],
                      "exchanges": p["exchanges"],
                      "flower_uplink_bytes": p["uplink_bytes"],
                      "flower_downlink_bytes": p["downlink_bytes"],
                      "max_party_uplink_bytes": p["max_party_uplink_bytes"],
                      "max_party_downlink_bytes": p["max_party_downlink_bytes"],
                      "wire_seconds_model": wire,
                      "wire_rtt_seconds_model": p["exchanges"] * rtt_s}
    return rows


def _one(net, n, loss, args, run_dir):
    """One run on ``net``: the row of figures (or the reason it did not run)."""
    from ..errors import InputError
    from ..flower import FlowerOptions
    from ..vertical.api import solve

    row = {"n": n, "d": args.d, "density": args.density, "parties": args.parties,
           "iterations": args.iterations, "loss": loss, "rate": net.rate,
           "rtt_ms": net.rtt_ms}
    t_gen = time.perf_counter()
    data = _data(n, args.d, args.density, args.parties, loss)
    row["generation_seconds"] = time.perf_counter() - t_gen
    stamps = []
    folder = os.path.join(run_dir, f"{loss}-n{n}-{net.rate}")
    os.makedirs(folder, exist_ok=True)
    load0 = os.getloadavg()
    t0, w0 = time.perf_counter(), time.time()
    try:
        sol = solve(data, algorithm="dp-bcfw-secure", loss=loss, epsilon=args.epsilon,
                    delta=args.delta, feature_bound=5.0, label_bound=20.0 if loss == "squared"
                    else 1.0, iterations=args.iterations, seed=0, backend="flower",
                    squared_path="fw" if loss == "squared" else None,
                    ledger=os.path.join(folder, "server.ledger"),
                    flower=FlowerOptions(run_dir=os.path.join(folder, "run")),
                    callback=lambda t, f: stamps.append(time.time()))
    except InputError as exc:
        if "in process only" in str(exc) or "not on --backend" in str(exc):
            row.update(status="not available on Flower yet", message=str(exc))
            return row
        raise
    wall = time.perf_counter() - t0
    fl = sol.extra.get("flower") or {}
    row.update(status="done" if not fl.get("error") else f"error: {fl['error']}",
               wall_seconds=wall, load_average_before=load0[0],
               load_average_after=os.getloadavg()[0],
               frame_uplink_bytes=int(sum(sol.uplink_framed)),
               frame_downlink_bytes=int(sum(sol.downlink_framed)),
               epsilon_spent=(sol.privacy or {}).get("epsilon_spent"))
    if "path" in sol.extra:       # the logistic path the run took (ssp by default since it was
        row["logistic_path"] = sol.extra["path"]          # made so; glm before)
    totals = fl.get("totals") or {}
    row.update(flower_uplink_bytes=totals.get("uplink"),
               flower_downlink_bytes=totals.get("downlink"))
    phases = fl.get("phases")
    if phases:
        row["startup_seconds"] = phases["started"] - w0
        row["phases"] = _phase_rows(phases, net.rate_bits, net.rtt_ms / 1000)
        last = max(p["end"] for k, p in phases.items() if isinstance(p, dict))
        row["after_seconds"] = w0 + wall - last
    if stamps:
        row["round_stamps"] = [s - w0 for s in stamps]
    stats = net.stop_relay()
    if stats:
        row["link_tcp_bytes"] = {k: {"uplink": v["uplink_bytes"], "downlink": v["downlink_bytes"],
                                     "connections": v["connections"]}
                                 for k, v in stats["parties"].items()}
    return row


def _print(row):
    head = f"{row['loss']:<9} n={row['n']:<8} {row['rate']:>8} {row['rtt_ms']:g} ms RTT: "
    if row.get("status") != "done":
        print(head + row.get("status", "?"))
        return
    gb = 1e9
    print(head + f"wall {row['wall_seconds']:.1f} s (start-up "
          f"{row.get('startup_seconds', 0):.1f} s, after {row.get('after_seconds', 0):.1f} s); "
          f"frames up {row['frame_uplink_bytes'] / gb:.3f} GB, down "
          f"{row['frame_downlink_bytes'] / gb:.3f} GB; Flower up "
          f"{(row['flower_uplink_bytes'] or 0) / gb:.3f} GB, down "
          f"{(row['flower_downlink_bytes'] or 0) / gb:.3f} GB")
    if row.get("link_tcp_bytes"):
        up = sum(v["uplink"] for v in row["link_tcp_bytes"].values())
        down = sum(v["downlink"] for v in row["link_tcp_bytes"].values())
        print(f"{'':<11}on the links (TCP payload, all parties): up {up / gb:.3f} GB, "
              f"down {down / gb:.3f} GB")
    print(f"{'':<11}{'phase':<7} {'measured s':>10} {'exchanges':>9} {'Flower up B':>13} "
          f"{'Flower down B':>13} {'wire model s':>12} {'(RTTs s)':>9}")
    for name, p in row.get("phases", {}).items():
        print(f"{'':<11}{name:<7} {p['seconds']:10.1f} {p['exchanges']:9d} "
              f"{p['flower_uplink_bytes']:13d} {p['flower_downlink_bytes']:13d} "
              f"{p['wire_seconds_model']:12.2f} {p['wire_rtt_seconds_model']:9.2f}")


def _mb(b):
    return f"{b / 1e6:,.1f} MB"


def table(rows) -> str:
    """The runs as the markdown table of docs/network.md: one line per phase, measured seconds
    beside the wire model's."""
    out = ["| run | phase | measured s | exchanges | Flower bytes up / down | time on the wire "
           "(model) s |", "|---|---|---|---|---|---|"]
    for r in rows:
        name = f"{r['loss']}, n = {r['n']:.0e}".replace("e+0", "e") + f", {r['rate']}"
        if r.get("status") != "done":
            out.append(f"| {name} | | {r.get('status')} | | | |")
            continue
        startup = r.get("startup_seconds")
        out.append(f"| {name}, {r['rtt_ms']:g} ms RTT | start-up | "
                   + ("" if startup is None else f"{startup:.1f}") + " | | | |")
        for ph, p in r.get("phases", {}).items():
            out.append(f"| | {ph} | {p['seconds']:.1f} | {p['exchanges']} | "
                       f"{_mb(p['flower_uplink_bytes'])} / {_mb(p['flower_downlink_bytes'])} | "
                       f"{p['wire_seconds_model']:.2f} (RTTs {p['wire_rtt_seconds_model']:.2f}) |")
        if "after_seconds" in r:
            out.append(f"| | after | {r['after_seconds']:.1f} | | | |")
        links = r.get("link_tcp_bytes") or {}
        up = sum(v["uplink"] for v in links.values())
        down = sum(v["downlink"] for v in links.values())
        out.append(f"| | **wall** | **{r['wall_seconds']:.1f}** | | frames "
                   f"{_mb(r['frame_uplink_bytes'])} / {_mb(r['frame_downlink_bytes'])}; on the "
                   f"links (TCP) {_mb(up)} / {_mb(down)} | |")
    return "\n".join(out)


def run(args) -> int:
    from ..errors import InputError
    from ..flower import require_flwr
    from ..flower import netns

    sizes = _list(args.sizes, "sizes", _size)
    losses = _list(args.losses, "losses")
    bad = [v for v in losses if v not in ("squared", "logistic")]
    if bad:
        raise InputError(f"--losses takes squared and logistic, got {', '.join(bad)}")
    rates = _list(args.rates, "rates")
    for r in rates:
        netns.parse_rate(r)
    for name in ("iterations", "d", "parties"):
        if getattr(args, name) < (2 if name == "parties" else 1):
            raise InputError(f"--{name} is too small: {getattr(args, name)}")
    if args.rtt_ms < 0:
        raise InputError(f"--rtt-ms must be >= 0, got {args.rtt_ms:g}")
    require_flwr("flower")
    ok, why = netns.available()
    if not ok:
        print(f"vflpriv bench network: network namespaces unavailable here: {why}")
        return 2
    keep = args.run_dir
    tmp = None if keep else tempfile.TemporaryDirectory(prefix="vflpriv-bench-network-")
    base = keep or tmp.name
    rows, nets = [], []
    try:
        for rate in rates:
            try:
                net_cm = netns.ShapedNetwork(args.parties, rate=rate, rtt_ms=args.rtt_ms,
                                             run_dir=os.path.join(base, f"net-{rate}"))
                with net_cm as net:
                    print(net.describe())
                    nets.append(net.as_dict())
                    for loss in losses:
                        for n in sizes:
                            row = _one(net, n, loss, args, base)
                            _print(row)
                            rows.append(row)
                            if getattr(args, "json", None):     # what is done so far
                                _write(args.json, nets, rows)
            except netns.NetnsUnavailable as exc:
                print(f"vflpriv bench network: network namespaces unavailable here: {exc}")
                return 2
    finally:
        if tmp is not None:
            tmp.cleanup()
    if getattr(args, "json", None):
        _write(args.json, nets, rows)
    return 0


def _write(path, nets, rows):
    from . import write_json

    write_json(path, {"networks": nets, "runs": rows,
                      "machine": {"cpus": os.cpu_count(),
                                  "note": "shared machine: other jobs may run at the same time "
                                          "(load averages per run)"},
                      "wire_model": "exchanges x RTT + (sum over exchanges of the largest "
                                    "party's Flower bytes down + up) x 8 / rate; not measured"})
