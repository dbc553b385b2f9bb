"""``python -m notebook_reports``: the ``saf-run`` command line (:mod:`notebook_reports.cli`)."""

import sys

from notebook_reports.cli import main

if __name__ == "__main__":
    sys.exit(main())
