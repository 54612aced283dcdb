"""Everything ONNX, a module a job, read in this order.

- ``export``: the discriminator as ONNX variants (fp32, optimized, fp16, int8), written atomically.
- ``parity``: the gate each variant passes against the PyTorch logits before it is kept.
- ``manifest``: what an export dir holds (``export.json``, variant files, tokenizer, calibration).
- ``cache``: where first-use exports live and the key they are filed under.
- ``locate``: the export a model runs on: shipped beside it, cached, or exported once now.
- ``engine``: the onnxruntime session over one variant (CUDA first, loud CPU fallback).
- ``triton``: a Triton Inference Server model repository from an export.
"""

import os as _os

# onnxruntime (1.32) writes a telemetry session file (.ses) into the temp dir and a device id under ~/.cache/Microsoft
# when it is imported, unless this is set first; every import of it here goes through this package.
_os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")
