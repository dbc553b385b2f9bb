"""``python -m saf_utils.run``: the papermill runner (see :mod:`saf_utils.reporting.runner`)."""

import sys

from saf_utils.reporting.runner import main

if __name__ == "__main__":
    sys.exit(main())
