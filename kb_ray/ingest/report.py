"""The report every ingest run ends with (printed, stored in ``ingest_runs``).

Document outcomes come from the per-document summaries the committer logs (status,
reason code, ``fallback_from``); the work each stage did (pages rendered, page
embeddings, captions, busy seconds, rows) from the :class:`StageStats` the stages
reported beside their data; chunk and embedding counts from each micro-batch's commit.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

import pyarrow as pa

from kb_ray.ingest.stages.base import StageStats


@dataclass
class IngestReport:
    run_id: str
    status: str = "running"
    documents: dict[str, int] = field(default_factory=lambda: dict.fromkeys(
        ("seen", "new", "changed", "unchanged", "failed", "deleted", "metadata_updated"), 0))
    chunks: dict[str, int] = field(default_factory=lambda: {"new": 0, "reused": 0})
    embeddings: dict[str, int] = field(default_factory=lambda: {"computed": 0, "cached": 0})
    page_images: dict[str, int] = field(default_factory=lambda: {"rendered": 0, "noted": 0})
    page_embeddings: dict[str, int] = field(default_factory=lambda: {"computed": 0, "cached": 0})
    captions: dict[str, int] = field(default_factory=lambda: dict.fromkeys(("computed", "cached", "failed", "skipped"), 0))
    fallbacks: int = 0  # parses where the first parser failed and a later one succeeded
    failure_reasons: dict[str, int] = field(default_factory=dict)  # reason code -> documents
    parses: int = 0
    pages: int = 0
    micro_batches: int = 0  # the pipeline's output rows
    commits: int = 0  # the driver's commits of them (group commit: several micro-batches in one)
    seconds: float = 0.0
    stage_seconds: dict[str, float] = field(default_factory=lambda: {"parse": 0.0, "document_total": 0.0})
    stages: dict[str, dict[str, Any]] = field(default_factory=dict)  # stage -> rows in/out, busy seconds, counts
    driver: dict[str, float] = field(default_factory=lambda: {"wait_seconds": 0.0, "commit_seconds": 0.0})
    failures: list[dict[str, str]] = field(default_factory=list)
    index_refresh: dict[str, Any] | None = None  # index.auto_refresh: kb_ray.index.refresh.RefreshResult
    model_switch: dict[str, Any] | None = None  # embedding.allow_model_switch: kb_ray.ingest.reembed.ReembedReport

    def add_summary(self, summary: pa.Table) -> None:
        rows = summary.to_pylist()
        for action, count in Counter(row["action"] for row in rows).items():
            self.documents[action] = self.documents.get(action, 0) + count
        self.parses += sum(1 for row in rows if row.get("parsed"))
        self.pages += sum(int(row.get("n_pages") or 0) for row in rows if row.get("parsed"))
        self.stage_seconds["parse"] += sum(float(row.get("parse_seconds") or 0) for row in rows)
        self.stage_seconds["document_total"] += sum(float(row.get("total_seconds") or 0) for row in rows)
        failed = [row for row in rows if row["action"] == "failed"]
        for reason, count in Counter(row.get("reason") or "unknown" for row in failed).items():
            self.failure_reasons[reason] = self.failure_reasons.get(reason, 0) + count
        self.failures += [{"uri": row["uri"], "reason": row.get("reason") or "unknown",
                           "detail": row.get("detail") or ""} for row in failed]
        self.fallbacks += sum(1 for row in rows if row["action"] != "failed" and row.get("fallback_from"))

    def add_counts(self, counts: dict[str, int]) -> None:
        """One micro-batch's commit: chunks new/reused, embeddings computed/cached."""
        self.chunks["new"] += counts.get("chunks_new", 0)
        self.chunks["reused"] += counts.get("chunks_reused", 0)
        self.embeddings["computed"] += counts.get("embeddings_computed", 0)
        self.embeddings["cached"] += counts.get("embeddings_cached", 0)

    def add_stage_stats(self, totals: dict[str, StageStats]) -> None:
        """The run's totals per stage, as the stages reported them."""
        self.stages = {name: {"rows_in": s.rows_in, "rows_out": s.rows_out, "seconds": s.seconds, "calls": s.calls,
                              "counts": dict(s.counts)} for name, s in totals.items()}
        counts = {name: s.counts for name, s in totals.items()}
        render, page_embed, caption = counts.get("render", {}), counts.get("page_embed", {}), counts.get("caption", {})
        self.page_images = {"rendered": render.get("pages_rendered", 0), "noted": render.get("documents_limited", 0)}
        self.page_embeddings = {key: page_embed.get(f"page_embeddings_{key}", 0) for key in ("computed", "cached")}
        self.captions = {key: caption.get(f"captions_{key}", 0) for key in self.captions}

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def render(self) -> str:
        d, c, e = self.documents, self.chunks, self.embeddings
        lines = [
            f"ingest run {self.run_id}: {self.status} in {self.seconds:.1f}s ({self.micro_batches} micro-batches in "
            f"{self.commits} commits)",
            f"  documents  seen {d['seen']}  new {d['new']}  changed {d['changed']}  unchanged {d['unchanged']}"
            f" (metadata updated {d['metadata_updated']})  failed {d['failed']}  deleted {d['deleted']}",
            f"  parses     {self.parses} ({self.pages} pages, {self.stage_seconds['parse']:.1f}s parsing)",
            f"  chunks     new {c['new']}  reused {c['reused']}",
            f"  embeddings computed {e['computed']}  cached {e['cached']}",
        ]
        lines += self._optional_lines() + self._stage_lines()
        lines += [f"  FAILED {f['uri']}: {f['reason']}: {f['detail']}" for f in self.failures[:20]]
        if len(self.failures) > 20:
            lines.append(f"  … and {len(self.failures) - 20} more (see: kb-ray sql --query failure_reasons)")
        return "\n".join(lines)

    def _optional_lines(self) -> list[str]:
        lines = []
        if self.index_refresh:
            r = self.index_refresh
            lines.append(f"  index      {r['action']} (generation {r['generation']}, segment {r['segment']}, "
                         f"{r['rows']} chunks)" + (f": {r['detail']}" if r["detail"] else ""))
        if self.model_switch:
            m = self.model_switch
            lines.append(f"  switch     {m['embedded']} unchanged chunk texts embedded by {m['model_id']}; generation "
                         f"{m['generation']} built beside the live {m['live_generation']} (kb-ray index switch)")
        if any(self.page_images.values()) or any(self.page_embeddings.values()):
            p, pe = self.page_images, self.page_embeddings
            lines.append(f"  page images rendered {p['rendered']} (limits noted on {p['noted']} documents)"
                         f"  page embeddings computed {pe['computed']}  cached {pe['cached']}")
        if any(self.captions.values()):
            cap = self.captions
            lines.append(f"  captions   computed {cap['computed']}  cached {cap['cached']}  failed {cap['failed']}"
                         f"  too small {cap['skipped']}")
        remote = self.stages.get("embed_write", {}).get("counts", {}) if self.stages else {}
        if remote.get("embed_tokens"):  # index.vector_layout: what the text embedder read
            ratio = remote["embed_tokens"] / remote["text_tokens"] if remote.get("text_tokens") else 0.0
            lines.append(f"  embedded   {remote.get('embed_texts', 0)} texts, {remote.get('late_chunks', 0)} chunks "
                         f"pooled late ({remote.get('late_vectors', 0)} vectors): {remote['embed_tokens']} tokens "
                         f"for {remote.get('text_tokens', 0)} tokens of chunk text ({ratio:.2f}x)")
        if remote.get("embed_requests"):
            lines.append(f"  remote embedding requests {remote['embed_requests']}  retries {remote.get('embed_retries', 0)}"
                         f"  prompt tokens {remote.get('embed_prompt_tokens', 0)}")
        if self.fallbacks:
            lines.append(f"  fallbacks  {self.fallbacks} documents parsed by a later parser of their chain")
        if self.failure_reasons:
            reasons = "  ".join(f"{reason} {n}" for reason, n in sorted(self.failure_reasons.items()))
            lines.append(f"  failures   {reasons}")
        return lines

    def _stage_lines(self) -> list[str]:
        if not self.stages:
            return []
        lines = ["  stages     (busy seconds summed over actors; rows in → out)"]
        lines += [f"    {name:<12} {s['seconds']:8.2f}s  {s['rows_in']} → {s['rows_out']} rows in {s['calls']} calls"
                  for name, s in self.stages.items()]
        w = self.driver
        lines.append(f"    {'driver':<12} waited {w['wait_seconds']:.2f}s for micro-batches (queueing),"
                     f" committed for {w['commit_seconds']:.2f}s")
        return lines
