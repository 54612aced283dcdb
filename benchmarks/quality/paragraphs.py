"""Paragraphs against their sentences: on fluent text a paragraph should get no more flags than its sentences
scored one by one, through every front a user meets (the CLI, ``/v1/ged``, LanguageTool's ``/v2/check``).

    python -m benchmarks.quality.paragraphs --model models/electra-minilm

Takes ``--sentences`` fluent corrected sentences (JFLEG dev's first correction, ``dev.ref0``: human rewrites of
learner sentences), gives them once one per line and once as paragraphs of ``--per-paragraph``, and counts the
flagged words (matches, for ``/v2/check``) each way, and how many of the paragraph flags sit on a sentence-final
full stop. The CLI runs as a user runs it (``electra-detect ged --file``, its default engine); the server is the
real app in process (FastAPI's TestClient) on the same model. Writes ``result.json`` and ``table.md``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.common.run import command_line
from electra_detect.fileio import atomic_write_json, atomic_write_text

GOAL = 1.10  # a paragraph's flags at most 10% above its sentences'


def final_stops(text: str, flags: list[tuple[int, int]]) -> int:
    """Flags on a full stop that ends a sentence of the paragraph (the end of the text or before a space)."""
    return sum(1 for start, end in flags if text[start:end] == "." and (end == len(text) or text[end:end + 1] == " "))


def cli_flags(model: str, texts: list[str]) -> list[list[tuple[int, int]]]:
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as handle:
        handle.write("\n".join(texts) + "\n")
    command = [sys.executable, "-m", "electra_detect.cli", "ged", "--output-format", "json", "--model", model,
               "--file", handle.name]
    lines = subprocess.run(command, check=True, capture_output=True, text=True).stdout.splitlines()
    Path(handle.name).unlink()
    return [[(w["start"], w["end"]) for w in json.loads(line)["flagged"]] for line in lines]


def server_flags(model: str, texts: list[str]) -> dict[str, list[list[tuple[int, int]]]]:
    from fastapi.testclient import TestClient

    from electra_detect.app.http.server import create_app
    from electra_detect.app.settings import ServerSettings
    from electra_detect.detector import Detector

    detector = Detector.load(model, task="ged")
    out: dict[str, list[list[tuple[int, int]]]] = {"/v1/ged": [], "/v2/check": []}
    with TestClient(create_app(detector, ServerSettings(suggest=False))) as client:
        for text in texts:
            ged = client.post("/v1/ged", json={"texts": [text]}).json()
            out["/v1/ged"].append([(w["start"], w["end"]) for w in ged["results"][0]["flagged"]])
            check = client.post("/v2/check", data={"text": text, "language": "en-US"}).json()
            out["/v2/check"].append([(m["offset"], m["offset"] + m["length"]) for m in check["matches"]])
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="models/electra-minilm")
    parser.add_argument("--refs", default="../shared/data/jfleg/dev/dev.ref0")
    parser.add_argument("--sentences", type=int, default=300)
    parser.add_argument("--per-paragraph", type=int, default=5)
    parser.add_argument("--out-dir", default=str(Path(__file__).resolve().parents[1] / "results" / "paragraphs"))
    args = parser.parse_args()
    sentences = [line.strip() for line in Path(args.refs).read_text().splitlines() if line.strip()][:args.sentences]
    size = args.per_paragraph
    paragraphs = [" ".join(sentences[i:i + size]) for i in range(0, len(sentences), size)]
    fronts: dict[str, dict[str, Any]] = {}
    by_sentence, by_paragraph = {"CLI": cli_flags(args.model, sentences)}, {"CLI": cli_flags(args.model, paragraphs)}
    by_sentence.update(server_flags(args.model, sentences))
    by_paragraph.update(server_flags(args.model, paragraphs))
    for front in by_sentence:
        alone = sum(len(f) for f in by_sentence[front])
        joined = sum(len(f) for f in by_paragraph[front])
        fronts[front] = {"sentence_flags": alone, "paragraph_flags": joined, "ratio": joined / max(alone, 1),
                         "paragraph_flags_on_final_stops": sum(final_stops(t, f) for t, f in
                                                               zip(paragraphs, by_paragraph[front], strict=True)),
                         "met": joined <= GOAL * alone}
        print(json.dumps({"front": front, **fronts[front]}), file=sys.stderr)
    summary = {"benchmark": "paragraphs", "model": args.model, "sentences": len(sentences),
               "paragraphs": len(paragraphs), "per_paragraph": size, "source": args.refs, "goal_ratio": GOAL,
               "fronts": fronts, "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
               "command": command_line()}
    out = Path(args.out_dir)
    atomic_write_json(out / "result.json", summary)
    lines = ["# Paragraphs against their sentences (fluent text)", "",
             f"Command: `{summary['command']}` ({summary['date']}). {len(sentences)} fluent sentences "
             f"(`{args.refs}`), one per text and as {len(paragraphs)} paragraphs of {size}; the model's shipped "
             "threshold. Goal: a paragraph's flags ≤ 1.10 × its sentences'.", "",
             "| front | flags, sentence by sentence | flags, as paragraphs | ratio | on sentence-final stops | goal |",
             "|---|---:|---:|---:|---:|---|"]
    lines += [f"| {front} | {row['sentence_flags']} | {row['paragraph_flags']} | {row['ratio']:.2f} | "
              f"{row['paragraph_flags_on_final_stops']} | {'met' if row['met'] else 'missed'} |"
              for front, row in fronts.items()]
    atomic_write_text(out / "table.md", "\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
