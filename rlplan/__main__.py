"""``python -m rlplan``: the ``rlplan`` command."""

from __future__ import annotations

import sys

from rlplan.cli import main

sys.exit(main())
