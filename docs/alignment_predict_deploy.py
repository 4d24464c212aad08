"""docs/alignment.md "Scoring across machines", the measured deployment: the run of
tests/test_flower_predict_deploy.py (3 parties' files of new rows, 160 IDs, seed 9; the
description written by `vflpriv flower spec predict`; a real SuperLink and one SuperNode per
party on 127.0.0.1 started from the written node configs), once, with its figures written to
a JSON.  About a minute on the 2-core machine.

    python docs/alignment_predict_deploy.py docs/alignment_predict_deploy.json

The scores are checked against `vflpriv predict` in process (bit for bit, the same frame bytes)
before anything is written; tests/test_docs_numbers2.py checks that the page quotes the JSON."""
import contextlib
import importlib.util
import io
import json
import os
import pathlib
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def _helpers():
    spec = importlib.util.spec_from_file_location(
        "predict_deploy_helpers", os.path.join(HERE, "..", "tests", "test_predict_deploy.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def main(out):
    from vflpriv.flower.deploy import LocalDeployment
    from vflpriv.flower.spec import load_description

    h = _helpers()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        with contextlib.redirect_stdout(io.StringIO()):
            paths, model, common = h.party_files(tmp, n=160, seed=9)
            run, cfgs = h.write_scoring(tmp, paths, model)
            ref = h.in_process(tmp, paths, model)
        spec = load_description(run)
        load_before = os.getloadavg()[0]
        t0 = time.perf_counter()
        with LocalDeployment(cfgs, str(tmp / "dep")) as dep:
            res = dep.run(spec, timeout=400)
        seconds = time.perf_counter() - t0
        load_after = os.getloadavg()[0]
        scores = json.loads((tmp / "scoring" / "scores.json").read_text())
        h.same_scoring(res, scores, ref)
        assert scores["scores"] == ref["scores"] and res["n"] == common
    doc = {"command": "python docs/alignment_predict_deploy.py " + out,
           "parties": 3, "ids": 160, "seed": 9, "n": res["n"], "seconds": seconds,
           "load_average": {"before": load_before, "after": load_after},
           "alignment": res["alignment"], "scoring": res["scoring"],
           "flower_totals": res["flower_totals"]}
    with open(out, "w") as fh:
        json.dump(doc, fh, indent=1, default=str)
        fh.write("\n")
    return doc


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python docs/alignment_predict_deploy.py OUT.json")
    main(sys.argv[1])
