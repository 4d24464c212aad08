"""Option groups several commands share, declared once: privacy, ledger, backend, outputs, progress.

Typed option values (:mod:`vflpriv.values`, re-exported here: :func:`real`, :func:`count`,
:func:`seed`, :func:`existing_file`, :func:`output_path`) are the parsers every command uses
for a number with a range, a count with a cap, a path that must exist or must be written; the
one output rule across all of a command's paths is :func:`vflpriv.outputs.check_outputs`.

Each ``add_*(parser, **variant)`` adds one titled group (``--help`` lists it under its title) with
the same option names, destinations, types and metavars in every command; ``variant`` says only
what differs between commands: defaults, the accepted choices, and a note on what the option
means there.  Values are checked where they are used (the run's config object:
:class:`vflpriv.vertical.config.VerticalConfig`, :class:`vflpriv.sparse.config.SparseConfig`;
:func:`vflpriv.cli.backend.options`), so a bad value still ends in one line naming it, exit 2.

==========  ====================================================  ===============================
group       options                                               commands
==========  ====================================================  ===============================
privacy     ``--epsilon --delta --accountant``                    run, sparse, horizontal, fedp3,
                                                                  flower spec sparse
ledger      ``--ledger``                                          the same
backend     ``--backend --connect-timeout --on-client-loss``      run, sparse, horizontal, fedp3;
                                                                  flower spec sparse (no --backend)
outputs     ``--json --plot``                                     run, sparse, horizontal, fedp3,
                                                                  audit and bench (--json only)
progress    ``-q/--quiet``                                        every command (vflpriv.cli.main)
==========  ====================================================  ===============================
"""
from __future__ import annotations

import argparse
import math

# the typed option values live one layer down (vflpriv.values), so that tools (vflpriv.bench)
# parse their options with them too; re-exported here for the commands
from ..values import (MAX_SEED, count, existing_file, number, output_path, real,  # noqa: F401
                      seed)

#: every accountant a vertical run can be guarded by, and the ones that compose a horizontal
#: run's subsampled Gaussians (basic, advanced and optimal cannot: docs/certify.md)
ALL_ACCOUNTANTS = ("rdp", "pld", "best", "optimal", "basic", "advanced")
GAUSSIAN_ACCOUNTANTS = ("rdp", "pld", "best")


def auto_or_number(text):
    """``auto`` (any case), or a positive finite number as :func:`real` reads it (``--eta``,
    the radius of an l1 ball: 0, a negative number, NaN or inf is no radius)."""
    if str(text).strip().lower() == "auto":
        return "auto"
    try:
        return real(0, lo_open=True)(text)
    except argparse.ArgumentTypeError as exc:
        raise argparse.ArgumentTypeError(f"must be auto or {str(exc).removeprefix('must be ')}"
                                         ) from None


def positive_epsilon(text) -> float:
    """``--epsilon`` as a number > 0 (``inf``: non-private, only when spelled so: ``1e309``
    overflows and is refused, never a silent non-private run), or argparse's one-line error."""
    v = number(text)
    if math.isnan(v) or v <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive number or inf, got {text!r}")
    return v


def _group(p, title, description=None):
    return p.add_argument_group(title, description)


def add_privacy(p, *, epsilon="positive", epsilon_default=math.inf, epsilon_note="",
                delta_default=None, scope="", accountants=GAUSSIAN_ACCOUNTANTS, choices=True,
                accountant_note="", delta_type=float):
    """``--epsilon --delta --accountant``.

    ``epsilon``: how ``--epsilon`` is read: ``"positive"`` (a number > 0 or inf, checked by
    argparse), ``"optional"`` (the same with no default: the command says when it is needed),
    ``"float"`` (any float, checked by the command) or ``"text"`` (kept as given and read by the
    command, which names the option in its message); ``delta_type``: the argparse type of
    ``--delta``; ``scope``: whose budget it is (``"per-client "``); ``accountants``: the names
    the command accepts (as argparse choices when ``choices``, else listed in the help and
    checked by the command)."""
    g = _group(p, "privacy", "the budget of a private run and the accountant that guards it")
    types = {"positive": positive_epsilon, "optional": positive_epsilon, "float": float,
             "text": None}
    default = None if epsilon in ("text", "optional") else epsilon_default
    g.add_argument("--epsilon", type=types[epsilon], default=default,
                   help=f"{scope}privacy budget epsilon; inf = non-private{epsilon_note}")
    # delta_type: how --delta is read (vflpriv run: in (0, 1), refused whether or not read)
    g.add_argument("--delta", type=delta_type, default=delta_default,
                   help=f"{scope}privacy delta" + (" (required with a finite --epsilon)"
                                                   if delta_default is None else ""))
    listed = "" if choices else f": {' | '.join(accountants)}"
    g.add_argument("--accountant", default="rdp", choices=list(accountants) if choices else None,
                   help=f"accountant that calibrates the noise and guards the budget{listed}"
                   f"{accountant_note}")
    return g


def add_ledger(p, *, temporary=False):
    """``--ledger FILE``: the privacy ledger every release is appended to (``temporary``: the
    command keeps one in a temporary file when none is given)."""
    g = _group(p, "ledger")
    g.add_argument("--ledger", default=None, metavar="FILE", type=output_path,
                   help="append every release to this privacy ledger file" +
                   (" (default: a temporary file)" if temporary else ""))
    return g


def add_backend(p, *, who="client", family="horizontal", deployment=False):
    """``--backend --connect-timeout --on-client-loss``: where the ``who``s run and what a lost
    one does.  ``deployment``: a run described for separate machines (``vflpriv flower spec``),
    which has no ``--backend`` and waits longer for the SuperNodes."""
    from ..runtime.backends import DEFAULT_ON_CLIENT_LOSS

    g = _group(p, "backend", None if deployment else
               "in this process or on Flower (docs/flower.md; needs the flower extra)")
    default = DEFAULT_ON_CLIENT_LOSS[family]
    why = ("a lost party's feature columns are gone, so only stop is accepted"
           if family == "vertical" else
           f"continue: the run goes on with the {who}s that answer, weights renormalized over "
           f"them, and the JSON lists lost_clients; docs/flower.md")
    if not deployment:
        g.add_argument("--backend", default="inprocess",
                       choices=["inprocess", "flower-sim", "flower"],
                       help=f"where the {who}s run: in this process (default), on Flower's "
                       "simulation runtime, or as a real Flower deployment on 127.0.0.1 (a "
                       f"SuperLink and one SuperNode per {who}). Needs the flower extra")
    g.add_argument("--connect-timeout", type=float, default=600.0 if deployment else 60.0,
                   metavar="S",
                   help=f"seconds the ServerApp waits for every {who}'s SuperNode (default 600)"
                   if deployment else
                   f"Flower backends: seconds to wait for every {who} at start (default 60)")
    g.add_argument("--on-client-loss", default=None, choices=["stop", "continue"],
                   help=f"{'' if deployment else 'Flower backends: '}what a {who} lost mid-run "
                   f"(its SuperNode gone, an error or no reply) does to the run (default "
                   f"{default}; {why})")
    return g


def add_outputs(p, *, what="the results", plot=None, also=False):
    """``--json FILE`` (``what`` as one JSON object; ``also``: besides the printed table) and,
    when ``plot`` says what is plotted, ``--plot FILE.png``."""
    g = _group(p, "outputs", "files written at the end (checked before any work)")
    g.add_argument("--json", default=None, metavar="FILE", type=output_path,
                   help=f"{'also ' if also else ''}write {what} as one JSON object to FILE")
    if plot is not None:
        g.add_argument("--plot", default=None, metavar="FILE.png", type=output_path,
                       help=f"plot {plot} (needs matplotlib)")
    return g


def add_progress(p):
    """``-q/--quiet``: no progress bar (there is none anyway in a pipe)."""
    p.add_argument("-q", "--quiet", action="store_true",
                   help="no progress bar (there is none anyway when stdout or stderr is not a "
                        "terminal)")
