"""Tutorial 1: certify a release plan before deployment.

Run: python docs/tutorials/01_certify.py [--fast] [--out DIR]   (see _page.py)
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _page import Page, pyplot  # noqa: E402

page = Page(__file__, "Tutorial 1: certify a plan before you deploy it")

PLAN = """\
# DP-SGD on an MNIST-sized data set: batches of 256 of 60000 by Poisson sampling,
# noise multiplier 1.1, 60 epochs = 14100 steps.
name = "dpsgd"
delta = 1e-5
target_epsilon = 3.0
neighboring = "add_remove"

[[release]]
mechanism = "poisson_subsampled_gaussian"
noise_multiplier = {z}
sample_rate = 0.004266666666666667
count = {count}
"""

page.text("""
You are about to train with DP-SGD and will publish "(epsilon, delta)-DP with delta = 1e-5".
Before any data is touched, write down *what will be released* as a plan and let `vflpriv certify`
say what it costs under every accountant. A plan is a TOML file: the delta you will publish, the
target epsilon, the neighbouring relation the sensitivities are declared for, and one
`[[release]]` table per kind of release (they compose).
""")
with open("dpsgd.toml", "w") as f:
    f.write(PLAN.format(z=1.1, count=14100))
page.code(open("dpsgd.toml").read(), "toml")

page.text("""
## 1. The certificate

Each accountant gives an upper bound on epsilon at the plan's delta, or says it cannot analyse
the release; `best` is the smallest valid bound. Exit code 0 means the plan meets its target.
""")
page.run("certify", "dpsgd.toml")

page.text("""
`--json` gives the same as one object, for scripts and CI (a pipeline can refuse to deploy on exit
code 1):
""")
js = json.loads(page.run("certify", "dpsgd.toml", "--json"))

page.text(f"""
The tight (PLD) accountant certifies epsilon = {js['best']['epsilon']:.4f}; RDP,
the looser of the two here, says {js['epsilon']['rdp']:.4f}. The difference is budget you would
otherwise leave unused.

## 2. A plan that does not fit

Train for twice as long and the same noise no longer meets the target: exit code 1, and the table
says by how much.
""")
with open("dpsgd_long.toml", "w") as f:
    f.write(PLAN.format(z=1.1, count=28200))
page.run("certify", "dpsgd_long.toml", expect=1)

page.text("""
## 3. Calibrate instead of guessing

`--calibrate noise_multiplier` solves for the smallest noise with which the plan meets its target
(the plan's value is the starting guess). The result is conservative: the certified epsilon at the
returned noise is at most the target.
""")
page.run("certify", "dpsgd_long.toml", "--calibrate", "noise_multiplier")

page.text("""
## 4. How epsilon falls with the noise

The same plan for a range of noise multipliers, each certified by the command above (`--json`),
per accountant:
""")
zs = [0.8, 1.1, 1.6] if page.fast else [0.7, 0.8, 0.9, 1.0, 1.1, 1.3, 1.6, 2.0]
curves = {"rdp": [], "pld": []}
rows = []
for z in zs:
    with open("sweep.toml", "w") as f:
        f.write(PLAN.format(z=z, count=14100))
    from vflpriv.cli.main import main
    import contextlib
    import io

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        main(["certify", "sweep.toml", "--json"])
    r = json.loads(buf.getvalue())
    for k in curves:
        curves[k].append(r["epsilon"][k])
    rows.append((z, f"{r['epsilon']['rdp']:.4f}", f"{r['epsilon']['pld']:.4f}",
                 "yes" if r["certified"] else "no"))
os.remove("sweep.toml")
page.table(["noise multiplier", "rdp epsilon", "pld epsilon", "meets target 3"], rows)
plt = pyplot()
fig, ax = plt.subplots(figsize=(5.5, 3.6))
for k, v in curves.items():
    ax.plot(zs, v, marker="o", label=k)
ax.axhline(3.0, color="k", ls=":", lw=1, label="target epsilon 3")
ax.set_xlabel("noise multiplier")
ax.set_ylabel("epsilon at delta = 1e-5")
ax.set_title("DP-SGD plan, 14100 steps, q = 256/60000")
ax.legend()
page.figure(fig, "epsilon_vs_noise", "Certified epsilon against the noise multiplier, per "
            "accountant")

page.text("""
## What to take away

- Certify the plan, not the code: the plan is what an auditor reads, and `certify` is what a CI
  job runs (exit 0 / 1 / 2).
- Publish the `best` epsilon and name the accountant; keep the plan file with the release.
- Plans with report-noisy-max selections and Gaussian releases (the vertical engine's shape) are
  in `vflpriv/examples/vertical_selection.toml`; see docs/certify.md for every mechanism.
""")
page.write()
