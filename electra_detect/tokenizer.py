"""The inference tokenizer without transformers: the exact backend HF builds, through ``tokenizers`` (Rust).

Why: importing transformers pulls in torch (seconds of start-up, and a deployment without PyTorch is the point
of the ONNX engine). An export carries the backend as ``backend_tokenizer.json`` (``electra_detect.onnx.export``);
``LightTokenizer`` puts the slice of the HF tokenizer API that ``Detector`` uses in front of it. Anything else
is delegated to the HF tokenizer, loaded on first use, so callers that need more of the API still get it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


class LightTokenizer:
    """``tokenizer(texts, add_special_tokens=False)`` and the special-token ids, as the HF fast tokenizer."""

    is_fast = True

    def __init__(self, export_dir: Path, spec: dict[str, Any]) -> None:
        from tokenizers import Tokenizer

        self._dir = Path(export_dir)
        self.backend_tokenizer = Tokenizer.from_file(str(self._dir / spec["file"]))
        self.backend_tokenizer.no_truncation()  # long texts are windowed by the Detector, never cut
        self.backend_tokenizer.no_padding()
        self.cls_token_id = int(spec["cls_token_id"])
        self.sep_token_id = int(spec["sep_token_id"])
        self.pad_token_id = int(spec["pad_token_id"])
        self.model_max_length = 1 << 30
        self._hf: Any = None

    def _full(self) -> Any:
        if self._hf is None:
            from transformers import AutoTokenizer

            self._hf = AutoTokenizer.from_pretrained(str(self._dir))
            self._hf.model_max_length = self.model_max_length
        return self._hf

    def __call__(self, texts: Any, add_special_tokens: bool = True, return_offsets_mapping: bool = False,
                 **kwargs: Any) -> Any:
        if kwargs or isinstance(texts, str):
            return self._full()(texts, add_special_tokens=add_special_tokens,
                                return_offsets_mapping=return_offsets_mapping, **kwargs)
        return Encodings(self.backend_tokenizer.encode_batch(list(texts), add_special_tokens=add_special_tokens))

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._full(), name)


class Encodings:
    """``batch["input_ids"]`` and ``batch[i]`` (a tokenizers.Encoding), as HF's BatchEncoding gives them."""

    def __init__(self, encodings: list[Any]) -> None:
        self.encodings = encodings

    def __len__(self) -> int:
        return len(self.encodings)

    def __getitem__(self, key: int | str) -> Any:
        if isinstance(key, int):
            return self.encodings[key]
        if key == "input_ids":
            return [e.ids for e in self.encodings]
        if key == "offset_mapping":
            return [e.offsets for e in self.encodings]
        if key == "attention_mask":
            return [e.attention_mask for e in self.encodings]
        raise KeyError(key)


def load_tokenizer(export_dir: Path, spec: dict[str, Any] | None) -> Any:
    """The light tokenizer when the export carries its backend (``spec``: the manifest's ``tokenizer``), else
    the HF tokenizer (an export made before the backend travelled with it)."""
    if spec and (Path(export_dir) / spec["file"]).exists():
        return LightTokenizer(export_dir, spec)
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(export_dir))
