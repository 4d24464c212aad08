"""``vflpriv bench gram`` on a tiny cell: the row's bytes are the run's own (each party's uplink
is its masked block once plus its parts and keys: at least 8 n_train q_k bytes and less than
twice that here), and a bad option is refused before any child runs."""
from __future__ import annotations

import json

from vflpriv.cli.main import main


def test_a_tiny_cell(tmp_path):
    out = tmp_path / "g.json"
    assert main(["bench", "gram", "--n", "500", "--d", "40", "--quiet", "--json", str(out)]) == 0
    (row,) = json.loads(out.read_text())["rows"]
    assert row["rc"] == 0 and row["system"] == "vflpriv ssp"
    n_train, q = 400, [10, 10, 10, 10]
    q[0] += 1                                    # the label party's y column
    for up, qk in zip(row["uplink_bytes_per_party"], q):
        assert 8 * n_train * qk <= up < 2 * 8 * n_train * qk
    assert 0.0 <= row["test_auc"] <= 1.0 and row["cpu_seconds"] > 0
    assert row["sent_bytes"] >= sum(row["uplink_bytes_per_party"])


def test_bad_sizes_are_refused(tmp_path, capsys):
    assert main(["bench", "gram", "--n", "0", "--json", str(tmp_path / "g.json")]) == 2
    assert "--n" in capsys.readouterr().err
    assert not (tmp_path / "g.json").exists()
