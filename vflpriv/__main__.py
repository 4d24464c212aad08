import sys

try:
    from vflpriv.cli.main import main
    code = main()
except KeyboardInterrupt:
    # Ctrl-C while Python imports the command, or in main() before its own handler is set
    sys.stderr.write("vflpriv: interrupted\n")
    raise SystemExit(130) from None

raise SystemExit(code)
