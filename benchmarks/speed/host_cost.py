"""What `ged --file` costs per sentence outside the engine: the ceiling a GPU run meets, measured on a CPU.

On a GPU the engine is nearly free (4.78M tokens/s for the MiniLM on an H200, gpu_serving) and a run goes as fast as
the Python around it, which holds the GIL: one process cannot score more sentences a second than 1e6 / (its
host microseconds a sentence). This benchmark replays the engine's recorded outputs, so only the host work is
timed, stage by stage, on ``--sentences`` embedded-corpus sentences (public domain; the sentences the end-to-end
rows of ``gpu_check`` use): encode (the tokenizer, which releases the GIL, timed apart and replayed), run (the
padding, probabilities and writes around the engine), assemble, the GED check, the typing of flagged words by
their edit (ERRANT over spaCy, which ``ged`` runs when the analysis extra is installed; 0 where it is not) and the
JSON lines. ``--baseline REF`` measures a git revision's code in the same run (a
worktree, a process of its own), for a ratio rather than an absolute.

    python -m benchmarks.speed.host_cost --baseline a5e6e94

Writes result.json, table.md and plot.png to ``--out-dir`` (default benchmarks/results/host_cost/). Run it with
nothing else on the machine.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
OUT_DIR = ROOT / "benchmarks" / "results" / "host_cost"
MODEL = ROOT / "models" / "electra-minilm"
STAGES = ("tokenizer", "encode", "run", "assemble", "check", "typing", "json")


def measure(sentences: int, repeats: int, model: Path = MODEL, variant: str = "int8") -> dict[str, Any]:
    """Microseconds a sentence of each host stage (best of ``repeats``), the engine's outputs replayed; one
    intra-op thread. Uses only the scoring core's public pieces, so a baseline revision's code runs it too."""
    import numpy as np

    from benchmarks.speed.gpu_check import embedded_sentences
    from electra_detect.detector import Detector
    from electra_detect.tasks.ged.check import GedChecker
    from electra_detect.tasks.ged.flags import flagged_dicts
    from electra_detect.tasks.ged.options import GedOptions

    texts = embedded_sentences(sentences)
    detector = Detector.load(model, task="ged", engine="onnx", variant=variant, device="cpu", threads=1)
    engine, seen = detector.engine, {}

    class Replay:
        """The engine's outputs for each batch, computed once: the timed passes run no model."""

        name, provider, variant = engine.name, engine.provider, engine.variant
        channels, max_positions = engine.channels, engine.max_positions

        def outputs(self, ids: np.ndarray, mask: np.ndarray) -> Any:
            key = ids.tobytes() + str(ids.shape).encode()
            if key not in seen:
                seen[key] = engine.outputs(ids, mask)
            return seen[key]

    class ReplayTokenizer:
        """The tokenizer's encodings of each call, computed once (timed apart: it releases the GIL)."""

        def __init__(self, tokenizer: Any) -> None:
            self.tokenizer, self.seen = tokenizer, {}
            self.cls_token_id, self.sep_token_id = tokenizer.cls_token_id, tokenizer.sep_token_id
            self.pad_token_id = tokenizer.pad_token_id

        def __call__(self, pieces: list[str], **kwargs: Any) -> Any:
            key = tuple(pieces)
            if key not in self.seen:
                self.seen[key] = self.tokenizer(pieces, **kwargs)
            return self.seen[key]

    detector.engine = Replay()
    checker, typed = GedChecker(detector), GedChecker(detector)
    checker.typer.available = False  # the check alone; ``typed`` adds the typing by edits where it is installed
    options = GedOptions()
    threshold = checker.threshold(options)
    served = {"model": detector.name, "variant": detector.variant}  # as `ged` writes them: named once
    tokenizer, detector.tokenizer = detector.tokenizer, ReplayTokenizer(detector.tokenizer)
    best: dict[str, float] = {}
    flagged_count = tokens = 0
    for attempt in range(repeats + 1):  # the first pass fills the replay
        times = {}
        started = time.perf_counter()
        tokenizer(texts, add_special_tokens=False, return_offsets_mapping=True)
        times["tokenizer"] = time.perf_counter() - started
        started = time.perf_counter()
        job = detector.job(texts)
        times["encode"] = time.perf_counter() - started  # the tokenizer's part replayed
        started = time.perf_counter()
        job.step()
        times["run"] = time.perf_counter() - started
        started = time.perf_counter()
        scored = job.results()
        times["assemble"] = time.perf_counter() - started
        started = time.perf_counter()
        flagged = checker.check(scored, options)
        times["check"] = time.perf_counter() - started
        times["typing"] = 0.0
        if typed.typer.available:  # the typed check's time beyond the plain one's
            started = time.perf_counter()
            typed.check(scored, options)
            times["typing"] = max(0.0, time.perf_counter() - started - times["check"])
        started = time.perf_counter()
        "".join(json.dumps({"text": s.text, "threshold": threshold, "flagged": flagged_dicts(words, 4), **served})
                + "\n" for s, words in zip(scored, flagged, strict=True))
        times["json"] = time.perf_counter() - started
        if attempt:
            best = {k: min(v, best.get(k, v)) for k, v in times.items()}
        flagged_count, tokens = sum(map(len, flagged)), job.tokens
    per = {k: best[k] / len(texts) * 1e6 for k in STAGES}
    held = sum(v for k, v in per.items() if k != "tokenizer")
    return {"sentences": len(texts), "tokens": int(tokens), "flagged": flagged_count,
            "typing_installed": bool(typed.typer.available), "us_per_sentence": per,
            "gil_us_per_sentence": held, "one_process_ceiling_sentences_per_s": 1e6 / held}


def baseline(ref: str, sentences: int, repeats: int) -> dict[str, Any]:
    """:func:`measure` on revision ``ref``'s code, in a git worktree and a process of its own."""
    from benchmarks.common.run import revision_checkout

    with revision_checkout(ref) as tree:
        env = {**os.environ, "PYTHONPATH": str(tree)}  # before the editable install's finder: the old code
        out = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--measure-only", "--sentences",
                              str(sentences), "--repeats", str(repeats)], cwd=tree, env=env, capture_output=True,
                             text=True, check=False)
    if out.returncode:
        raise SystemExit(f"baseline {ref} failed: {out.stderr[-800:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def table(result: dict[str, Any]) -> str:
    rows = {"this revision": result["current"], **({f"baseline {result['baseline_ref']}": result["baseline"]}
                                                    if result.get("baseline") else {})}
    lines = [f"# Host cost of `ged --file` a sentence, engine replayed ({result['machine']}; {result['date']})", "",
             f"{result['current']['sentences']:,} embedded-corpus sentences ({result['current']['tokens']:,} tokens), "
             f"one core, best of {result['repeats']}; load average at start {result['load_average']:.2f}. The "
             "tokenizer releases the GIL; every other stage holds it (spaCy's matrix products inside the typing "
             "excepted), so their sum caps one process on any GPU.", "",
             "| code | " + " | ".join(f"{s} µs" for s in STAGES) + " | GIL-held µs | one-process ceiling, sent/s |",
             "|---|" + "---:|" * (len(STAGES) + 2)]
    for name, row in rows.items():
        per = row["us_per_sentence"]
        lines.append(f"| {name} | " + " | ".join(f"{per[s]:.1f}" for s in STAGES)
                     + f" | {row['gil_us_per_sentence']:.1f} | {row['one_process_ceiling_sentences_per_s']:,.0f} |")
    return "\n".join(lines + ["", f"Command: `{result['command']}`", ""])


def plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from electra_detect.fileio import atomic_save_figure

    rows = [("this revision", result["current"])] + (
        [(f"baseline {result['baseline_ref']}", result["baseline"])] if result.get("baseline") else [])
    fig, ax = plt.subplots(figsize=(7, 2.4))
    for y, (_name, row) in enumerate(rows):
        left = 0.0
        for stage in STAGES[1:]:
            width = row["us_per_sentence"][stage]
            ax.barh(y, width, left=left, label=stage if y == 0 else None,
                    color=plt.cm.tab10(STAGES.index(stage)))
            left += width
    ax.set_yticks(range(len(rows)), [name for name, _ in rows])
    ax.set_xlabel("GIL-held µs a sentence (tokenizer apart)")
    ax.legend(ncol=5, fontsize=7, loc="lower right")
    fig.tight_layout()
    atomic_save_figure(fig, path)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sentences", type=int, default=4000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--baseline", help="a git revision measured beside this one, in the same run")
    parser.add_argument("--model", type=Path, default=MODEL, help="model or export dir (the device has no models/)")
    parser.add_argument("--variant", default="int8", help="the ONNX variant that makes the replayed outputs")
    parser.add_argument("--out-dir", type=Path, default=OUT_DIR)
    parser.add_argument("--measure-only", action="store_true", help=argparse.SUPPRESS)  # a baseline's process
    args = parser.parse_args()
    if args.measure_only:
        print(json.dumps(measure(args.sentences, args.repeats, args.model, args.variant)))
        return 0
    from benchmarks.common.run import command_line, write_result

    result: dict[str, Any] = {"command": command_line(), "machine": f"{platform.machine()}, {os.cpu_count()} cores",
                              "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
                              "load_average": os.getloadavg()[0], "repeats": args.repeats}
    if args.baseline:
        result["baseline_ref"] = args.baseline
        result["baseline"] = baseline(args.baseline, args.sentences, args.repeats)
    result["current"] = measure(args.sentences, args.repeats, args.model, args.variant)
    write_result(args.out_dir, result, table(result), lambda path: plot(result, path))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
