"""Errors the command line turns into one line and exit code 2 (bad input, never a traceback)."""


class InputError(ValueError):
    """The user's input is invalid; the message names the offending value."""


class ClippingWarning(UserWarning):
    """A party's declared bound clips a large share of its own values
    (:mod:`vflpriv.vertical.clipshare`)."""
