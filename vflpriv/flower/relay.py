"""A TCP relay that adds a fixed one-way delay in each direction (the delay of a shaped link).

Run by :mod:`vflpriv.flower.netns` in the SuperLink's network namespace, one listening address per
party (``LISTEN=TARGET``, e.g. ``10.213.1.1:9092=127.0.0.1:9092``): each connection a SuperNode
opens is forwarded to the SuperLink, and every chunk read from one side is written to the other
no earlier than ``delay`` seconds after it was read, in order.  So a byte's trip is the shaped
veth (rate) plus ``delay`` each way, and a request/response pair costs at least ``2 * delay``
(the round-trip time).  A new connection's first bytes are held one round trip more (the TCP
handshake a real link would cost; the relay itself accepts at once).

What it does not model: TCP's own congestion window over the long path (the sender's TCP sees
the relay, a hop away, so it does not wait a round trip per window as over a real 20 ms path;
at 1 Gbit/s x 20 ms the window needed, 2.5 MB, is within Linux's default autotuning, so this
matters mostly for slow start), losses and jitter.  netem would do all of this in the kernel;
it is not built into every kernel (not into this machine's), hence this relay.

Counts per party (bytes each way, connections) are written as JSON to ``--stats`` every
second and at exit.  Standard library only, so that it starts without importing vflpriv:
``python relay.py --delay-ms 10 --stats FILE 0=LISTEN=TARGET 1=LISTEN=TARGET ...``.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import time

CHUNK = 1 << 18          # read size
QUEUE_CHUNKS = 256       # at most 64 MB held per direction and connection (backpressure beyond)


class Stats:
    def __init__(self, path):
        self.path = path
        self.parties = {}

    def party(self, name):
        return self.parties.setdefault(name, {"uplink_bytes": 0, "downlink_bytes": 0,
                                              "connections": 0, "uplink_chunks": 0,
                                              "downlink_chunks": 0})

    def write(self):
        if not self.path:
            return
        tmp = self.path + ".tmp"
        with open(tmp, "w") as fh:
            json.dump({"time": time.time(), "parties": self.parties}, fh)
        os.replace(tmp, self.path)


async def _pump(reader, writer, delay, floor, counts, key):
    """Copy reader -> writer, each chunk written at (time read + delay), at the earliest
    ``floor`` (loop time), in order."""
    loop = asyncio.get_running_loop()
    q: asyncio.Queue = asyncio.Queue(QUEUE_CHUNKS)

    async def read():
        try:
            while True:
                data = await reader.read(CHUNK)
                await q.put((max(loop.time() + delay, floor), data))
                if not data:
                    return
        except (ConnectionError, OSError):
            await q.put((loop.time(), b""))

    async def write():
        while True:
            due, data = await q.get()
            wait = due - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            if not data:
                try:
                    if writer.can_write_eof():
                        writer.write_eof()
                except (ConnectionError, OSError):
                    pass
                return
            counts[key + "_bytes"] += len(data)
            counts[key + "_chunks"] += 1
            writer.write(data)
            await writer.drain()

    reading = asyncio.ensure_future(read())
    try:
        await write()
    except (ConnectionError, OSError):
        pass
    finally:
        reading.cancel()


async def _serve(listen, target, delay, stats, name):
    thost, tport = target.rsplit(":", 1)

    async def handle(creader, cwriter):
        loop = asyncio.get_running_loop()
        counts = stats.party(name)
        counts["connections"] += 1
        accepted = loop.time()
        try:
            ureader, uwriter = await asyncio.open_connection(thost, int(tport))
        except OSError:
            cwriter.close()
            return
        # the handshake a real path costs: nothing arrives before one round trip, then delay
        up = _pump(creader, uwriter, delay, accepted + 3 * delay, counts, "uplink")
        down = _pump(ureader, cwriter, delay, 0.0, counts, "downlink")
        try:
            await asyncio.gather(up, down)
        finally:
            for w in (uwriter, cwriter):
                try:
                    w.close()
                except Exception:
                    pass

    host, port = listen.rsplit(":", 1)
    return await asyncio.start_server(handle, host, int(port), reuse_address=True)


async def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--delay-ms", type=float, required=True, help="one-way delay, each direction")
    ap.add_argument("--stats", default=None, help="JSON file of the counts (every second)")
    ap.add_argument("routes", nargs="+", help="NAME=LISTEN_HOST:PORT=TARGET_HOST:PORT")
    args = ap.parse_args(argv)
    delay = args.delay_ms / 1000.0
    stats = Stats(args.stats)
    servers = []
    for route in args.routes:
        name, listen, target = route.split("=")
        stats.party(name)
        servers.append(await _serve(listen, target, delay, stats, name))
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    stats.write()
    print("relay ready", flush=True)
    while not stop.is_set():
        try:
            await asyncio.wait_for(stop.wait(), 1.0)
        except asyncio.TimeoutError:
            pass
        stats.write()
    for s in servers:
        s.close()
    stats.write()


if __name__ == "__main__":
    asyncio.run(main())
