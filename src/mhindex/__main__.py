from mhindex.cli import main

raise SystemExit(main())
