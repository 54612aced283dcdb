"""The device side of issue 50's distillation: two calls, each under the tool's 10 minutes (docs/distillation.md).

    python3 scripts/device/distill_device.py call1 [--profile h200|h100] [--halves]   # teachers, then labels
    python3 scripts/device/distill_device.py call2 [--profile h200|h100]              # students

Both start with ``setup``: the payload parts carried to ``/tmp/w`` (scripts/device/build_payload.py: the base parts
``pNN`` and the text parts ``tNN``) are joined and unpacked into ``/tmp/payload`` once, and this project's pins of
transformers/tokenizers/huggingface_hub and the checkout itself are installed into ``/tmp/site`` (put first on
PYTHONPATH). ``/tmp`` survives between calls while the machine is warm, so call 2 reads what call 1 left there.

call 1: the teacher's arms side by side on the one GPU (``ged train --model <MPNet dir> --types --bf16`` on MultiGED's
FCE train TSV + W&I+LOCNESS train A/B/C M2; two learning rates x two seeds on an H200, two learning rates on an
H100), each scored on the tuning and report halves of MultiGED's FCE dev and JFLEG dev (the halves of ``ged eval
--split``), and the mean of each learning rate's two seeds beside them; the best on the tuning halves (single or
seed mean) labels the distillation text in parallel processes (``distill label --part i/n``), until the call's
deadline (what is left resumes in call 2). ``--halves``: also two half teachers (learner half 0 / half 1 at the
first learning rate), each labelling the learner half it did not see.

call 2: the student arms side by side (``distill train`` from ged-synthetic: learner / learner+corrupted /
learner+corrupted+clean), each with a time cap, scored on the dev halves; the best on the tuning halves is packed
(fp16, tar in parts of 15 MiB) under $OUT with every arm's figures.

What comes back (at most 8 files, 16 MiB each): call 1: call1.log, teachers.json, labels.json; call 2: call2.log,
students.json, student.tar.part00..03.

An H100 runs this about 1.5-2x slower than the H200 figures in ../shared/DEVICE.md: ``--profile h100`` cuts the
teacher arms to one seed (two runs), labels at most 150,000 corrupted and 30,000 clean sentences, and gives every
student 1 epoch (H200: the learner-only arm 2). Still short of time: drop --halves first, then an arm (--arms),
then --epochs 2.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# The whole session has 15 minutes of device time, the machine's start and the part uploads included: call 1 ends
# by 420 s, call 2 by 270 s. The teacher arms run side by side in a training window; each arm's steps are capped so
# that its learning-rate schedule ends inside it at the assumed aggregate rate (sentences/s of all arms together;
# DEVICE.md: one MPNet run alone 1,200/s on an H200, four shared the GPU well). A faster GPU ends early (labelling
# gets the time), a slower one is stopped at the window's end plus a margin. Each run's ged.json records its speed.
PROFILES = {
    "h200": {"arms": [(3e-5, 0), (3e-5, 1), (5e-5, 0), (5e-5, 1)], "epochs": 3, "rate": 2400, "window": 230,
             "call1_deadline": 420, "call2_deadline": 270, "limits": {},
             "label_procs": {"learner": 2, "corrupted": 5, "clean": 2}, "student_epochs": {"learner": 2}},
    # H100: slower memory, about 1.5-2x the H200's time: one seed (two runs), fewer corpus sentences labelled
    "h100": {"arms": [(3e-5, 0), (5e-5, 0)], "epochs": 3, "rate": 1400, "window": 230,
             "call1_deadline": 420, "call2_deadline": 270, "limits": {"corrupted": 150_000, "clean": 30_000},
             "label_procs": {"learner": 2, "corrupted": 4, "clean": 1}, "student_epochs": {}},
}
LEARNER_SENTENCES = 62_665  # MultiGED FCE train TSV + W&I+LOCNESS train A/B/C M2 (distill text's count)
STUDENT_ARMS = {"learner": ["learner"], "corrupted": ["learner", "corrupted"],
                "clean": ["learner", "corrupted", "clean"]}
PART_BYTES = 15 << 20  # a returned file is at most 16 MiB


class Log:
    """One log file under $OUT, written as it goes (what is there comes back even when the call runs out of time)."""

    def __init__(self, path: Path) -> None:
        self.path, self.started = path, time.monotonic()
        path.parent.mkdir(parents=True, exist_ok=True)
        self.handle = open(path, "a", buffering=1, encoding="utf-8")  # noqa: SIM115 (open for the whole call)
        self.lock = threading.Lock()

    def __call__(self, message: str) -> None:
        line = f"[{time.monotonic() - self.started:6.0f}s] {message}"
        with self.lock:
            self.handle.write(line + "\n")
        print(line, flush=True)


def elapsed(log: Log) -> float:
    return time.monotonic() - log.started


# -- setup ----------------------------------------------------------------------------------------------------
def setup(args: argparse.Namespace, log: Log) -> Path:
    """Join and unpack the payload once; install the pinned libraries and this checkout into the site folder."""
    root = Path(args.root)
    payload = root / "payload"
    root.mkdir(parents=True, exist_ok=True)
    for prefix, what in (("p", "base"), ("t", "text")):  # build_payload.py's two archives, each in parts
        stamp = root / f".unpacked-{prefix}"
        if stamp.exists():
            continue
        parts = sorted(Path(args.parts).glob(f"{prefix}[0-9][0-9]"))
        if not parts:
            raise SystemExit(f"error: no {what} payload parts ({prefix}00, ...) in {args.parts}: copy the carried "
                             "parts there first (docs/distillation.md)")
        cat = subprocess.Popen(["cat", *map(str, parts)], stdout=subprocess.PIPE)
        tar = subprocess.run(["tar", "xf", "-", "-C", str(root)], stdin=cat.stdout)
        if cat.wait() or tar.returncode:
            raise SystemExit(f"error: the {what} parts {', '.join(p.name for p in parts)} do not unpack: one is "
                             f"missing or cut short (compare their sizes with runs/distill/parts/{prefix}.json)")
        stamp.write_text(" ".join(p.name for p in parts) + "\n")
        log(f"unpacked the {what} parts ({', '.join(p.name for p in parts)}) into {payload}")
    site = root / "site"
    if args.install and not (site / ".installed").exists():
        site.mkdir(parents=True, exist_ok=True)
        wheels = sorted(map(str, (payload / "wheels").glob("*.whl")))
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile",
                        "--target", str(site), *wheels], check=True)
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                        "--no-compile", "--target", str(site), str(REPO)], check=True)
        (site / ".installed").write_text("ok\n")
        log("installed the pinned wheels and the checkout into " + str(site))
    if args.install:
        os.environ["PYTHONPATH"] = f"{site}:{os.environ.get('PYTHONPATH', '')}".rstrip(":")
        sys.path.insert(0, str(site))
    os.environ["PYTHONUNBUFFERED"] = "1"
    return payload


# -- running children side by side ------------------------------------------------------------------------------
def start(name: str, command: list[str], log: Log) -> subprocess.Popen:
    """A child process whose output goes to the call's log, prefixed by its name; progress bars every 30 s."""
    log(f"{name}: " + " ".join(command))
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=REPO)

    def pump() -> None:
        buffer, last_bar = b"", 0.0
        for chunk in iter(lambda: process.stdout.read1(4096), b""):
            buffer += chunk
            while True:
                cut = min((i for i in (buffer.find(b"\n"), buffer.find(b"\r")) if i >= 0), default=-1)
                if cut < 0:
                    break
                line, newline, buffer = buffer[:cut].decode("utf-8", "replace"), buffer[cut:cut + 1] == b"\n", \
                    buffer[cut + 1:]
                if line.strip() and (newline or time.monotonic() - last_bar > 30):
                    last_bar = time.monotonic() if not newline else last_bar
                    log(f"{name}| {line.strip()[:300]}")
        if buffer.strip():
            log(f"{name}| {buffer.decode('utf-8', 'replace').strip()[:300]}")

    threading.Thread(target=pump, daemon=True).start()
    return process


def wait_all(processes: dict[str, subprocess.Popen], log: Log, deadline: float) -> dict[str, int]:
    """Wait for every child; at the deadline the ones still running are stopped (-15)."""
    codes: dict[str, int] = {}
    while len(codes) < len(processes):
        for name, process in processes.items():
            if name not in codes and process.poll() is not None:
                codes[name] = process.returncode
                log(f"{name}: exit {process.returncode}")
        if elapsed(log) > deadline:
            for name, process in processes.items():
                if name not in codes:
                    process.terminate()
                    process.wait(30)
                    codes[name] = -15
                    log(f"{name}: stopped at the deadline")
        time.sleep(2)
    return codes


def cli(*words: str) -> list[str]:
    return [sys.executable, "-m", "electra_detect.cli", *words]


# -- call 1: teachers and labels --------------------------------------------------------------------------------
def teacher_data(payload: Path, half: int | None = None) -> list[str]:
    """The teacher's training files as PATH:FORMAT: MultiGED FCE train TSV + W&I+LOCNESS train A/B/C M2 (or one
    learner half of them, from ``distill text``)."""
    folder = payload / "data" if half is None else payload / "text" / "learner" / f"half{half}"
    files = ["en_fce_train.tsv", "A.train.gold.bea19.m2", "B.train.gold.bea19.m2", "C.train.gold.bea19.m2"]
    return [f"{folder / name}:{'tsv' if name.endswith('.tsv') else 'm2'}" for name in files]


def dev_sets(payload: Path) -> dict[str, list]:
    from electra_detect.training.finetune.distill import read_dev_sets

    return read_dev_sets([f"{payload / 'data' / 'en_fce_dev.tsv'}:tsv", f"{payload / 'data' / 'jfleg_dev.tsv'}:tsv"])


def halves_scores(model: Path, dev: dict[str, list]) -> dict[str, tuple]:
    """Per dev set the (tuning, report) halves' per-token scores of a model (the split of ``ged eval --split``)."""
    from electra_detect.detector import Detector
    from electra_detect.tasks.ged.alignment import score_tokens
    from electra_detect.tasks.ged.readers import split_sentences
    from electra_detect.training.finetune.distill import DEV_SPLIT_SEED

    detector = Detector.load(model, engine="torch")
    out = {}
    for name, sentences in dev.items():
        tune, report = split_sentences(sentences, 0.5, DEV_SPLIT_SEED)
        out[name] = (tune, score_tokens(detector, tune, 128), report, score_tokens(detector, report, 128))
    return out


def figures(scored: dict[str, tuple]) -> dict:
    """Tuning- and report-half figures: at each set's own tuned threshold (= ``ged eval --split``) and at the one
    threshold shared by both sets' tuning halves; ``select``: the mean tuning-half F0.5 at the shared one."""
    import numpy as np

    from electra_detect.tasks.ged.metrics import flatten, shared_threshold, token_metrics, tune_threshold

    flat = {name: (flatten(tune, ts), flatten(report, rs)) for name, (tune, ts, report, rs) in scored.items()}
    shared = shared_threshold([t for t, _ in flat.values()])
    sets = {}
    for name, ((tl, ts), (rl, rs)) in flat.items():
        own = tune_threshold(tl, ts)
        sets[name] = {"own_threshold": own, "report_at_own": token_metrics(rl, rs, own),
                      "tune_at_shared": token_metrics(tl, ts, shared),
                      "report_at_shared": token_metrics(rl, rs, shared)}
    select = float(np.mean([s["tune_at_shared"]["f05"] for s in sets.values()]))
    return {"shared_threshold": shared, "select": select, "sets": sets}


def mean_scores(a: dict[str, tuple], b: dict[str, tuple]) -> dict[str, tuple]:
    return {name: (tune, [(x + y) / 2 for x, y in zip(a[name][1], b[name][1], strict=True)], report,
                   [(x + y) / 2 for x, y in zip(a[name][3], b[name][3], strict=True)])
            for name, (tune, _, report, _) in a.items()}


def labelled(folder: Path) -> bool:
    """Every shard of a set's labels is there (``distill label``'s labels.json and shard files)."""
    manifest = folder / "labels.json"
    if not manifest.exists():
        return False
    info = json.loads(manifest.read_text())
    return all((folder / f"shard-{i:05d}.npz").exists() for i in range(-(-info["sentences"] // info["shard_size"])))


def label_jobs(payload: Path, labels: Path, teachers: list[str], halves: list[str], profile: dict,
               args: argparse.Namespace) -> dict[str, list[str]]:
    """One ``distill label`` process per (set, part): the sets in parallel, each cut into parts by shard; none for
    a set labelled whole already (call 2 after a call 1 that finished: no processes loading the teacher for nothing)."""
    manifest = json.loads((payload / "text" / "manifest.json").read_text())
    jobs = {}
    for name in ("learner", "corrupted", "clean"):
        if name not in manifest["sets"] or labelled(labels / name):
            continue
        limit = args.limit or profile["limits"].get(name, 0)
        procs = profile["label_procs"][name]
        for part in range(procs):
            who = ["--half-teachers", *halves] if halves and name == "learner" else ["--teacher", *teachers]
            if halves and name == "learner" and teachers:
                who += ["--teacher", *teachers]
            jobs[f"label-{name}-{part}"] = cli("distill", "label", str(payload / "text" / f"{name}.jsonl.gz"),
                                               "--out", str(labels / name), *who, "--part", f"{part}/{procs}",
                                               "--batch-size", "128", "--shard-size", str(args.shard_size),
                                               *(["--limit", str(limit)] if limit else []))
    return jobs


def call1(args: argparse.Namespace) -> None:
    out = Path(os.environ.get("OUT", args.work))
    log = Log(out / "call1.log")
    log(f"profile {args.profile}")
    profile = dict(PROFILES[args.profile])
    if args.epochs:
        profile["epochs"] = args.epochs
    if args.window:
        profile["window"] = args.window
    payload = setup(args, log)
    work = Path(args.work)
    teacher_start = args.teacher_start or str(payload / "mpnet")
    runs = {f"teacher-lr{lr:g}-s{seed}": (lr, seed, None) for lr, seed in profile["arms"]}
    if args.halves:
        lr = profile["arms"][0][0]
        runs.update({f"half{h}-lr{lr:g}": (lr, 0, h) for h in (0, 1)})
    sentences = args.learner_sentences or LEARNER_SENTENCES
    per_arm = profile["rate"] / len(runs) * profile["window"]  # sentences each arm can see in the window
    processes = {}
    for name, (lr, seed, half) in runs.items():
        seen = sentences / 2 if half is not None else sentences
        steps = int(min(profile["epochs"] * seen, per_arm) // 32)
        steps = min(steps, args.max_steps) if args.max_steps else steps
        target = work / "teachers" / name
        if (target / "ged.json").exists():
            log(f"{name}: already trained")
            continue
        command = cli("ged", "train", "--model", teacher_start, "--out", str(target), "--types", "--bf16",
                      "--data", *teacher_data(payload, half), "--epochs", str(profile["epochs"]), "--lr", str(lr),
                      "--seed", str(seed), "--batch-size", "32", "--no-progress", "--max-steps", str(steps))
        processes[name] = start(name, command, log)
    wait_all(processes, log, profile["window"] + 60 + elapsed(log))  # + loading and saving
    dev = dev_sets(payload)
    scored, report = {}, {"profile": args.profile, "epochs": profile["epochs"], "start": teacher_start, "arms": {}}
    for name in runs:
        if (work / "teachers" / name / "ged.json").exists():
            scored[name] = halves_scores(work / "teachers" / name, dev)
            summary = json.loads((work / "teachers" / name / "ged.json").read_text())
            report["arms"][name] = {**figures(scored[name]), "minutes": summary.get("minutes"),
                                    "last_loss": summary.get("last_loss"), "steps": summary.get("steps")}
            log(f"{name}: select {report['arms'][name]['select']:.4f} " + json.dumps(
                {k: round(v["report_at_own"]["f05"], 4) for k, v in report["arms"][name]["sets"].items()}))
    for lr in sorted({lr for lr, _ in profile["arms"]}):  # the mean of a learning rate's two seeds
        pair = [n for n, (r, _, h) in runs.items() if r == lr and h is None and n in scored]
        if len(pair) == 2:
            name = f"mean-lr{lr:g}"
            report["arms"][name] = {**figures(mean_scores(scored[pair[0]], scored[pair[1]])), "members": pair}
            log(f"{name}: select {report['arms'][name]['select']:.4f}")
    candidates = {n: a for n, a in report["arms"].items() if not n.startswith("half")}
    if not candidates:
        (out / "teachers.json").write_text(json.dumps(report, indent=2))
        raise SystemExit("error: no teacher finished; see call1.log")
    best = max(candidates, key=lambda n: candidates[n]["select"])
    teachers = [str(work / "teachers" / m) for m in candidates[best].get("members", [best])]
    halves = [str(work / "teachers" / f"half{h}-lr{profile['arms'][0][0]:g}") for h in (0, 1)] if args.halves else []
    report.update(best=best, teachers=teachers, half_teachers=halves)
    (out / "teachers.json").write_text(json.dumps(report, indent=2))
    (work / "teacher.json").write_text(json.dumps({"teachers": teachers, "half_teachers": halves}))
    log(f"best teacher: {best} ({teachers})")
    label(payload, work, teachers, halves, profile, args, log, out / "labels.json",
          args.deadline or profile["call1_deadline"])


def label(payload: Path, work: Path, teachers: list[str], halves: list[str], profile: dict,
          args: argparse.Namespace, log: Log, report: Path, deadline: float) -> bool:
    """Label every set (resuming what is there) until the deadline; returns whether every set is done."""
    jobs = label_jobs(payload, work / "labels", teachers, halves, profile, args)
    processes = {name: start(name, command, log) for name, command in jobs.items()}
    wait_all(processes, log, deadline)
    status = {}
    for name in ("learner", "corrupted", "clean"):
        manifest = work / "labels" / name / "labels.json"
        if manifest.exists():
            info = json.loads(manifest.read_text())
            shards = -(-info["sentences"] // info["shard_size"])
            have = len(list((work / "labels" / name).glob("shard-*.npz")))
            status[name] = {"sentences": info["sentences"], "shards": shards, "done_shards": have,
                            "teacher_threshold": info["teacher_threshold"], "types": info["types"]}
    report.write_text(json.dumps(status, indent=2))
    log("labels: " + json.dumps({k: f"{v['done_shards']}/{v['shards']}" for k, v in status.items()}))
    return all(v["done_shards"] == v["shards"] for v in status.values())


# -- call 2: students ----------------------------------------------------------------------------------------
def call2(args: argparse.Namespace) -> None:
    out = Path(os.environ.get("OUT", args.work))
    log = Log(out / "call2.log")
    profile = PROFILES[args.profile]
    deadline = args.deadline or profile["call2_deadline"]
    payload = setup(args, log)
    work = Path(args.work)
    chosen = json.loads((work / "teacher.json").read_text())
    # labels call 1 left unfinished are finished first (each set's shards resume)
    if not label(payload, work, chosen["teachers"], chosen["half_teachers"], profile, args, log,
                 work / "labels-call2.json", deadline - args.student_seconds):
        raise SystemExit("error: the labels are not finished; run call2 again (the labelling resumes)")
    minutes = max(0.5, (deadline - elapsed(log) - args.eval_seconds) / 60)
    dev = [f"{payload / 'data' / 'en_fce_dev.tsv'}:tsv", f"{payload / 'data' / 'jfleg_dev.tsv'}:tsv"]
    processes = {}
    for arm, sets in STUDENT_ARMS.items():
        if arm not in args.arms:
            continue
        epochs = profile["student_epochs"].get(arm, 1)
        command = cli("distill", "train", "--model", args.student_start or str(payload / "student-start"),
                      "--out", str(work / "students" / arm), "--texts", str(payload / "text"),
                      "--labels", str(work / "labels"), "--sets", *sets, "--dev", *dev, "--epochs", str(epochs),
                      "--max-minutes", f"{minutes:.2f}", "--batch-size", "32", "--lr", str(args.student_lr),
                      "--fp16", "--no-progress", *(["--max-steps", str(args.max_steps)] if args.max_steps else []))
        processes[arm] = start(f"student-{arm}", command, log)
    wait_all(processes, log, deadline)
    arms = {}
    for arm in processes:
        path = work / "students" / arm / "ged.json"
        if path.exists():
            summary = json.loads(path.read_text())
            select = sum(s["tune"]["f05"] for s in summary["dev"].values()) / len(summary["dev"])
            arms[arm] = {"select": select, **{k: summary.get(k) for k in (
                "threshold", "dev", "steps", "planned_steps", "stopped_by", "minutes", "train_sentences",
                "first_loss", "last_loss", "last_loss_parts", "teacher_gap", "teacher")}}
            log(f"student {arm}: select {select:.4f} " + json.dumps(
                {k: round(v["report"]["f05"], 4) for k, v in summary["dev"].items()}))
    if not arms:
        (out / "students.json").write_text(json.dumps({"arms": arms}, indent=2))
        raise SystemExit("error: no student finished; see call2.log")
    best = max(arms, key=lambda a: arms[a]["select"])
    (out / "students.json").write_text(json.dumps({"best": best, "arms": arms}, indent=2))
    pack_student(work / "students" / best, out)
    log(f"best student: {best}; packed into {out}/student.tar.partNN")


def pack_student(model: Path, out: Path) -> list[Path]:
    """The student dir as a tar cut into parts of at most 15 MiB (``cat student.tar.part* | tar xf -`` here)."""
    tar_path = model.parent / "student.tar"
    with tarfile.open(tar_path, "w") as tar:
        tar.add(model, arcname="student")
    blob, parts = tar_path.read_bytes(), []
    for index, begin in enumerate(range(0, len(blob), PART_BYTES)):
        part = out / f"student.tar.part{index:02d}"
        part.write_bytes(blob[begin:begin + PART_BYTES])
        parts.append(part)
    return parts


def detect_profile() -> str:
    """h100 on an H100 (slower memory), h200 otherwise (nvidia-smi names the GPU; no torch import needed)."""
    try:
        names = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                               text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        names = ""
    return "h100" if "H100" in names else "h200"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("call", choices=["call1", "call2", "setup"])
    parser.add_argument("--profile", choices=["auto", *sorted(PROFILES)], default="auto",
                        help="auto: h100 when the GPU's name says H100, else h200")
    parser.add_argument("--halves", action="store_true",
                        help="call 1: also train two half teachers; each labels the learner half it did not see")
    parser.add_argument("--parts", default="/tmp/w", help="where the carried payload parts are")
    parser.add_argument("--root", default="/tmp", help="the payload is unpacked to ROOT/payload, the site to ROOT/site")
    parser.add_argument("--work", default="/tmp/distill", help="teachers, labels and students (survives while warm)")
    parser.add_argument("--no-install", dest="install", action="store_false",
                        help="use this Python's packages as they are (the CPU dry run)")
    parser.add_argument("--teacher-start", help="the teacher's start (default: the payload's MPNet)")
    parser.add_argument("--student-start", help="the student's start (default: the payload's ged-synthetic)")
    parser.add_argument("--student-lr", type=float, default=1e-4)
    parser.add_argument("--arms", nargs="+", default=list(STUDENT_ARMS), choices=list(STUDENT_ARMS))
    parser.add_argument("--epochs", type=int, default=0, help="the teacher's epochs (default: the profile's)")
    parser.add_argument("--max-steps", type=int, default=0, help="cap every training run (the dry run)")
    parser.add_argument("--window", type=float, default=0, help="call 1: seconds for the teachers (default: profile)")
    parser.add_argument("--limit", type=int, default=0, help="label only the first N sentences of each set")
    parser.add_argument("--shard-size", type=int, default=5000)
    parser.add_argument("--learner-sentences", type=int, default=0, help="the teachers' training sentences (steps)")
    parser.add_argument("--deadline", type=float, default=0,
                        help="seconds into the call when everything must have ended (default: the profile's)")
    parser.add_argument("--student-seconds", type=float, default=150,
                        help="call 2: seconds kept for the students when call 1's labels must be finished first")
    parser.add_argument("--eval-seconds", type=float, default=45, help="call 2: kept for the students' dev scoring")
    args = parser.parse_args()
    if args.profile == "auto":
        args.profile = detect_profile()
    if args.call == "setup":
        setup(args, Log(Path(os.environ.get("OUT", args.work)) / "setup.log"))
    else:
        {"call1": call1, "call2": call2}[args.call](args)


if __name__ == "__main__":
    main()
