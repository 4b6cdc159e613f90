from specatlas.cli import main

raise SystemExit(main())
