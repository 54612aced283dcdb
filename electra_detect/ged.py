"""Old path of ``electra_detect.tasks.ged``, kept only for the training internals that still import it
(training/evaluation.py, benchmarks/ablation.py): the same module object, not a copy."""

import sys

from electra_detect.tasks import ged as _ged

sys.modules[__name__] = _ged
