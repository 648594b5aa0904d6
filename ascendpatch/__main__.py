from __future__ import annotations

from ascendpatch.cli import main

raise SystemExit(main())
