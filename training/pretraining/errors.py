"""Pre-training's error types, in a module that imports nothing: the CLI names them before torch loads.

Each is a failure a user can fix; ``electra-detect pretrain`` prints it as one ``error:`` line (exit 2).
"""

from __future__ import annotations

from electra_detect.errors import UserError


class CorpusError(UserError, ValueError):
    """The corpus cannot be read or holds too little text."""


class CheckpointError(UserError, RuntimeError):
    """A checkpoint is missing, corrupt, or does not match the run."""


class RankLost(UserError, RuntimeError):
    """A multi-process run lost a rank (its process or its node): the job ends; ``--resume`` continues it."""
