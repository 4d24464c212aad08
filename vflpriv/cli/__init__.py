"""The ``vflpriv`` command.  Each subcommand lives in its own module with a ``register`` function."""
