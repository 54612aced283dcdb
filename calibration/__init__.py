"""Calibration of replaced probabilities and part-of-speech bias analysis."""


class CalibrationError(ValueError):
    """Calibration or POS-bias input the analysis cannot use (one ``error:`` line in the CLI)."""
