"""The report-noisy-max k table of docs/audit.md: `search_rnm_pairs` for each noise, k = 2 ... 256
(1e5 samples per side, seed 0 + k, confidence 0.95), written as JSON and printed as the page shows.

    python docs/audit/rnm_pairs.py docs/audit/rnm_pairs.json
"""
import json
import sys

from vflpriv.audit.mechanisms import search_rnm_pairs

KS = (2, 4, 8, 16, 32, 64, 128, 256)
NOISES = ("laplace", "gumbel", "exponential")


def line(noise, pairs):
    return f"{noise:<11} " + " ".join(f"k={k}:{b:.3f}" for k, b in pairs)


def main(out):
    doc = {"samples": 100_000, "seed": 0, "confidence": 0.95,
           "command": "python docs/audit/rnm_pairs.py docs/audit/rnm_pairs.json",
           "pairs": {n: search_rnm_pairs(n, ks=KS, samples=100_000, seed=0, confidence=0.95)
                     for n in NOISES}}
    with open(out, "w") as fh:
        json.dump(doc, fh, indent=1)
        fh.write("\n")
    for n in NOISES:
        print(line(n, doc["pairs"][n]))


if __name__ == "__main__":
    main(sys.argv[1])
