"""What one pre-training run holds: its data (``RunData``) and its train state (``TrainState``).

The train state is everything a checkpoint saves and a resume restores (DESIGN.md: "a resumed run
continues the same curve"): model, optimizer, scheduler, the data position, the RNG streams, the step
and the tokens seen.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from electra_detect.training.pretraining.checkpoint import load_checkpoint, save_checkpoint
from electra_detect.training.pretraining.config import RunConfig
from electra_detect.training.pretraining.data import (
    BlockSampler,
    PackedBlocks,
    PreparedCorpus,
    default_cache_dir,
    prepare_corpus,
    resolve_corpus,
    split_blocks,
)
from electra_detect.training.pretraining.distributed import DistInfo, barrier, gather
from electra_detect.training.pretraining.model import ElectraPretrainingModel


@dataclass
class RunData:
    """The prepared corpus, its tokenizer, the packed blocks and their train/validation split."""

    corpus: PreparedCorpus
    tokenizer: Any  # a transformers fast tokenizer
    blocks: PackedBlocks
    train_ids: np.ndarray
    val_ids: np.ndarray

    @classmethod
    def prepare(cls, config: RunConfig, info: DistInfo) -> RunData:
        """Tokenize the corpus into the cache (rank 0 first, so the other ranks read its cache) and pack it."""
        from transformers import AutoTokenizer

        data, model_cfg = config.data, config.model
        source = resolve_corpus(data.corpus)
        cache = Path(data.cache_dir) if data.cache_dir else default_cache_dir()
        given = Path(data.tokenizer) if data.tokenizer else None

        def prepare() -> PreparedCorpus:
            return prepare_corpus(source, cache, model_cfg.vocab_size, data.lowercase, data.doc_split, data.seq_len,
                                  given)

        corpus = prepare() if info.main else None
        barrier(info)
        corpus = corpus or prepare()
        tokenizer = AutoTokenizer.from_pretrained(str(corpus.tokenizer_dir))
        blocks = PackedBlocks(corpus.tokens(), data.seq_len, tokenizer.cls_token_id, tokenizer.sep_token_id)
        train_ids, val_ids = split_blocks(blocks.num_blocks, data.val_fraction, data.min_val_blocks)
        return cls(corpus, tokenizer, blocks, train_ids, val_ids)

    @property
    def special_ids(self) -> list[int]:
        return list(self.tokenizer.all_special_ids)

    @property
    def mask_id(self) -> int:
        return self.tokenizer.mask_token_id

    def vocab_bytes(self) -> bytes:
        return (self.corpus.tokenizer_dir / "vocab.txt").read_bytes()

    def val_batches(self, batch_size: int, limit: int) -> list[torch.Tensor]:
        """The first ``limit`` validation batches, the same at every evaluation."""
        return [self.blocks.batch(self.val_ids[i:i + batch_size])
                for i in range(0, len(self.val_ids), batch_size)][:limit]


@dataclass
class TrainState:
    """Everything a checkpoint saves; the training loop advances it one optimizer step at a time."""

    model: ElectraPretrainingModel
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LRScheduler
    sampler: BlockSampler  # the data position (epoch, offset); masking and sampling are seeded per sample (SampleRng)
    step: int = 0
    tokens_seen: int = 0

    def save(self, root: Path, info: DistInfo, fingerprint: dict[str, Any], keep_last: int) -> None:
        """Write checkpoint ``step_XXXXXXXX`` under ``root`` (rank 0) with every rank's torch RNG state (dropout)."""
        local = {"torch": torch.get_rng_state()}
        gathered = gather(local, info)
        if info.main:
            rng_states = {f"{name}.{rank}": state for rank, states in enumerate(gathered)
                          for name, state in states.items()}
            trainer_state = {"step": self.step, "tokens_seen": self.tokens_seen, "sampler": self.sampler.state(),
                             "world_size": info.world_size}
            save_checkpoint(root, self.step, self.model, self.optimizer, self.scheduler, rng_states, trainer_state,
                            fingerprint, keep_last)
        barrier(info)

    def restore(self, path: Path, info: DistInfo, fingerprint: dict[str, Any]) -> None:
        """Load checkpoint ``path`` into this state (raises ``CheckpointError`` when it does not fit the run)."""
        trainer_state, rng_states = load_checkpoint(path, self.model, self.optimizer, self.scheduler, fingerprint)
        self.step, self.tokens_seen = trainer_state["step"], trainer_state["tokens_seen"]
        self.sampler = BlockSampler(self.sampler.block_ids, seed=self.sampler.seed, **trainer_state["sampler"])
        if trainer_state.get("world_size") == info.world_size:
            torch.set_rng_state(rng_states[f"torch.{info.rank}"])
        elif info.main:
            print(f"warning: checkpoint was written with {trainer_state.get('world_size')} processes, "
                  f"this run has {info.world_size}; dropout's RNG streams restart from the seed (masking and "
                  f"sampling go on as before: they are seeded per sample)")
