"""Scoring on a real SuperLink and one SuperNode per party (127.0.0.1), each SuperNode started
from the ``node<i>.toml`` that ``vflpriv flower spec predict`` wrote: its own CSV of new rows,
its ID column and its own model file.  The run aligns the new rows by private set intersection
over the Flower link, then sums the partial margins securely at the label party, every frame
relayed by the ServerApp and metered; the label party writes the ids and scores on its side
(not released to the server).  They equal ``vflpriv predict`` in process, bit for bit, with the
same frame bytes.  About a minute (six exchanges, a ClientApp process per message; the run measured
once by docs/alignment_predict_deploy.py took 48 s on the shared 2-core machine); it runs from
the session's start (conftest.py)."""
import contextlib
import io
import json
import os
import time

import pytest

pytest.importorskip("flwr")

from vflpriv.flower.deploy import LocalDeployment  # noqa: E402
from vflpriv.flower.spec import load_description  # noqa: E402


def _helpers():
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "predict_deploy_helpers", os.path.join(os.path.dirname(__file__), "test_predict_deploy.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _scoring_deployment(tmp_path):
    """In the main thread at the session's start: the files, the description and the
    in-process reference; returns the deployment to run on a thread."""
    h = _helpers()
    with contextlib.redirect_stdout(io.StringIO()):
        paths, model, c = h.party_files(tmp_path, n=160, seed=9)
        run, cfgs = h.write_scoring(tmp_path, paths, model)
        ref = h.in_process(tmp_path, paths, model)

    def deploy():
        spec = load_description(run)
        t0 = time.perf_counter()
        with LocalDeployment(cfgs, str(tmp_path / "dep")) as dep:
            res = dep.run(spec, timeout=400)
        return h, c, spec["run_id"], ref, res, time.perf_counter() - t0

    return deploy


@pytest.mark.slow
@pytest.mark.deployment(prepare=_scoring_deployment)
def test_a_scoring_deployment_from_the_spec_files_equals_predict_in_process(deployment):
    tmp_path, (h, c, run_id, ref, res, seconds) = deployment
    scores = json.loads((tmp_path / "scoring" / "scores.json").read_text())
    h.same_scoring(res, scores, ref)
    assert scores["scores"] == ref["scores"] and res["n"] == c
    assert not res["released"] and "scores" not in res
    assert res["scoring"]["masked"] and res["scoring"]["messages_by_type"]["ScoreKey"][0] == 2
    # every party's aligned rows were deleted at the close
    assert not [f for f in os.listdir(os.environ.get("TMPDIR", "/tmp"))
                if f.startswith(f"vflpriv-aligned-{run_id}")]
    (tmp_path / "measured.json").write_text(json.dumps(
        {"seconds": seconds, "alignment": res["alignment"], "scoring": res["scoring"],
         "flower_totals": res["flower_totals"]}, indent=1, default=str))
