from __future__ import annotations

from ascendpatch.shell.cli import main

raise SystemExit(main())
