import sys

try:
    from vflpriv.cli.main import main
except KeyboardInterrupt:          # Ctrl-C while Python imports the command: no traceback
    sys.stderr.write("vflpriv: interrupted\n")
    raise SystemExit(130) from None

raise SystemExit(main())
