"""Issue 31's bar: a consortium deployed from the files ``vflpriv flower spec run --party-schema``
writes, on a real SuperLink and one SuperNode per party (127.0.0.1), each SuperNode started from
its ``node<i>.toml`` naming its own CSV file and ID column.  Three files in different row orders,
~88% overlap each; the run's first phase is the private set intersection over the Flower link
(every PSI frame relayed by the ServerApp and metered), then the noise calibrated from n = |C|,
then dp-bcfw-secure (least squares).  It ends at the x of ``vflpriv run --party-data`` in process
(the run on the joined intersection), bit for bit, with the same intersection and PSI frame
bytes; no machine held the joined table.  About a minute (a ClientApp process per message);
it runs from the session's start (conftest.py)."""
import contextlib
import io
import json
import os

import numpy as np
import pytest

pytest.importorskip("flwr")

from vflpriv.flower.deploy import LocalDeployment  # noqa: E402
from vflpriv.flower.spec import load_description  # noqa: E402

OPTS = ["--loss", "squared", "--epsilon", "4", "--delta", "1e-5", "--iterations", "2",
        "--seed", "7"]


def _helpers():
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "align_deploy_helpers", os.path.join(os.path.dirname(__file__), "test_align_deploy.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _aligned_deployment(tmp_path):
    """In the main thread at the session's start: the party files, their schemas, the
    description and the in-process reference; returns the deployment to run on a thread."""
    h = _helpers()
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        paths, c = h.party_files(tmp_path, n=200, seed=5)
        run, cfgs = h.write_run(tmp_path, paths, OPTS)
        ref, x, _ = h.in_process(tmp_path, paths, OPTS)
    cfgs = h.seeded(cfgs, 7)

    def deploy():
        spec = load_description(run)
        with LocalDeployment(cfgs, str(tmp_path / "dep")) as dep:
            res = dep.run(spec, timeout=400)
        return paths, c, spec, cfgs, ref, x, res

    return deploy


@pytest.mark.slow
@pytest.mark.deployment(prepare=_aligned_deployment)
def test_a_deployment_from_the_spec_files_aligns_then_equals_the_joined_run(deployment):
    tmp_path, (paths, c, spec, cfgs, ref, x, res) = deployment
    assert res["error"] is None, res["error"]
    assert spec["family"] == "align" and [cf["data"] for cf in cfgs] == paths
    assert np.array_equal(res["x"], x)
    al, ra = res["alignment"], ref["alignment"]
    assert al["intersection_size"] == ra["intersection_size"] == c == res["n"]
    assert al["bytes"] == ra["bytes"] and al["party_rows"] == ra["party_rows"]
    # the Flower messages of the phase carried at least the PSI frames
    assert al["flower_bytes"]["uplink"] > sum(al["bytes"]["uplink"])
    assert al["flower_bytes"]["downlink"] > sum(al["bytes"]["downlink"])
    assert res["t"] == 2 and res["flower_totals"]["uplink"] > al["flower_bytes"]["uplink"]
    # every party's ledger holds the training's releases, none for the alignment
    from accounting import read_ledger

    assert all(len(read_ledger(cf["ledger"]).records) > 0 for cf in cfgs)
    (tmp_path / "measured.json").write_text(json.dumps(
        {"alignment": al, "flower_totals": res["flower_totals"],
         "phases": res.get("phases")}, indent=1, default=str))
