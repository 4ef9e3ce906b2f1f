"""``run_ingest``: list → plan → Ray Data pipeline → commit micro-batches → report.

``uploads`` replaces the listing with explicit files (kb_ray/ingest/upload_plan.py): the same
pipeline and commit, for the files ``POST /v1/documents`` queued (docs/upload.md)."""

from __future__ import annotations

import logging
import time
import uuid
from contextlib import closing
from datetime import datetime, timezone
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from kb_ray.catalog.delta import DeltaCatalog
from kb_ray.catalog.lease import writer_lease
from kb_ray.chunking.tokens import SPECIAL_TOKENS
from kb_ray.config import KbConfig, config_json
from kb_ray.errors import CatalogError, SourceError
from kb_ray.ingest.commit import MicroBatchCommitter, combine_batches
from kb_ray.ingest.group_commit import commit_groups
from kb_ray.ingest.listing import list_sources, root_uri
from kb_ray.ingest.metadata_plan import MetadataPlan, failed_rows_table, resolve_plan_metadata
from kb_ray.ingest.planning import IngestPlan, plan_ingest
from kb_ray.ingest.progress import IngestProgress, ProgressCallback
from kb_ray.ingest.report import IngestReport
from kb_ray.ingest.rows import to_table
from kb_ray.ingest.upload_plan import UploadedFile, plan_uploads
from kb_ray.processing import DocumentProcessor
from kb_ray.runtime import code_version

if TYPE_CHECKING:
    from kb_ray.ingest.reembed import ReembedReport

logger = logging.getLogger(__name__)


def run_ingest(config: KbConfig, *, fail_after_batches: int | None = None, on_progress: ProgressCallback | None = None,
               verbose: bool = False, uploads: list[UploadedFile] | None = None) -> IngestReport:
    """Ingest the configured sources (or only ``uploads``, when given); ``on_progress`` hears
    after each committed micro-batch, ``verbose`` lets Ray's own INFO output through to the console."""
    started = time.perf_counter()
    if not config.ingest.sources and not uploads:
        raise SourceError("no sources to ingest: set ingest.sources in the config or pass --source")
    catalog = DeltaCatalog.open(config.kb_root, storage_options=config.storage_options)
    config = _concepts_for_live_graph(config)
    check_embedder(catalog, config)
    check_chunk_budget(config)
    if config.pages.enabled:  # fail before Ray starts when the page model is missing
        from kb_ray.pages.embedder import page_embedder_fingerprint

        page_embedder_fingerprint(config.pages)
    if config.enrich.captions.enabled:  # likewise a missing caption model, endpoint or API key
        from kb_ray.enrich.captioners import check_caption_settings

        check_caption_settings(config.enrich.captions)
    report = IngestReport(run_id=f"run_{datetime.now(timezone.utc):%Y%m%dT%H%M%S}_{uuid.uuid4().hex[:8]}")
    with writer_lease(catalog, config, holder=f"ingest {report.run_id}") as lease:
        committer = MicroBatchCommitter(catalog, run_id=report.run_id, fail_after_batches=fail_after_batches,
                                        compact_every_batches=config.ingest.compact_every_batches,
                                        compact_target_bytes=config.ingest.compact_target_mb << 20,
                                        before_commit=lease.check)
        try:
            _run_holding_lease(catalog, config, committer=committer, report=report, started=started,
                               on_progress=on_progress, verbose=verbose, uploads=uploads)
        finally:
            committer.close()
        switch = _embed_for_switch(catalog, config, report) if _switching_model(config) else None
        if switch is None and config.index.auto_refresh:
            _refresh_index(config, report)
    if switch is not None:  # the new embedder's generation, beside the live one (no lease needed)
        from kb_ray.ingest.reembed import build_beside_live

        build_beside_live(config, switch)
        report.model_switch = switch.to_dict()
    return report


def _concepts_for_live_graph(config: KbConfig) -> KbConfig:
    """``ingest.concepts`` unset follows ``index.graph`` — and the live generation's concept graph,
    which its segments and compactions keep (kb_ray/index/build_options.py): a compaction needs
    the concepts of every version it indexes, whatever this caller's ``index.graph`` says."""
    from kb_ray.index.generations import load_manifest, read_current

    if config.ingest.concepts is not None or config.index.graph:
        return config
    live = read_current(config.kb_root, storage_options=config.storage_options)
    if live is None or "graph" not in load_manifest(config.kb_root, live, storage_options=config.storage_options).spec:
        return config
    return config.model_copy(update={"ingest": config.ingest.model_copy(update={"concepts": True})})


def _switching_model(config: KbConfig) -> bool:
    """A model switch is under way: it is allowed and the live generation has another embedder."""
    from kb_ray.embedding.fingerprint import embedder_fingerprint
    from kb_ray.index.generations import load_manifest, read_current

    live = read_current(config.kb_root, storage_options=config.storage_options)
    if not config.embedding.allow_model_switch or live is None:
        return False
    base = load_manifest(config.kb_root, live, storage_options=config.storage_options)
    return base.embedder_fp != embedder_fingerprint(config.embedding)


def _embed_for_switch(catalog: DeltaCatalog, config: KbConfig, report: IngestReport) -> ReembedReport:
    """The new embedder's vectors for the chunks this run did not embed (unchanged documents);
    the live generation (another embedder) is not refreshed: it could not hold those vectors."""
    from kb_ray.index.generations import read_current
    from kb_ray.index.refresh import RefreshResult
    from kb_ray.index.vector_layout import VectorLayout
    from kb_ray.ingest.reembed import embed_missing

    switch = embed_missing(catalog, embedding=config.embedding, layout=VectorLayout.from_settings(config.index))
    live = read_current(config.kb_root, storage_options=config.storage_options)
    report.index_refresh = RefreshResult("none", live, detail="model switch: the live generation was built by "
                                         "another embedder").to_dict()
    return switch


def _refresh_index(config: KbConfig, report: IngestReport) -> None:
    """``index.auto_refresh``: a delta segment over the live generation (docs/indexes.md),
    still under the writer lease; nothing is written when the run changed nothing."""
    from kb_ray.index.refresh import refresh_index

    result = refresh_index(config)
    report.index_refresh = result.to_dict()
    logger.info("index refresh after %s: %s", report.run_id, result.to_dict())


def _run_holding_lease(catalog: DeltaCatalog, config: KbConfig, *, committer: MicroBatchCommitter,
                       report: IngestReport, started: float, on_progress: ProgressCallback | None,
                       verbose: bool, uploads: list[UploadedFile] | None) -> None:
    _abandon_dead_runs(catalog, by=report.run_id)
    _record_run(catalog, report, config, started_at=datetime.now(timezone.utc))
    try:
        plan, metadata = plan_uploads(uploads, catalog=catalog, pipeline_fp=_pipeline_fp(config),
                                      storage_options=config.storage_options) if uploads else _plan(catalog, config)
        committer.metadata = metadata.documents
        report.documents["seen"] = plan.seen + len(metadata.failed)
        _run_pipeline(plan.todo, config=config, committer=committer, report=report,
                      progress=_Progress(on_progress, total=plan.todo.num_rows), verbose=verbose)
        _finish_unchanged_and_vanished(plan, config=config, committer=committer, report=report)
        _finish_metadata(metadata, committer=committer, report=report)
        report.status = "failed_documents" if report.documents["failed"] else "succeeded"
    except BaseException:
        report.status = "crashed"
        raise
    finally:
        report.seconds = time.perf_counter() - started
        _record_run(catalog, report, config, started_at=None)


def _plan(catalog: DeltaCatalog, config: KbConfig) -> tuple[IngestPlan, MetadataPlan]:
    """One plan per collection the sources name, then their documents' metadata. A source of the
    collection that lies under none of this run's roots is not vanished: it was not looked for."""
    sources, sidecars, plans = config.ingest.source_settings(), set(), []
    for collection in dict.fromkeys(s.collection or config.ingest.collection for s in sources):
        uris = [s.uri for s in sources if (s.collection or config.ingest.collection) == collection]
        listing = list_sources(uris, collection=collection, include=config.ingest.include,
                               storage_options=config.storage_options, sidecars=sidecars)
        roots = [root_uri(uri, storage_options=config.storage_options) for uri in uris]
        plans.append(plan_ingest(listing, catalog=catalog, collection=collection, pipeline_fp=_pipeline_fp(config),
                                 roots=roots))
    plan = IngestPlan(*(pa.concat_tables([getattr(p, part) for p in plans], promote_options="default")
                        for part in ("todo", "unchanged", "vanished")))
    plan, metadata = resolve_plan_metadata(plan, sources=sources, sidecars=sidecars,
                                           default_collection=config.ingest.collection,
                                           storage_options=config.storage_options)
    logger.info("plan: %d to process, %d unchanged (%d with new metadata), %d vanished, %d bad metadata",
                plan.todo.num_rows, plan.unchanged.num_rows, len(metadata.updates), plan.vanished.num_rows,
                len(metadata.failed))
    return plan, metadata


def _run_pipeline(todo: pa.Table, *, config: KbConfig, committer: MicroBatchCommitter, report: IngestReport,
                  progress: _Progress, verbose: bool) -> None:
    if not todo.num_rows:
        return
    from kb_ray.ingest.inline import run_inline, runs_inline

    if runs_inline(config, documents=todo.num_rows):
        stats: dict = {}
        rows = run_inline(todo, config=config, run_id=report.run_id, pipeline_fp=_pipeline_fp(config), stats=stats)
        _commit_each(rows, committer=committer, report=report, progress=progress)
        report.add_stage_stats(stats)
        return
    import ray

    from kb_ray.ingest.pipeline import build_ingest_dataset, start_stats_collector
    from kb_ray.runtime import start_ray

    start_ray(config, verbose=verbose)
    collector = start_stats_collector(report.run_id)
    try:
        dataset = build_ingest_dataset(todo, config=config, run_id=report.run_id, pipeline_fp=_pipeline_fp(config))
        _commit_each(iter(dataset.iter_rows()), committer=committer, report=report, progress=progress,
                     max_group=config.ingest.commit_group_max_batches)
        report.add_stage_stats(ray.get(collector.result.remote()))
    finally:
        ray.kill(collector)


def _commit_each(batches, *, committer: MicroBatchCommitter, report: IngestReport, progress: _Progress,
                 max_group: int = 1) -> None:
    """Commit micro-batches as they come, with the ones that arrived during the last commit
    in the same commit (at most ``max_group``, kb_ray/ingest/group_commit.py); time waiting
    for the next one apart from committing."""
    with closing(commit_groups(batches, max_group=max_group)) as groups:
        while True:
            waited = time.perf_counter()
            group = next(groups, None)
            report.driver["wait_seconds"] += time.perf_counter() - waited
            if group is None:
                return
            _commit_group(group, committer=committer, report=report, progress=progress)


def _commit_group(group: list[dict], *, committer: MicroBatchCommitter, report: IngestReport,
                  progress: _Progress) -> None:
    committing = time.perf_counter()
    commit_no = report.commits
    outcome = committer.commit(combine_batches(group), batch_no=commit_no)
    report.driver["commit_seconds"] += time.perf_counter() - committing
    report.add_summary(outcome.summary)
    report.add_counts(outcome.counts)
    report.micro_batches += len(group)
    report.commits += 1
    progress.advance(files=outcome.summary.num_rows,
                     chunks=outcome.counts.get("chunks_new", 0) + outcome.counts.get("chunks_reused", 0))
    logger.info("committed %d micro-batch(es) as commit %d (%d documents)", len(group), commit_no,
                outcome.summary.num_rows)


def _pipeline_fp(config: KbConfig) -> str:
    return DocumentProcessor(parse=config.parse, chunking=config.chunking, captions=config.enrich.captions).pipeline_fp


class _Progress:
    """Running totals handed to the caller's progress callback."""

    def __init__(self, callback: ProgressCallback | None, *, total: int) -> None:
        self.callback, self.total = callback, total
        self.files = self.chunks = 0
        self.started = time.perf_counter()

    def advance(self, *, files: int, chunks: int) -> None:
        self.files += files
        self.chunks += chunks
        if self.callback is not None:
            self.callback(IngestProgress(files_done=self.files, files_total=self.total, chunks_done=self.chunks,
                                         elapsed_s=time.perf_counter() - self.started))


def _finish_unchanged_and_vanished(plan: IngestPlan, *, config: KbConfig, committer: MicroBatchCommitter,
                                   report: IngestReport) -> None:
    batch_no = report.commits
    unchanged = plan.unchanged  # Arrow columns all the way to the commit (no per-file Python rows)
    if unchanged.num_rows:
        committer.record_sources(unchanged, batch_no=batch_no)
        committer.log(unchanged, batch_no=batch_no)
        report.documents["unchanged"] += unchanged.num_rows
    if config.ingest.sync == "full" and plan.vanished.num_rows:
        report.documents["deleted"] += committer.tombstone(plan.vanished, batch_no=batch_no)
        vanished = plan.vanished
        committer.record_sources(vanished, batch_no=batch_no + 1, status="vanished")
        committer.log(vanished, batch_no=batch_no + 1)


def _finish_metadata(metadata: MetadataPlan, *, committer: MicroBatchCommitter, report: IngestReport) -> None:
    """Metadata-only updates of unchanged files, and the files whose metadata was invalid."""
    batch_no = report.commits + 2  # after the unchanged (+0) and vanished (+1) commits
    report.documents["metadata_updated"] = committer.metadata_updated + committer.update_metadata(
        metadata.updates, batch_no=batch_no)
    if metadata.failed:
        failed = failed_rows_table(metadata.failed)
        committer.record_sources(failed, batch_no=batch_no)
        committer.log(failed, batch_no=batch_no)
        report.add_summary(failed)


def check_embedder(catalog: DeltaCatalog, config: KbConfig) -> str:
    """Refuse to mix two embedders' vectors unless a model switch was asked for."""
    from kb_ray.embedding.fingerprint import embedder_fingerprint

    e = config.embedding
    fingerprint = embedder_fingerprint(e)  # from the model files and settings: nothing is loaded
    present = set(pc.unique(catalog.read("embeddings", columns=["embedder_fp"]).column("embedder_fp")).to_pylist())
    others = present - {fingerprint}
    if others and not e.allow_model_switch:
        raise CatalogError(
            f"this catalog holds embeddings of another embedder ({', '.join(sorted(others))}); the configured "
            f"model {e.model_id} has fingerprint {fingerprint}. Mixing them would corrupt search: restore the "
            "original embedding settings, or set embedding.allow_model_switch=true to embed beside them")
    return fingerprint


def check_chunk_budget(config: KbConfig) -> None:
    """Warn when chunks may be longer than the embedder reads: wordpiece budgets counted with
    another model's tokenizer, or a budget past the embedder's input length without passage
    vectors (``index.passage_chars`` 0) to read the rest of each chunk."""
    from kb_ray.embedding.model_files import read_model_layout, resolve_model_path
    from kb_ray.processing import structural_budget

    c = config.chunking
    if c.strategy != "structural" or c.tokenizer != "wordpiece" or config.embedding.runtime == "remote":
        return  # a remote embedder's token limit is its server's: chunking.tokenizer_path / max_tokens decide
    embedder_dir, tokenizer_dir = resolve_model_path(config.embedding.model_path), resolve_model_path(c.tokenizer_path)
    limit = read_model_layout(embedder_dir).max_seq_length - SPECIAL_TOKENS
    budget = structural_budget(c)
    if tokenizer_dir != embedder_dir:
        logger.warning("chunk budgets are counted with the tokenizer of %s but the embedder is %s: set "
                       "chunking.tokenizer_path to the embedder's directory", tokenizer_dir, embedder_dir)
    if budget > limit and config.index.passage_chars <= 0:
        logger.warning("chunks of up to %d tokens but the embedder %s reads %d and index.passage_chars is 0: "
                       "each chunk's tail is never embedded; set index.passage_chars (default 512) or "
                       "chunking.max_tokens <= %d", budget, embedder_dir, limit, limit)


def _abandon_dead_runs(catalog: DeltaCatalog, *, by: str) -> None:
    """Mark ``abandoned`` the runs still marked running: every run holds the writer lease from
    its first record to its last, so a run marked running while this one holds the lease
    stopped without recording its end (a driver killed with SIGKILL, whose lease was taken
    over as stale)."""
    dead = catalog.read("ingest_runs", filter=pc.field("status") == "running").to_pylist()
    if not dead:
        return
    logger.warning("ingest run(s) %s stopped without recording an end (killed?); %s marks them abandoned",
                   ", ".join(row["run_id"] for row in dead), by)
    catalog.merge_upsert("ingest_runs", to_table("ingest_runs", [{**row, "status": "abandoned"} for row in dead]),
                         keys=["run_id"])


def _record_run(catalog: DeltaCatalog, report: IngestReport, config: KbConfig, *, started_at: datetime | None) -> None:
    import json

    existing = catalog.read("ingest_runs", filter=pc.field("run_id") == report.run_id).to_pylist()
    row = existing[0] if existing else {"run_id": report.run_id, "started_at": started_at,
                                        "config_json": config_json(config), "code_version": code_version()}
    row.update(status=report.status, report_json=json.dumps(report.to_dict()),
               finished_at=None if report.status == "running" else datetime.now(timezone.utc))
    catalog.merge_upsert("ingest_runs", to_table("ingest_runs", [row]), keys=["run_id"])
