"""``vflpriv bench network`` where it cannot run: no network namespaces -> one line, exit 2;
bad options -> exit 2 before anything is built.  (The harness itself:
tests/test_flower_netns_deploy.py.)"""
import pytest

pytest.importorskip("flwr")

from vflpriv.cli.main import main  # noqa: E402
from vflpriv.flower import netns  # noqa: E402


def test_no_namespaces_says_why_and_exits_2(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(netns, "available", lambda: (False, "network namespaces need root"))
    out = tmp_path / "b.json"
    assert main(["bench", "network", "--sizes", "1000", "--json", str(out)]) == 2
    lines = [ln for ln in capsys.readouterr().out.splitlines() if ln.strip()]
    assert lines == ["vflpriv bench network: network namespaces unavailable here: network "
                     "namespaces need root"]
    assert not out.exists()


@pytest.mark.parametrize("argv, word", [
    (["--losses", "hinge"], "--losses"),
    (["--rates", "fast"], "rate"),
    (["--sizes", "abc"], "--sizes"),
    (["--rtt-ms", "-1"], "--rtt-ms"),
])
def test_bad_options_exit_2(argv, word, monkeypatch, capsys):
    built = []
    monkeypatch.setattr(netns.ShapedNetwork, "__enter__", lambda self: built.append(1))
    assert main(["bench", "network", *argv]) == 2
    assert word in capsys.readouterr().err
    assert built == []


def test_rates_parse():
    assert netns.parse_rate("1gbit") == 10 ** 9
    assert netns.parse_rate("100mbit") == 10 ** 8
    assert netns.parse_rate("500kbit") == 500_000
    assert netns.parse_rate("1mbps") == 8 * 10 ** 6
