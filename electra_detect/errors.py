"""The core's error types, in one module that imports nothing: every module may raise them without
importing another (the detector and the engines used to import each other for ``DetectorError``).

Each is a failure a user can fix; the CLI prints it as one ``error:`` line (exit 2).
"""

from __future__ import annotations


class DetectorError(ValueError):
    """The model directory or the input text cannot be used."""


class GedOptionsError(ValueError):
    """GED options that cannot be applied together (an unknown level, enabledOnly with nothing enabled, ...)."""


class GedDataError(ValueError):
    """A GED data file is malformed; the message names the file and line."""


class RerankError(ValueError):
    """An n-best file or a reranking setting cannot be used."""


class ExportError(RuntimeError):
    """An ONNX export cannot be made or fails its parity check."""


class CliError(ValueError):
    """A flag value the verb cannot use."""


class RulesUnavailable(RuntimeError):
    """``ged --with-rules`` cannot run: the rule-based checker is not installed or the model has no rules setting."""


class CorruptExport(DetectorError):
    """An ONNX export's file does not match the hash its manifest recorded (replaced, truncated or tampered with)."""
