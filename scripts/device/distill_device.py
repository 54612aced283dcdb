"""The edit-tag teacher on a lent GPU: the teacher, its labels and the students, in two device calls (docs/teacher.md).

    python3 scripts/device/distill_device.py call1 [--profile h200|h100]   # teachers, students beside, labels
    python3 scripts/device/distill_device.py call2 [--profile h200|h100]   # the distilled students, the best packed

Both start with ``setup``: the payload parts carried to ``/tmp/w`` (scripts/device/build_payload.py: the base parts
``pNN`` and the text parts ``tNN``) are joined and unpacked into ``/tmp/payload`` once, and this project's pins of
transformers/tokenizers/huggingface_hub/lemminflect and the checkout itself are installed into ``/tmp/site`` (put
first on PYTHONPATH). ``/tmp`` survives between calls while the machine is warm, so call 2 reads what call 1 left.

call 1, in the order that pays if the call is cut short:
1. the teacher arms side by side on the one GPU (``ged train --model <MPNet> --tags --bf16`` on the tagged learner
   data, edit_tag_data's FCE and W&I files): full-data arms at two learning rates and two half teachers (learner
   half 0 / half 1), each scored on the tuning and report halves of MultiGED FCE dev, FCE dev in BEA form and JFLEG
   dev (``teachers.json``, written as each arm is scored). Beside them, the students that need no teacher: the
   edit-tag recipe longer (``long``) and with synthetic errors (``synthetic``), from the shipped ``ged/``.
2. the labels: the best full teacher on the tuning halves labels the corpus sets, the half teachers the learner
   sentences they did not see (``distill label``: per word p(error) and, where p >= 0.2, the teacher's tag and its
   probability), in parallel processes until the deadline; then every finished set is packed under $OUT as
   ``labels.tar.partNN`` (at most 4 x 15 MiB), so they come back even if call 2 fails.

call 2: the students on the teacher's labels (``ged train --tags`` from ``ged/``: the learner data's gold tags, and
the corpus sets as the teacher tagged them: a word is an error where the teacher's p reaches its tuned threshold),
every student and the start scored on the halves (``students.json``); the best on the tuning halves is packed
(fp16, ``student.tar.partNN``, 15 MiB each).

What comes back (at most 8 files, 16 MiB each): call 1: call1.log, teachers.json, labels.json, labels.tar.part00..03;
call 2: call2.log, students.json, student.tar.part00..03.
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
sys.path.insert(0, str(REPO))  # benchmarks.quality.ged_tags: the report sets' reader and the detection figures
# The whole session has 15 minutes of device time, the machine's start and the part uploads included. Each arm's
# steps are capped so that its learning-rate schedule ends inside the training window at the assumed aggregate rate
# (MPNet sentences/s of all arms together; one MPNet run alone ~1,200/s on an H200, several share the GPU well; a
# MiniLM student costs about a quarter of a teacher's step; measured 2026-11-28 on an H200: four MPNet arms beside two
# students, 458 sentences/s each). ``--max-minutes`` stops a slower GPU inside the window, counted from after the
# model's loading (~25 s); the wait leaves each run LOAD_SAVE seconds for that and for saving and dev scoring.
PROFILES = {
    "h200": {"teachers": {"full-lr3e-05": (3e-5, None), "full-lr5e-05": (5e-5, None), "half0-lr5e-05": (5e-5, 0),
                          "half1-lr5e-05": (5e-5, 1)},
             "epochs": 3, "rate": 1900, "window": 230, "call1_deadline": 420, "call2_deadline": 270,
             "limits": {}, "label_procs": {"learner": 3, "corrupted": 5, "clean": 2},
             "students": {"long": 3, "synthetic": 3}},
    # H100: slower memory, about 1.5-2x the H200's time: one full arm, fewer corpus sentences labelled
    "h100": {"teachers": {"full-lr5e-05": (5e-5, None), "half0-lr5e-05": (5e-5, 0), "half1-lr5e-05": (5e-5, 1)},
             "epochs": 3, "rate": 1100, "window": 230, "call1_deadline": 420, "call2_deadline": 270,
             "limits": {"corrupted": 120_000, "clean": 30_000},
             "label_procs": {"learner": 2, "corrupted": 4, "clean": 1}, "students": {"long": 2}},
}
LEARNER_SENTENCES = 62_665  # edit_tag_data's FCE train (28,357) + W&I+LOCNESS train A/B/C (34,308)
TAGGED = ("fce_train.jsonl", "wi_train.jsonl")
SETS = ("learner", "corrupted", "clean")
DISTILLED = {"teacher-corpus": ("corrupted", "clean"), "teacher-corrupted": ("corrupted",)}  # call 2's arms
TUNING = ("MultiGED FCE dev", "JFLEG dev")  # the sets whose tuning halves choose thresholds and arms
PART_BYTES = 15 << 20  # a returned file is at most 16 MiB
LOAD_SAVE = 60  # seconds a training run spends outside --max-minutes: loading, saving, scoring --dev (MPNet: ~45)
RECIPE = ["--tags", "--head-lr-scale", "10", "--tag-weight", "0.2"]  # docs/edit_tags.md


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


def report_sets(payload: Path) -> dict:
    """{set: {"tune": [...], "report": [...]}}: the report sets as ``ged_tags --write-sets`` wrote them here."""
    from benchmarks.quality.ged_tags import read_sets

    return read_sets(payload / "sets")


def scored_figures(model: Path, sets: dict) -> dict:
    """A model's figures on the halves (``ged_tags.detection``: the threshold shared by the tuning halves of MultiGED
    FCE dev and JFLEG dev, each set's own, the report halves at both) and ``select``: the tuning halves' mean F0.5
    at the shared threshold, which chooses between arms."""
    from benchmarks.quality.ged_tags import detection
    from electra_detect.detector import Detector

    found = detection(Detector.load(model, engine="torch", calibrated=False, task="ged"), sets)
    return {**found, "select": found["tune_at_shared"]}


def trained_figures(model: Path, sets: dict) -> dict:
    """:func:`scored_figures` with what the run's ``ged.json`` says of its training."""
    trained = json.loads((model / "ged.json").read_text())
    return {**scored_figures(model, sets), **{k: trained.get(k) for k in (
        "minutes", "steps", "stopped", "first_loss", "last_loss", "train_sentences")}}


def summary_line(name: str, found: dict) -> str:
    return f"{name}: select {found['select']:.4f}, threshold {found['threshold']:.2f}, report halves " + json.dumps(
        {n: round(found[n]["at_shared"]["f05"], 4) for n in found if isinstance(found[n], dict)})


def train_command(start: str, out: Path, data: list[str], dev: Path, epochs: int, lr: float, steps: int,
                  minutes: float, vocabulary: Path, seed: int = 0) -> list[str]:
    """``ged train`` with the edit-tag recipe and ``vocabulary``'s tags (every teacher and student shares the
    shipped ``ged/``'s channels): bf16 on the GPU, batches of 32, capped in steps and minutes."""
    return cli("ged", "train", "--model", start, "--out", str(out), *RECIPE, "--tags-from", str(vocabulary),
               "--bf16", "--data", *data,
               "--dev", f"{dev}:tsv", "--epochs", str(epochs), "--lr", str(lr), "--seed", str(seed),
               "--batch-size", "32", "--no-progress", "--max-steps", str(max(1, steps)),
               "--max-minutes", f"{minutes:.2f}")


def labelled(folder: Path) -> bool:
    """Every shard of a set's labels is there (``distill label``'s labels.json and shard files)."""
    manifest = folder / "labels.json"
    if not manifest.exists():
        return False
    info = json.loads(manifest.read_text())
    return all((folder / f"shard-{i:05d}.npz").exists() for i in range(-(-info["sentences"] // info["shard_size"])))


def label_jobs(payload: Path, labels: Path, teacher: str, halves: list[str], profile: dict,
               args: argparse.Namespace) -> dict[str, list[str]]:
    """One ``distill label`` process per (set, part): the sets in parallel, each cut into parts by shard; the learner
    set by the half teachers (each the half it did not see), the corpus sets by the chosen teacher; none for a set
    labelled whole already."""
    manifest = json.loads((payload / "text" / "manifest.json").read_text())
    jobs = {}
    for name in SETS:
        if name not in manifest["sets"] or labelled(labels / name):
            continue
        limit = args.limit or profile["limits"].get(name, 0)
        procs = profile["label_procs"][name]
        who = ["--half-teachers", *halves] if halves and name == "learner" else ["--teacher", teacher]
        for part in range(procs):
            jobs[f"label-{name}-{part}"] = cli("distill", "label", str(payload / "text" / f"{name}.jsonl.gz"),
                                               "--out", str(labels / name), *who, "--part", f"{part}/{procs}",
                                               "--batch-size", "128", "--shard-size", str(args.shard_size),
                                               *(["--limit", str(limit)] if limit else []))
    return jobs


def label(payload: Path, work: Path, teacher: str, halves: list[str], profile: dict, args: argparse.Namespace,
          log: Log, deadline: float) -> dict:
    """Label every set (resuming what is there) until the deadline; returns each set's shards done."""
    jobs = label_jobs(payload, work / "labels", teacher, halves, profile, args)
    wait_all({name: start(name, command, log) for name, command in jobs.items()}, log, deadline)
    status = {}
    for name in SETS:
        manifest = work / "labels" / name / "labels.json"
        if manifest.exists():
            info = json.loads(manifest.read_text())
            status[name] = {"sentences": info["sentences"], "shards": -(-info["sentences"] // info["shard_size"]),
                            "done_shards": len(list((work / "labels" / name).glob("shard-*.npz"))),
                            "teacher_threshold": info["teacher_threshold"], "tags": len(info.get("tags") or [])}
    log("labels: " + json.dumps({k: f"{v['done_shards']}/{v['shards']}" for k, v in status.items()}))
    return status


def pack_parts(folder: Path, out: Path, stem: str, most: int = 4) -> list[Path]:
    """``folder`` as a tar cut into ``out/{stem}.tar.partNN`` (:func:`pack_parts_file`)."""
    tar_path = folder.parent / f"{stem}.tar"
    with tarfile.open(tar_path, "w") as tar:
        tar.add(folder, arcname=folder.name)
    return pack_parts_file(tar_path, out, stem, most)


# -- call 1: teachers (students beside them) and labels ---------------------------------------------------------
def call1(args: argparse.Namespace) -> None:
    out = Path(os.environ.get("OUT", args.work))
    log = Log(out / "call1.log")
    profile = dict(PROFILES[args.profile])
    window = args.window or profile["window"]
    deadline = args.deadline or profile["call1_deadline"]
    log(f"profile {args.profile}, window {window:.0f} s, deadline {deadline:.0f} s")
    payload = setup(args, log)
    work, tags = Path(args.work), payload / "tags"
    dev, vocabulary = tags / "fce_dev_tune.tsv", payload / "student-start"
    learner = [f"{tags / name}:tagged" for name in TAGGED]
    sentences = args.learner_sentences or LEARNER_SENTENCES
    teachers = profile["teachers"]
    students = {name: epochs for name, epochs in profile["students"].items() if name in args.students}
    per_arm = profile["rate"] / (len(teachers) + len(students) / 4) * window  # sentences an arm sees in the window
    minutes = max(0.5, (window - LOAD_SAVE / 2) / 60)
    processes = {}
    for name, (lr, half) in teachers.items():
        target = work / "teachers" / name
        if (target / "ged.json").exists():
            log(f"{name}: already trained")
            continue
        data = learner if half is None else [f"{payload / 'text' / 'learner' / f'half{half}.jsonl'}:tagged"]
        seen = sentences / 2 if half is not None else sentences
        steps = int(min(profile["epochs"] * seen, per_arm) // 32)
        steps = min(steps, args.max_steps) if args.max_steps else steps
        processes[name] = start(name, train_command(args.teacher_start or str(payload / "mpnet"), target, data, dev,
                                                    profile["epochs"], lr, steps, minutes, vocabulary), log)
    for name, epochs in students.items():  # the students that need no teacher share the window
        target = work / "students" / name
        if (target / "ged.json").exists():
            continue
        data = learner + ([f"{tags / 'synthetic_16k.jsonl'}:tagged"] if name == "synthetic" else [])
        seen = sentences + (16_000 if name == "synthetic" else 0)
        steps = int(epochs * seen // 32)
        steps = min(steps, args.max_steps) if args.max_steps else steps
        processes[f"student-{name}"] = start(f"student-{name}", train_command(
            args.student_start or str(payload / "student-start"), target, data, dev, epochs, args.student_lr,
            steps, minutes, vocabulary), log)
    wait_all(processes, log, window + LOAD_SAVE + elapsed(log))  # a run stopped by its minutes still saves
    sets = report_sets(payload)
    report = {"profile": args.profile, "epochs": profile["epochs"], "start": args.teacher_start or "all-mpnet-base-v2",
              "recipe": RECIPE, "arms": {}}
    for name in teachers:
        if (work / "teachers" / name / "ged.json").exists():
            report["arms"][name] = trained_figures(work / "teachers" / name, sets)
            log(summary_line(name, report["arms"][name]))
            (out / "teachers.json").write_text(json.dumps(report, indent=2))
    full = {n: a for n, a in report["arms"].items() if n.startswith("full")}
    if not full:
        (out / "teachers.json").write_text(json.dumps(report, indent=2))
        raise SystemExit("error: no full-data teacher finished; see call1.log")
    best = max(full, key=lambda n: full[n]["select"])
    halves = [str(work / "teachers" / n) for n in teachers if n.startswith("half")]
    halves = halves if all((Path(h) / "ged.json").exists() for h in halves) and len(halves) == 2 else []
    teacher = str(work / "teachers" / best)
    report.update(best=best, teacher=teacher, half_teachers=halves, threshold=full[best]["threshold"])
    (out / "teachers.json").write_text(json.dumps(report, indent=2))
    (work / "teacher.json").write_text(json.dumps({"teacher": teacher, "half_teachers": halves,
                                                   "threshold": full[best]["threshold"]}))
    log(f"best teacher: {best}; learner labels by {'the half teachers' if halves else best}")
    status = label(payload, work, teacher, halves, profile, args, log, deadline - args.pack_seconds)
    (out / "labels.json").write_text(json.dumps(status, indent=2))
    whole = [n for n in ("learner", "clean", "corrupted") if n in status
             and status[n]["done_shards"] == status[n]["shards"]]  # in this order while 4 parts hold them
    room, packed = 4 * PART_BYTES - (1 << 20), []
    for name in whole:
        size = sum(f.stat().st_size for f in (work / "labels" / name).iterdir()) + 4096
        if size <= room:
            room -= size
            packed.append(name)
    if packed:
        tar_path = work / "labels.tar"
        with tarfile.open(tar_path, "w") as tar:
            for name in packed:
                tar.add(work / "labels" / name, arcname=f"labels/{name}")
            tar.add(out / "teachers.json", arcname="labels/teachers.json")
        parts = pack_parts_file(tar_path, out, "labels")
        left = sorted(set(whole) - set(packed))
        log(f"labels of {', '.join(packed)} packed into {len(parts)} parts under $OUT"
            + (f"; left on the device (too big): {left}" if left else ""))


def pack_parts_file(tar_path: Path, out: Path, stem: str, most: int = 4) -> list[Path]:
    """An existing tar cut into ``out/{stem}.tar.partNN`` of at most 15 MiB; an error beyond ``most`` parts."""
    blob = tar_path.read_bytes()
    if len(blob) > most * PART_BYTES:
        raise SystemExit(f"error: {tar_path} is {len(blob) / 2**20:.1f} MiB, more than {most} parts of 15 MiB")
    parts = []
    for index, begin in enumerate(range(0, len(blob), PART_BYTES)):
        part = out / f"{stem}.tar.part{index:02d}"
        part.write_bytes(blob[begin:begin + PART_BYTES])
        parts.append(part)
    return parts


# -- call 2: students on the teacher's labels -------------------------------------------------------------------
def call2(args: argparse.Namespace) -> None:
    out = Path(os.environ.get("OUT", args.work))
    log = Log(out / "call2.log")
    profile = PROFILES[args.profile]
    deadline = args.deadline or profile["call2_deadline"]
    payload = setup(args, log)
    work, tags = Path(args.work), payload / "tags"
    chosen = json.loads((work / "teacher.json").read_text())
    status = label(payload, work, chosen["teacher"], chosen["half_teachers"], profile, args, log,
                   deadline - args.student_seconds)  # labels call 1 left unfinished resume first
    from electra_detect.training.finetune.distill_labels import teacher_tagged
    from electra_detect.training.finetune.edit_tag_data import write_tagged

    corpus = {}
    for name in ("corrupted", "clean"):
        if name in status and status[name]["done_shards"] == status[name]["shards"]:
            corpus[name] = work / "tagged" / f"{name}.jsonl"
            write_tagged(corpus[name], teacher_tagged(payload / "text" / f"{name}.jsonl.gz", work / "labels" / name,
                                                      chosen["threshold"]))
    log(f"the teacher's tagged corpus sets: {sorted(corpus)}")
    learner = [f"{tags / name}:tagged" for name in TAGGED]
    minutes = max(0.5, (deadline - elapsed(log) - args.eval_seconds - LOAD_SAVE) / 60)
    processes = {}
    for arm, sets in DISTILLED.items():
        if not all(s in corpus for s in sets):
            continue
        sentences = LEARNER_SENTENCES + sum(sum(1 for _ in corpus[s].open()) for s in sets)
        steps = int(sentences // 32)  # one epoch
        steps = min(steps, args.max_steps) if args.max_steps else steps
        processes[arm] = start(f"student-{arm}", train_command(
            args.student_start or str(payload / "student-start"), work / "students" / arm,
            learner + [f"{corpus[s]}:tagged" for s in sets], tags / "fce_dev_tune.tsv", 1, args.student_lr, steps,
            minutes, payload / "student-start"), log)
    wait_all(processes, log, deadline - args.eval_seconds)
    sets = report_sets(payload)
    arms = {"start": {**scored_figures(payload / "student-start", sets), "path": "student-start (the shipped ged/)"}}
    log(summary_line("start", arms["start"]))
    for folder in sorted((work / "students").glob("*")):
        if (folder / "ged.json").exists():
            arms[folder.name] = trained_figures(folder, sets)
            log(summary_line(folder.name, arms[folder.name]))
            (out / "students.json").write_text(json.dumps({"arms": arms}, indent=2))
    trained = [a for a in arms if a != "start"]
    if not trained:
        (out / "students.json").write_text(json.dumps({"arms": arms}, indent=2))
        raise SystemExit("error: no student finished; see call2.log")
    best = max(trained, key=lambda a: arms[a]["select"])
    (out / "students.json").write_text(json.dumps({"best": best, "teacher": chosen, "arms": arms}, indent=2))
    pack_student(work / "students" / best, out)
    log(f"best student: {best}; packed into {out}/student.tar.partNN")


def pack_student(model: Path, out: Path) -> list[Path]:
    """The student dir, its weights cast to float16, as ``student.tar.partNN`` of at most 15 MiB."""
    import shutil

    from safetensors.torch import load_file, save_file

    folder = model.parent / "packed" / "student"
    if folder.exists():
        shutil.rmtree(folder)
    shutil.copytree(model, folder)
    tensors = load_file(str(folder / "model.safetensors"))
    save_file({k: (v.half() if v.is_floating_point() else v) for k, v in tensors.items()},
              str(folder / "model.safetensors"), metadata={"format": "pt"})
    return pack_parts(folder, out, "student")


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
    parser.add_argument("--parts", default="/tmp/w", help="where the carried payload parts are")
    parser.add_argument("--root", default="/tmp", help="the payload is unpacked to ROOT/payload, the site to ROOT/site")
    parser.add_argument("--work", default="/tmp/distill", help="teachers, labels and students (survives while warm)")
    parser.add_argument("--no-install", dest="install", action="store_false",
                        help="use this Python's packages as they are (the CPU dry run)")
    parser.add_argument("--teacher-start", help="the teacher's start (default: the payload's MPNet)")
    parser.add_argument("--student-start", help="the students' start (default: the payload's ged/)")
    parser.add_argument("--student-lr", type=float, default=5e-5)
    parser.add_argument("--students", nargs="*", default=["long", "synthetic"],
                        help="call 1: the students trained beside the teachers")
    parser.add_argument("--max-steps", type=int, default=0, help="cap every training run (the dry run)")
    parser.add_argument("--window", type=float, default=0, help="call 1: seconds for the teachers (default: profile)")
    parser.add_argument("--limit", type=int, default=0, help="label only the first N sentences of each set")
    parser.add_argument("--shard-size", type=int, default=5000)
    parser.add_argument("--learner-sentences", type=int, default=0, help="the teachers' training sentences (steps)")
    parser.add_argument("--deadline", type=float, default=0,
                        help="seconds into the call when everything must have ended (default: the profile's)")
    parser.add_argument("--pack-seconds", type=float, default=20, help="call 1: kept for packing the labels")
    parser.add_argument("--student-seconds", type=float, default=150,
                        help="call 2: seconds kept for the students when call 1's labels must be finished first")
    parser.add_argument("--eval-seconds", type=float, default=50, help="call 2: kept for scoring and packing")
    args = parser.parse_args()
    if args.profile == "auto":
        args.profile = detect_profile()
    if args.call == "setup":
        setup(args, Log(Path(os.environ.get("OUT", args.work)) / "setup.log"))
    else:
        {"call1": call1, "call2": call2}[args.call](args)


if __name__ == "__main__":
    main()
