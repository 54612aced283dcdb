"""electra-detect: ELECTRA replaced-token detection as a disfluency signal.

The layers live in sibling folders of this one (``training/``, ``calibration/``, ``app/``) and install
as ``electra_detect.training``, ``electra_detect.calibration`` and ``electra_detect.app``.
"""

from __future__ import annotations

from pathlib import Path as _Path

__version__ = "0.1.0"

_ROOT = _Path(__file__).resolve().parent.parent
# Source checkout (pyproject.toml + layer folders beside this package): its layers are sub-packages from here too.
if (_ROOT / "pyproject.toml").is_file() and all((_ROOT / n / "__init__.py").is_file()
                                                for n in ("training", "calibration", "app")):
    __path__.append(str(_ROOT))  # noqa: F821 - the package's own __path__


def __getattr__(name: str):
    """``from electra_detect import Detector`` without importing numpy for ``import electra_detect``."""
    if name in ("Detector", "TextScores", "WordScore", "TokenScore"):
        from electra_detect import detector

        return getattr(detector, name)
    if name == "DetectorError":
        from electra_detect.errors import DetectorError

        return DetectorError
    raise AttributeError(f"module 'electra_detect' has no attribute {name!r}")
