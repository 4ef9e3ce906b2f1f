"""kb-ray: distributed batch indexing of documents into a provenance-preserving knowledge base."""

import os

__version__ = "0.1.0"

# onnxruntime >= 1.29 (the embedder and OCR runtime) sends telemetry on Linux and keeps a device id
# and an event cache under ~/.cache/Microsoft/DeveloperTools: the one write outside kb_root that the
# hostile-batch filesystem check found. Opted out before onnxruntime is first imported (both spellings
# of the variable, onnxruntime PRs 27379 and 29843); set it to 0 to opt back in.
for _name in ("ORT_DISABLE_TELEMETRY", "ORT_TELEMETRY_DISABLED"):
    os.environ.setdefault(_name, "1")

# Hugging Face libraries draw a progress bar for every model load ("Loading weights 0/103"); a
# person reading an ingest, reembed or demo sees kb-ray's own report and progress instead.
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
