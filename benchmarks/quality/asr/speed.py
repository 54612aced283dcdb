"""Seconds per utterance of a reranker (one Detector pass over a list's hypotheses) and of generator PLL (one masked
pass per token), side by side in one process on the same test lists.

PLL needs a generator: ``--generator RUN`` takes a run's; without one, a generator of the warm start's shape
(``models/electra-minilm``'s recipe: 2 layers, 384 wide, its vocabulary) with random weights is timed, as PLL's cost
does not depend on the weights (it is timed, never used to rerank).

    python -m benchmarks.quality.asr.speed --reranker runs/rerank/new800 [--generator RUN] [--utterances 100]

Writes result.json and table.md to ``--out-dir`` (default benchmarks/results/asr_speed/).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common.run import command_line
from electra_detect.fileio import atomic_write_json, atomic_write_text
from electra_detect.tasks.rerank.nbest import read_nbest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]



def shaped_generator(model_dir: Path, out: Path, layers: int = 2) -> Path:
    """A masked-LM directory of the warm start's generator shape (random weights) with ``model_dir``'s tokenizer."""
    from transformers import AutoTokenizer, ElectraConfig, ElectraForMaskedLM

    config = ElectraConfig.from_pretrained(str(model_dir))
    config.num_hidden_layers = layers
    ElectraForMaskedLM(config).save_pretrained(str(out), safe_serialization=True)
    AutoTokenizer.from_pretrained(str(model_dir)).save_pretrained(str(out))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reranker", required=True, help="a `rerank train` directory (or any model dir)")
    ap.add_argument("--generator", help="run dir whose generator/ gives PLL (default: the shape, random weights)")
    ap.add_argument("--lists", default=str(HERE / "data" / "test.json"))
    ap.add_argument("--utterances", type=int, default=100)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--out-dir", default=str(ROOT / "benchmarks" / "results" / "asr_speed"))
    args = ap.parse_args()

    import torch

    from electra_detect.detector import Detector
    from electra_detect.tasks.pll import GeneratorScorer
    from electra_detect.tasks.rerank.fusion import pll_scorer
    from electra_detect.tasks.rerank.listwise import Reranker, reranker_scorer

    utts = list(read_nbest(args.lists))[:args.utterances]
    texts = [h.text for u in utts for h in u.hyps]
    detector = Detector.load(args.reranker, engine="auto")
    reranker = Reranker.load(detector.model_dir) or Reranker({"sum": 1.0})
    with tempfile.TemporaryDirectory(prefix="pll-shape-") as tmp:
        source = args.generator or str(shaped_generator(detector.model_dir, Path(tmp)))
        generator = GeneratorScorer.load(source)
        systems = {"reranker": reranker_scorer(detector, reranker, args.batch_size),
                   "generator PLL": pll_scorer(generator, args.batch_size)}
        seconds = {}
        for name, scorer in systems.items():
            scorer(texts[:20])  # warm-up: first-call allocations are not the per-utterance cost
            started = time.perf_counter()
            scorer(texts)
            seconds[name] = (time.perf_counter() - started) / len(utts)
    ratio = seconds["generator PLL"] / seconds["reranker"]
    result = {"benchmark": "asr_speed", "reranker": args.reranker, "engine": detector.describe().splitlines()[0],
              "generator": args.generator or "warm-start shape, random weights (timing only)",
              "utterances": len(utts), "hypotheses": len(texts), "torch_threads": torch.get_num_threads(),
              "seconds_per_utterance": seconds, "pll_over_reranker": ratio,
              "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
              "command": command_line()}
    out = Path(args.out_dir)
    atomic_write_json(out / "result.json", result)
    atomic_write_text(out / "table.md", "\n".join([
        "# Reranking speed: the reranker against generator PLL, per utterance", "",
        f"Command: `{result['command']}` ({result['date']}); {result['engine']}; PLL: {result['generator']}, "
        f"torch {result['torch_threads']} threads. {len(utts)} test lists, {len(texts)} hypotheses, one process, "
        "one after the other.", "",
        "| scorer | seconds per utterance |", "|---|---:|",
        *(f"| {name} | {value:.4f} |" for name, value in seconds.items()), "",
        f"PLL / reranker: **{ratio:.0f}×**.", ""]))
    print(json.dumps({"benchmark": "asr_speed", **seconds, "ratio": round(ratio, 1)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
