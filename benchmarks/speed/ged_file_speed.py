"""`electra-detect ged --file` against harper-py on the same learner sentences, side by side in one run, with
where the time of ``ged`` goes and how onnxruntime's session options change the engine's speed.

Sentences: the first ``--sentences`` of MultiGED-2023's FCE dev TSV (the tuning set; detokenised as the peers read
it), one per line. Per configuration: ``ged --file`` in a process of its own, from process start to the last line
(the ONNX export already cached), and to the first line; harper-py in this process over the same lines (its
start-up not counted, which favours it). Then, in-process on the same sentences: the Detector's stages (encode,
engine, assemble) and the GED check (flags, dictionary, typing by edits) timed apart; and the int8 engine alone on
the Detector's own batches under session options (graph optimisation level and threads, interleaved).

    python -m benchmarks.speed.ged_file_speed --tsv runs/data/multiged/en_fce_dev.tsv [--baseline REV]

``--baseline REV`` adds ``ged --file`` of a git revision's code (a worktree), alternating with this one's.

Writes result.json, table.md and plot.png to ``--out-dir`` (default benchmarks/results/ged_file_speed/). Run it
with nothing else on the machine: its figures are ratios within one run.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.common.run import command_line, revision_checkout, time_ged, time_ged_file

ROOT = Path(__file__).resolve().parents[2]
OUT_DIR = ROOT / "benchmarks" / "results" / "ged_file_speed"
MODEL = ROOT / "models" / "electra-minilm"


def learner_sentences(tsv: Path, count: int) -> list[str]:
    from benchmarks.common.peers import detokenize
    from electra_detect.tasks.ged.readers import read_token_tsv

    return [detokenize(" ".join(s.tokens))[0] for s in read_token_tsv(tsv)[:count]]


def ged_file(path: Path, lines: int, extra: list[str], code: Path | None = None) -> dict[str, Any]:
    """``ged --file`` of the shipped model from process start (:func:`benchmarks.common.run.time_ged_file`)."""
    return time_ged_file(MODEL, path, lines, extra, code)


def harper(texts: list[str]) -> dict[str, Any]:
    from benchmarks.common.peers import HarperPeer

    peer = HarperPeer()
    started = time.perf_counter()
    for start in range(0, len(texts), 256):
        peer.flag(texts[start:start + 256])
    seconds = time.perf_counter() - started
    return {"version": peer.version, "seconds": seconds, "sentences_per_s": len(texts) / seconds}


def stages(texts: list[str], passes: int = 3) -> tuple[dict[str, Any], list[Any]]:
    """Seconds of each stage of ``Detector.score`` and of the GED check, one thread, the int8 engine, the median of
    ``passes`` (the Detector's run and the engine alone on its batches alternate: one pass of each moved by up to a
    tenth with this host's drift); and the batches the Detector formed."""
    from benchmarks.speed.gpu_check import BatchRecorder
    from electra_detect.assembly import assemble
    from electra_detect.detector import Detector
    from electra_detect.tasks.ged.check import GedChecker
    from electra_detect.tasks.ged.options import GedOptions

    detector = Detector.load(MODEL, task="ged", engine="onnx", variant="int8", threads=1)
    detector.score(texts[:32])  # warm-up
    timed: dict[str, list[float]] = {"encode": [], "run": [], "engine_alone": []}
    for _ in range(passes):
        started = time.perf_counter()
        job = detector.job(texts)
        timed["encode"].append(time.perf_counter() - started)
        engine, detector.engine = detector.engine, BatchRecorder(detector.engine)
        started = time.perf_counter()
        job.step()
        timed["run"].append(time.perf_counter() - started)
        batches, detector.engine = detector.engine.batches, engine
        started = time.perf_counter()
        for ids, mask in batches:
            engine.outputs(ids, mask)
        timed["engine_alone"].append(time.perf_counter() - started)
    encode, run, engine_alone = (statistics.median(timed[k]) for k in ("encode", "run", "engine_alone"))
    started = time.perf_counter()
    scored = assemble(job.texts, job.encodings, job.probs, job.types, detector.channels, detector.edit_tags)
    assembly = time.perf_counter() - started
    checker = GedChecker(detector)
    checker.check(scored[:64], GedOptions())  # loads what typing needs once
    started = time.perf_counter()
    checker.check(scored, GedOptions())
    check = time.perf_counter() - started
    total = encode + run + assembly + check
    return {"passes": passes, "encode_s": encode, "run_s": run, "engine_alone_s": engine_alone, "assemble_s": assembly,
            "check_s": check, "score_share_of_engine": engine_alone / (encode + run + assembly),
            "ged_share_of_engine": engine_alone / total,
            "shares": {k: v / total for k, v in (("encode", encode), ("run", run), ("assemble", assembly),
                                                  ("check", check))}}, batches


def session_options(batches: list[Any], rounds: int = 3) -> list[dict[str, Any]]:
    """The int8 engine alone on the Detector's batches under onnxruntime's graph optimisation levels and thread
    counts (spinning off, as every session runs), interleaved over ``rounds`` passes (a drift in this host's speed
    hits every option alike); each option's median pass."""
    import statistics

    import onnxruntime as ort

    from electra_detect.onnx.locate import locate
    from electra_detect.onnx.manifest import verified_path

    path = verified_path(locate(MODEL / "ged").export_dir, "int8")
    options = [(level, threads) for level in ("ORT_ENABLE_BASIC", "ORT_ENABLE_EXTENDED", "ORT_ENABLE_ALL")
               for threads in (1, 2)]
    runs = {}
    for level, threads in options:
        settings = ort.SessionOptions()
        settings.graph_optimization_level = getattr(ort.GraphOptimizationLevel, level)
        settings.intra_op_num_threads = threads
        settings.add_session_config_entry("session.intra_op.allow_spinning", "0")
        session = ort.InferenceSession(str(path), sess_options=settings, providers=["CPUExecutionProvider"])
        names = {i.name for i in session.get_inputs()}
        feeds = [{k: v for k, v in {"input_ids": ids, "attention_mask": mask, "token_type_ids": ids * 0}.items()
                  if k in names} for ids, mask in batches]
        session.run(None, feeds[0])
        runs[level, threads] = (session, feeds, [])
    for _ in range(rounds):
        for session, feeds, seconds in runs.values():
            started = time.perf_counter()
            for feed in feeds:
                session.run(None, feed)
            seconds.append(time.perf_counter() - started)
    return [{"level": level, "threads": threads, "spinning": False, "seconds": statistics.median(seconds),
             "passes": seconds} for (level, threads), (_session, _feeds, seconds) in runs.items()]


FLAGGED, CLEAN = "He go to the store.", "He goes to the store."  # the first flag once cost 4.5 s, clean 0.9


def one_sentence(rounds: int) -> dict[str, Any]:
    """``ged SENTENCE`` from process start to its line, a flagged sentence and a clean one alternating ``rounds``
    times (the default engine, the export cached); medians and their ratio."""
    import statistics

    seconds: dict[str, list[float]] = {"flagged": [], "clean": []}
    for _ in range(rounds):
        for name, text in (("flagged", FLAGGED), ("clean", CLEAN)):
            seconds[name].append(time_ged(MODEL, [text], 1)["seconds"])
    medians = {k: statistics.median(v) for k, v in seconds.items()}
    return {"flagged": FLAGGED, "clean": CLEAN, "rounds": rounds, "seconds": seconds, "median_s": medians,
            "ratio": medians["flagged"] / medians["clean"]}


def side_by_side(path: Path, lines: int, ref: str, rounds: int) -> dict[str, Any]:
    """``ged --file`` (int8) of this checkout and of revision ``ref`` (a git worktree), alternating ``rounds``
    times: the ratio of the two codes on this machine at one time, whatever its speed that hour."""
    import statistics

    seconds: dict[str, list[float]] = {"current": [], "baseline": []}
    memory: dict[str, list[float]] = {"current": [], "baseline": []}
    with revision_checkout(ref) as tree:  # the revision's code with its own model
        for _ in range(rounds):
            for name, code, model in (("baseline", tree, tree / "models" / "electra-minilm"), ("current", None, MODEL)):
                row = time_ged_file(model, path, lines, ["--variant", "int8"], code)
                seconds[name].append(row["seconds"])
                memory[name].append(row["peak_rss_mb"])
    medians = {k: statistics.median(v) for k, v in seconds.items()}
    return {"ref": ref, "rounds": rounds, "seconds": seconds, "median_s": medians,
            "speedup": medians["baseline"] / medians["current"], "peak_rss_mb": memory,
            "median_peak_rss_mb": {k: statistics.median(v) for k, v in memory.items()}}


def table(result: dict[str, Any]) -> str:
    harper_speed = result["harper"]["sentences_per_s"]
    lines = [f"# `ged --file` against harper-py ({result['machine']}; {result['date']})", "",
             f"{result['sentences']:,} sentences of MultiGED-2023's FCE dev TSV, one per line; load average at start "
             f"{result['load_average']:.2f}. `ged` from process start (export cached); harper-py in-process.", "",
             "| configuration | first line s | total s | sentences/s | × harper-py |", "|---|---:|---:|---:|---:|"]
    for name, row in result["ged"].items():
        lines.append(f"| `{name}` ({row['engine_line'].split(' from ')[0]}) | {row['first_line_s']:.2f} | "
                     f"{row['seconds']:.2f} | {row['sentences_per_s']:,.0f} | "
                     f"{row['sentences_per_s'] / harper_speed:.2f} |")
    peer = result["harper"]
    lines.append(f"| {peer['version']} | | {peer['seconds']:.2f} | {harper_speed:,.0f} | 1.00 |")
    if result.get("side_by_side"):
        pair = result["side_by_side"]
        rss = pair.get("median_peak_rss_mb", {})
        lines += ["", f"Side by side with revision `{pair['ref']}` and its own model (`ged --file --variant int8`, "
                      f"alternating, {pair['rounds']} rounds): this code {pair['median_s']['current']:.2f} s, "
                      f"`{pair['ref']}` {pair['median_s']['baseline']:.2f} s (medians; {pair['speedup']:.2f}x); peak "
                      f"memory {rss.get('current', float('nan')):.0f} MB against "
                      f"{rss.get('baseline', float('nan')):.0f} MB."]
    if result.get("one_sentence"):
        one = result["one_sentence"]
        lines += ["", f"One sentence from process start to its line (median of {one['rounds']}): flagged "
                      f"\"{one['flagged']}\" {one['median_s']['flagged']:.2f} s, clean \"{one['clean']}\" "
                      f"{one['median_s']['clean']:.2f} s ({one['ratio']:.2f}x; goal <= 1.25x)."]
    stage = result["stages"]
    lines += ["", f"Where `ged`'s time goes (in-process, one thread, int8, the median of {stage.get('passes', 3)} "
              "passes): " + ", ".join(
        f"{name} {share:.0%}" for name, share in stage["shares"].items())
              + f"; the engine alone on the same batches is {stage['score_share_of_engine']:.0%} of `Detector.score`'s "
                f"speed, and `ged` (scoring and its check: types, rules, messages) runs at **"
                f"{stage.get('ged_share_of_engine', float('nan')):.0%} of the engine's own speed** (goal >= 90%).", "",
              "The int8 engine alone on those batches under onnxruntime's session options "
                "(spinning off; the options interleaved, median of the passes):", "",
              "| graph optimisation | threads | int8 engine s |", "|---|---:|---:|"]
    for row in result["session_options"]:
        lines.append(f"| {row['level']} | {row['threads']} | {row['seconds']:.2f} |")
    return "\n".join(lines + ["", f"Command: `{result['command']}`", ""])


def plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from electra_detect.fileio import atomic_save_figure

    names = [*result["ged"], "harper-py"]
    speeds = [row["sentences_per_s"] for row in result["ged"].values()] + [result["harper"]["sentences_per_s"]]
    fig, ax = plt.subplots(figsize=(7, 3))
    ax.barh(names, speeds, color=["#4477aa"] * len(result["ged"]) + ["#999999"])
    ax.set_xlabel("sentences/s (FCE dev, process start included for ged)")
    ax.invert_yaxis()
    fig.tight_layout()
    atomic_save_figure(fig, path)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tsv", type=Path, default=Path("runs/data/multiged/en_fce_dev.tsv"))
    parser.add_argument("--sentences", type=int, default=2000)
    parser.add_argument("--out-dir", type=Path, default=OUT_DIR)
    parser.add_argument("--baseline", help="a git revision whose ged --file runs beside this one's, alternating")
    parser.add_argument("--rounds", type=int, default=3, help="alternations with --baseline")
    parser.add_argument("--rewrite", action="store_true", help="only redraw --out-dir's table and plot")
    args = parser.parse_args()
    if args.rewrite:
        rewrite(args.out_dir)
        return 0
    from electra_detect.fileio import atomic_write_json

    texts = learner_sentences(args.tsv, args.sentences)
    path = Path(tempfile.mkdtemp(prefix="ged-file-speed-")) / "sentences.txt"  # learner text: never in the repo
    path.write_text("\n".join(texts) + "\n", encoding="utf-8")
    try:
        result: dict[str, Any] = {"command": command_line(), "machine": f"{platform.machine()}, {os.cpu_count()} cores",
                                  "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
                                  "load_average": os.getloadavg()[0], "sentences": len(texts)}
        ged_file(path, len(texts), ["--variant", "int8"])  # the export, once, before anything is timed
        result["ged"] = {name: ged_file(path, len(texts), extra) for name, extra in
                         (("ged --file", []), ("ged --file --variant int8", ["--variant", "int8"]),
                          ("ged --file --variant int8 --processes 2", ["--variant", "int8", "--processes", "2"]),
                          ("ged --file --suggest", ["--suggest"]))}
        result["harper"] = harper(texts)
        if args.baseline:
            result["side_by_side"] = side_by_side(path, len(texts), args.baseline, args.rounds)
        result["one_sentence"] = one_sentence(args.rounds + 2)
        result["stages"], batches = stages(texts)
        result["session_options"] = session_options(batches)
    finally:
        path.unlink(missing_ok=True)
        path.parent.rmdir()
    atomic_write_json(args.out_dir / "result.json", result)
    rewrite(args.out_dir)
    return 0


def rewrite(out_dir: Path) -> None:
    """table.md and plot.png of ``out_dir``'s result.json (after a change to how they are drawn)."""
    from electra_detect.fileio import atomic_write_text

    result = json.loads((out_dir / "result.json").read_text())
    atomic_write_text(out_dir / "table.md", table(result))
    plot(result, out_dir / "plot.png")
    print(json.dumps({name: round(row["sentences_per_s"] / result["harper"]["sentences_per_s"], 2)
                      for name, row in result["ged"].items()}))


if __name__ == "__main__":
    raise SystemExit(main())
