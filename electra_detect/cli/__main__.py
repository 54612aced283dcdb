"""``python -m electra_detect.cli`` (torchrun runs pre-training this way)."""

import sys

from electra_detect.cli import main

sys.exit(main())
