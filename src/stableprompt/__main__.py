"""``python -m stableprompt`` runs the command-line interface."""

from ._cli import main

raise SystemExit(main())
