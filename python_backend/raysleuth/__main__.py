from raysleuth.cli import main

raise SystemExit(main())
