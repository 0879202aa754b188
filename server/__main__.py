"""`python -m server`, the same as the `loc-payments` command."""

from server.cli import main

raise SystemExit(main())
