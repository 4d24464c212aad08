"""Issue 13, items 4-5: outputs are checked before any work and never clobber the ledger, an
input, each other, a directory, a FIFO or a device node; they are written atomically."""
import os

import numpy as np
import pytest

import accounting as acc
from vflpriv.cli.main import main
from vflpriv.errors import InputError
from vflpriv.outputs import check_outputs, write_atomic

PRIV = ["run", "--data", "synthetic:n=60,d=20,seed=0", "--parties", "2", "--epsilon", "1",
        "--delta", "1e-5", "--feature-bound", "1", "--label-bound", "1", "--iterations", "3",
        "--seed", "1"]


def _ledger(tmp_path):
    p = tmp_path / "l.jsonl"
    acc.Ledger(p, budget={"epsilon": 5.0, "delta": 1e-5}).append(
        acc.PureDP(0.1, neighboring="replace_one"))
    return p


def _fifo(tmp_path):
    p = tmp_path / "fifo"
    os.mkfifo(p)
    return str(p)


# (id, extra argv given tmp_path and the ledger path, text the error names)
CASES = [
    ("json-is-the-ledger", lambda tp, led: ["--ledger", str(led), "--json", str(led)], "--json"),
    ("plot-is-the-ledger", lambda tp, led: ["--ledger", str(led), "--plot", str(led)],
     "image file extension"),
    ("checkpoint-is-the-ledger", lambda tp, led: ["--ledger", str(led), "--checkpoint",
                                                  str(led)], "same file"),
    ("json-is-the-plot", lambda tp, led: ["--ledger", str(led), "--json", str(tp / "a.png"),
                                          "--plot", str(tp / "a.png")], "same file"),
    ("checkpoint-fifo", lambda tp, led: ["--ledger", str(led), "--checkpoint", _fifo(tp)],
     "a FIFO"),
    ("checkpoint-device", lambda tp, led: ["--ledger", str(led), "--checkpoint", "/dev/null"],
     "device node"),
    ("json-directory", lambda tp, led: ["--ledger", str(led), "--json", str(tp)], "a directory"),
    ("plot-directory", lambda tp, led: ["--ledger", str(led), "--plot", str(tp)], "a directory"),
    ("plot-no-extension", lambda tp, led: ["--ledger", str(led), "--plot", str(tp / "fig")],
     "image file extension"),
    ("plot-unknown-extension", lambda tp, led: ["--ledger", str(led), "--plot",
                                                str(tp / "fig.txt")], "image file extension"),
    ("json-missing-directory", lambda tp, led: ["--ledger", str(led), "--json",
                                                str(tp / "no" / "r.json")], "does not exist"),
    ("ledger-is-a-directory", lambda tp, led: ["--ledger", str(tp)], "a directory"),
]


@pytest.mark.parametrize("extra, needle", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_outputs_refused_before_any_release(tmp_path, capsys, extra, needle):
    led = _ledger(tmp_path)
    argv = PRIV + extra(tmp_path, led)
    before = led.read_bytes()
    listing = sorted(os.listdir(tmp_path))
    rc = main(argv)
    err = capsys.readouterr().err
    assert rc == 2, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert needle in err, err
    assert led.read_bytes() == before                       # no budget spent, ledger intact
    assert sorted(os.listdir(tmp_path)) == listing          # no file created or replaced
    assert not os.path.exists(str(tmp_path) + ".png")


def test_json_over_the_data_file_is_refused(tmp_path, capsys):
    data = tmp_path / "d.csv"
    data.write_text("a,b,y\n1,2,1\n2,3,0\n1,1,1\n")
    rc = main(["run", "--data", str(data), "--label", "y", "--algorithm", "bcfw", "--json",
               str(data)])
    assert rc == 2 and "same file as --data" in capsys.readouterr().err
    assert data.read_text().startswith("a,b,y")


def test_resume_outputs_may_not_name_the_checkpoint(tmp_path, capsys):
    led, ck = tmp_path / "l.jsonl", tmp_path / "c.npz"
    assert main(PRIV + ["--ledger", str(led), "--checkpoint", str(ck)]) == 0
    capsys.readouterr()
    data = ck.read_bytes()
    assert main(["run", "--resume", str(ck), "--json", str(ck)]) == 2
    assert "same file" in capsys.readouterr().err and ck.read_bytes() == data
    assert main(["run", "--resume", str(ck), "--json", str(led)]) == 2
    assert "same file" in capsys.readouterr().err


def test_python_api_checkpoint_over_the_ledger_is_refused(tmp_path):
    from vflpriv.data import VerticalData, make_synthetic
    from vflpriv.vertical import solve

    A, y, _ = make_synthetic(n=60, d=20, seed=0)
    led = _ledger(tmp_path)
    before = led.read_bytes()
    with pytest.raises(InputError, match="same file"):
        solve(VerticalData.from_arrays(A, y, parties=2), epsilon=1.0, delta=1e-5,
              feature_bound=1.0, label_bound=1.0, iterations=3, ledger=str(led),
              checkpoint=str(led), seed=0)
    assert led.read_bytes() == before


def test_audit_and_fedp3_check_json_first(tmp_path, capsys):
    assert main(["audit", "--samples", "100", "--json", str(tmp_path)]) == 2
    assert "a directory" in capsys.readouterr().err
    assert main(["audit", "--samples", "100", "--json", str(tmp_path / "x" / "a.json")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert main(["fedp3", "--rounds", "1", "--plot", str(tmp_path / "p")]) == 2
    assert "image file extension" in capsys.readouterr().err
    led = _ledger(tmp_path)
    assert main(["fedp3", "--rounds", "1", "--ledger", str(led), "--json", str(led)]) == 2
    assert "same file" in capsys.readouterr().err


def test_atomic_write_keeps_the_old_file_on_failure_and_never_replaces_a_fifo(tmp_path):
    p = tmp_path / "out.json"
    p.write_text("old")

    def boom(fh):
        fh.write(b"partial")
        raise OSError(28, "No space left on device")
    with pytest.raises(OSError) as info:
        write_atomic(p, boom)
    assert info.value.filename == str(p) and p.read_text() == "old"
    assert os.listdir(tmp_path) == ["out.json"]              # the temporary file is gone
    fifo = _fifo(tmp_path)
    with pytest.raises(InputError, match="FIFO"):
        write_atomic(fifo, lambda fh: fh.write(b"x"))
    assert os.path.exists(fifo) and not os.path.isfile(fifo)


def test_disk_full_message_names_the_file(tmp_path, capsys, monkeypatch):
    import vflpriv.outputs as out

    real = out.os.fsync

    def full(fd):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(out.os, "fsync", full)
    rc = main(["run", "--data", "synthetic:n=60,d=20,seed=0", "--algorithm", "bcfw",
               "--iterations", "2", "--json", str(tmp_path / "r.json")])
    monkeypatch.setattr(out.os, "fsync", real)
    err = capsys.readouterr().err
    assert rc == 2 and "No space left on device" in err and "r.json" in err, err
    assert len(err.strip().splitlines()) == 1


def test_check_outputs_hard_link(tmp_path):
    a = tmp_path / "a.json"
    a.write_text("{}")
    os.link(a, tmp_path / "b.json")
    with pytest.raises(InputError, match="same file"):
        check_outputs({"--json": str(tmp_path / "b.json")}, {"--ledger": str(a)})
    assert np.isfinite(1.0)


def test_ledger_disk_full_names_the_ledger_and_records_nothing(tmp_path, capsys, monkeypatch):

    led = _ledger(tmp_path)
    before = led.read_bytes()
    real = os.write

    def full(fd, data):
        if b'"seq"' in data:                  # a record, not the header's newline repair
            real(fd, data[:10])               # a partial write, then the disk is full
            raise OSError(28, "No space left on device")
        return real(fd, data)
    monkeypatch.setattr(os, "write", full)
    rc = main(PRIV + ["--ledger", str(led)])
    monkeypatch.setattr(os, "write", real)
    err = capsys.readouterr().err
    assert rc == 2 and "No space left on device" in err and str(led) in err, err
    # one error line (the run may first warn, on its own line, that its noise is hopeless)
    assert len([ln for ln in err.strip().splitlines() if ": warning: " not in ln]) == 1
    assert led.read_bytes() == before           # the partial record was cut off


@pytest.mark.parametrize("bad, word", [(["--plot", "{d}/x.txt"], "image file extension"),
                                      (["--json", "{d}/missing/x.json"], "does not exist")])
def test_horizontal_checks_outputs_before_training(tmp_path, capsys, bad, word):
    pytest.importorskip("torch")
    argv = ["horizontal", "--algorithm", "fedavg", "--data", "digits", "--rounds", "50",
            "--clients", "5"] + [a.format(d=tmp_path) for a in bad]
    rc = main(argv)
    captured = capsys.readouterr()
    assert rc == 2 and word in captured.err and len(captured.err.strip().splitlines()) == 1
    assert "accuracy" not in captured.out               # no round ran
    assert list(tmp_path.iterdir()) == []
