"""``python -m saf_utils.train CONFIG``: run one :class:`saf_utils.jobs.TrainJob`.

The thin entry point that ``torchrun`` and ``accelerate launch`` start; everything else is in
:mod:`saf_utils.jobs`.
"""

import sys

from saf_utils.jobs import main

if __name__ == "__main__":
    sys.exit(main())
