"""Multi-process training (``torchrun --nproc_per_node N``: DDP, gloo on CPU, nccl on CUDA) and stop signals.

The trainer calls these helpers the same way in a single process, where each is a no-op or a
pass-through, so the loop has no ``if distributed`` branches of its own. Every rank must call the
collective helpers (``any_rank``, ``barrier``, ``gather``) at the same points, or they deadlock.
"""

from __future__ import annotations

import gc
import os
import signal
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel


@dataclass
class DistInfo:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def main(self) -> bool:
        """Rank 0 owns every write: metrics.jsonl, checkpoints and the exported HF directories."""
        return self.rank == 0

    @property
    def enabled(self) -> bool:
        return self.world_size > 1

    def device(self) -> torch.device:
        return torch.device(f"cuda:{self.local_rank}" if torch.cuda.is_available() else "cpu")


def init_distributed() -> DistInfo:
    """Join the process group torchrun describes in the environment; a single process without it."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return DistInfo()
    if not dist.is_initialized():
        dist.init_process_group(backend="nccl" if torch.cuda.is_available() else "gloo")
    return DistInfo(dist.get_rank(), dist.get_world_size(), int(os.environ.get("LOCAL_RANK", "0")))


def wrap(module: nn.Module, info: DistInfo, find_unused: bool) -> nn.Module:
    """DDP around ``module`` when distributed; ``find_unused``: some parameters get no gradient at some step
    (an objective that trains one half only), which DDP must then look for."""
    return DistributedDataParallel(module, find_unused_parameters=find_unused) if info.enabled else module


def any_rank(flag: bool, info: DistInfo) -> bool:
    """True on every rank when it is true on one (all ranks stop on the same step)."""
    if not info.enabled:
        return flag
    tensor = torch.tensor([int(flag)])
    dist.all_reduce(tensor, op=dist.ReduceOp.MAX)
    return bool(tensor.item())


def mean_over_ranks(row: dict[str, float], info: DistInfo) -> dict[str, float]:
    """A step's logged figures averaged over the ranks (equal shares of the global batch), so that the logged curve is
    the global batch's whatever the number of ranks; a single process's row as it is."""
    if not info.enabled:
        return row
    keys = sorted(k for k, v in row.items() if isinstance(v, int | float))
    values = torch.tensor([float(row[k]) for k in keys], dtype=torch.float64)
    dist.all_reduce(values)
    return {**row, **{k: v / info.world_size for k, v in zip(keys, values.tolist(), strict=True)}}


def lost_peer(exc: BaseException) -> bool:
    """Whether a collective failed because another rank went away (its process or its node): gloo and NCCL say so as a
    ``DistError`` or a RuntimeError about the connection."""
    text = str(exc).lower()
    return isinstance(exc, getattr(dist, "DistError", ())) or any(
        word in text for word in ("connection closed", "connection reset", "broken pipe", "peer", "timed out",
                                  "gloo", "nccl"))


def barrier(info: DistInfo) -> None:
    if info.enabled:
        dist.barrier()


def gather(obj: Any, info: DistInfo) -> list[Any]:
    """Every rank's ``obj``, in rank order (``[obj]`` in a single process)."""
    if not info.enabled:
        return [obj]
    gathered: list[Any] = [None] * info.world_size
    dist.all_gather_object(gathered, obj)
    return gathered


def shutdown(info: DistInfo) -> None:
    """Leave the process group. Drop the DDP model first (``del``): left to interpreter exit, DDP's reducer and
    gloo's threads can abort the process ("terminate called without an active exception")."""
    if not info.enabled:
        return
    gc.collect()
    dist.destroy_process_group()


class StopOnSignal:
    """While active, SIGINT and SIGTERM call ``on_signal(name)`` instead of killing the process: the trainer
    finishes the step, saves a checkpoint and returns. The previous handlers come back on exit."""

    def __init__(self, on_signal: Callable[[str], None]) -> None:
        self.on_signal = on_signal
        self.previous: dict[int, Any] = {}

    def __enter__(self) -> StopOnSignal:
        for signum in (signal.SIGINT, signal.SIGTERM):
            try:
                self.previous[signum] = signal.signal(signum, lambda s, _f: self.on_signal(signal.Signals(s).name))
            except ValueError:  # not in the main thread
                pass
        return self

    def __exit__(self, *_exc: object) -> None:
        for signum, handler in self.previous.items():
            signal.signal(signum, handler)
