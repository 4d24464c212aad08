from vflpriv.cli.main import main

raise SystemExit(main())
