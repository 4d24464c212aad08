"""Errors the command line turns into one line and exit code 2 (bad input, never a traceback)."""


class InputError(ValueError):
    """The user's input is invalid; the message names the offending value."""


class ClippingWarning(UserWarning):
    """A party's declared bound clips a large share of its own values
    (:mod:`vflpriv.vertical.clipshare`)."""


#: Largest iteration / round count a run accepts.  The smallest runs take about a millisecond a
#: round here, so this is already ~20 minutes of rounds; the papers run at most a few thousand.
#: A typo such as 1000000000 is refused up front instead of running for weeks.
MAX_ROUNDS = 1_000_000
#: Largest number of clients of a horizontal run: each is a Python object with its own data
#: shard and generators, so 1e9 of them never finishes building.
MAX_CLIENTS = 100_000


def check_count(option: str, value, maximum: int):
    """``value`` if it is an integer from 1 to ``maximum``; else InputError naming ``option``."""
    import numbers

    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise InputError(f"{option} must be a positive integer, got {value!r}")
    if value > maximum:
        raise InputError(f"{option} must be at most {maximum:,}, got {value:,}")
    return value


def uncalibrated(exc, epsilon, delta, accountant) -> InputError:
    """The one-line error of a noise calibration that failed for the user's (epsilon, delta):
    the accountant's own message ("could not bracket the target 0.5 starting from 2.4") names
    internal quantities; this one names the options.  At a tiny delta (1e-300) the accountant's
    epsilon has a floor above the target whatever the noise (RDP's conversion adds
    log(1/delta) / (alpha - 1) at its largest order; PLD's discretization has its own)."""
    if isinstance(exc, InputError):
        return exc
    return InputError(f"no noise meets --epsilon {epsilon!r} at --delta {delta!r} under the "
                      f"{accountant} accountant: its epsilon at this delta stays above the "
                      f"target whatever the noise ({exc}); a larger --epsilon or --delta, or "
                      "another --accountant, may")
