"""More figures in the docs traced to committed output (the pattern of tests/test_docs_numbers.py):
each check reads a committed JSON, written by the command named in it, and asserts the page quotes
what that JSON holds."""
import json
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _text(*parts):
    with open(os.path.join(ROOT, *parts)) as fh:
        return fh.read()


def _unwrapped(*parts):
    return " ".join(_text(*parts).split())


def _json(name):
    return json.loads(_text("docs", name))


def test_readme_flights_line_is_readme_flights_json():
    """README's flights run: docs/readme_flights.json is the README's command with `--seed 0
    --json docs/readme_flights.json`."""
    d = _json("readme_flights.json")
    assert (d["algorithm"], d["seed"], d["iterations"], d["label_party"]) == \
        ("dp-bcfw-secure", 0, 200, 0)
    assert d["privacy"]["target_epsilon"] == 1.0 and d["delta"] == 1e-6
    text = _unwrapped("README.md")
    assert (f"With `--seed 0` it prints, among its lines, `held-out AUC {d['test_auc']:.4f}, "
            f"log-loss {d['test_log_loss']:.4f}, accuracy {d['test_accuracy']:.4f} (majority class "
            f"{d['majority_accuracy']:.4f}, {d['test_rows']} rows)`, an excess risk of "
            f"{d['excess_risk']:.4f} against the certified optimum of the same problem, and "
            f"epsilon {d['epsilon_spent']['best']:.4f} spent of the 1 asked for "
            f"({d['seconds']:.0f} s in the recorded run") in text
