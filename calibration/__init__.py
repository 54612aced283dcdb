"""Calibration of replaced probabilities and part-of-speech bias analysis."""

from electra_detect.errors import UserError


class CalibrationError(UserError, ValueError):
    """Calibration or POS-bias input the analysis cannot use (one ``error:`` line in the CLI)."""
