"""Calibration of replaced probabilities and part-of-speech bias analysis."""
