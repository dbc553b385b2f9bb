"""``python -m saf_utils.run``: the ``saf-run`` command line.

``saf-run --profile X`` runs a profile, ``saf-run compare A B`` and ``saf-run list`` inspect
runs; see :mod:`saf_utils.reporting.cli` and :mod:`saf_utils.reporting.runner`.
"""

import sys

from saf_utils.reporting.cli import main

if __name__ == "__main__":
    sys.exit(main())
