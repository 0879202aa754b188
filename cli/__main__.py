"""`python -m cli`, the same as the `loc-payments` command."""

from cli.main import main

raise SystemExit(main())
