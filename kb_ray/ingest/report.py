"""The report every ingest run ends with (printed, stored in ``ingest_runs``)."""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

import pyarrow as pa

from kb_ray.parsing.router import FALLBACK_MARKER


@dataclass
class IngestReport:
    run_id: str
    status: str = "running"
    documents: dict[str, int] = field(default_factory=lambda: dict.fromkeys(
        ("seen", "new", "changed", "unchanged", "failed", "deleted"), 0))
    chunks: dict[str, int] = field(default_factory=lambda: {"new": 0, "reused": 0})
    embeddings: dict[str, int] = field(default_factory=lambda: {"computed": 0, "cached": 0})
    page_images: dict[str, int] = field(default_factory=lambda: {"rendered": 0, "noted": 0})
    page_embeddings: dict[str, int] = field(default_factory=lambda: {"computed": 0, "cached": 0})
    captions: dict[str, int] = field(default_factory=lambda: dict.fromkeys(("computed", "cached", "failed", "skipped"), 0))
    fallbacks: int = 0  # parses where the first parser failed and a later one succeeded
    parses: int = 0
    pages: int = 0
    micro_batches: int = 0
    seconds: float = 0.0
    stage_seconds: dict[str, float] = field(default_factory=lambda: {"parse": 0.0, "document_total": 0.0})
    failures: list[dict[str, str]] = field(default_factory=list)

    def add_summary(self, summary: pa.Table) -> None:
        rows = summary.to_pylist()
        for action, count in Counter(row["action"] for row in rows).items():
            self.documents[action] = self.documents.get(action, 0) + count
        self.parses += sum(1 for row in rows if row.get("parsed"))
        self.pages += sum(int(row.get("n_pages") or 0) for row in rows if row.get("parsed"))
        self.stage_seconds["parse"] += sum(float(row.get("parse_seconds") or 0) for row in rows)
        self.stage_seconds["document_total"] += sum(float(row.get("total_seconds") or 0) for row in rows)
        self.page_images["noted"] += sum(1 for row in rows if row["action"] != "failed"
                                         and (row.get("error") or "").startswith("pages:"))
        self.failures += [{"uri": row["uri"], "error": row.get("error") or ""} for row in rows
                          if row["action"] == "failed"]
        self.fallbacks += sum(1 for row in rows if row["action"] != "failed" and FALLBACK_MARKER in (row.get("error") or ""))

    def add_counts(self, counts: dict[str, int]) -> None:
        self.chunks["new"] += counts.get("chunks_new", 0)
        self.chunks["reused"] += counts.get("chunks_reused", 0)
        self.embeddings["computed"] += counts.get("embeddings_computed", 0)
        self.embeddings["cached"] += counts.get("embeddings_cached", 0)
        self.page_images["rendered"] += counts.get("pages_rendered", 0)
        self.page_embeddings["computed"] += counts.get("page_embeddings_computed", 0)
        self.page_embeddings["cached"] += counts.get("page_embeddings_cached", 0)
        for key in self.captions:
            self.captions[key] += counts.get(f"captions_{key}", 0)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def render(self) -> str:
        d, c, e = self.documents, self.chunks, self.embeddings
        lines = [
            f"ingest run {self.run_id}: {self.status} in {self.seconds:.1f}s ({self.micro_batches} micro-batches)",
            f"  documents  seen {d['seen']}  new {d['new']}  changed {d['changed']}  unchanged {d['unchanged']}"
            f"  failed {d['failed']}  deleted {d['deleted']}",
            f"  parses     {self.parses} ({self.pages} pages, {self.stage_seconds['parse']:.1f}s parsing)",
            f"  chunks     new {c['new']}  reused {c['reused']}",
            f"  embeddings computed {e['computed']}  cached {e['cached']}",
        ]
        if any(self.page_images.values()) or any(self.page_embeddings.values()):
            p, pe = self.page_images, self.page_embeddings
            lines.append(f"  page images rendered {p['rendered']} (limits noted on {p['noted']} documents)"
                         f"  page embeddings computed {pe['computed']}  cached {pe['cached']}")
        if any(self.captions.values()):
            cap = self.captions
            lines.append(f"  captions   computed {cap['computed']}  cached {cap['cached']}  failed {cap['failed']}"
                         f"  too small {cap['skipped']}")
        if self.fallbacks:
            lines.append(f"  fallbacks  {self.fallbacks} documents parsed by a later parser of their chain")
        lines += [f"  FAILED {f['uri']}: {f['error']}" for f in self.failures[:20]]
        if len(self.failures) > 20:
            lines.append(f"  … and {len(self.failures) - 20} more (see: kb-ray sql --query failure_reasons)")
        return "\n".join(lines)
