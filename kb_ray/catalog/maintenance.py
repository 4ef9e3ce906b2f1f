"""``maintain``: compact small files (optionally Z-order by key), checkpoint, and vacuum
without breaking time travel to any table version a ready index generation was built from.

Micro-batch commits leave many small files; ``optimize.compact`` bin-packs them into
files of up to ``target_size`` bytes (files already that big are left alone, so a
compaction rewrites only what was added since the last one). ``optimize.z_order`` on a
table's key columns rewrites the whole table clustered by key, which gives each file a
narrow min/max range of its keys, so key lookups and MERGEs can skip files by their
statistics; it costs a full rewrite, hence a flag. ``vacuum`` then deletes files no
longer referenced by recent versions — which would break rebuilding the live generation
from its recorded catalog versions, so every version an index generation names is passed
to delta-rs as ``keep_versions``.

:func:`compact_small_files` is the cheap part alone; the ingest committer calls it every
``ingest.compact_every_batches`` micro-batches so the number of files a lookup opens
stays bounded while a catalog grows (docs/capacity.md).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow.compute as pc

from kb_ray.catalog import contract
from kb_ray.catalog.commits import commit_properties, retry_on_conflict
from kb_ray.catalog.delta import DeltaCatalog

logger = logging.getLogger(__name__)
TARGET_FILE_BYTES = 128 * 1024 * 1024


@dataclass
class TableMaintenance:
    files_before: int = 0
    files_after: int = 0
    files_removed: int = 0
    files_added: int = 0
    z_ordered_by: list[str] = field(default_factory=list)
    checkpoint_version: int | None = None
    vacuumed_files: int = 0
    kept_versions: list[int] = field(default_factory=list)


@dataclass
class MaintenanceReport:
    tables: dict[str, TableMaintenance] = field(default_factory=dict)
    vacuum: bool = True

    def render(self) -> str:
        lines = ["catalog maintenance:"]
        for name, t in self.tables.items():
            how = f"z-ordered by {','.join(t.z_ordered_by)}" if t.z_ordered_by else "compacted"
            vacuumed = f", vacuumed {t.vacuumed_files} files (kept versions {t.kept_versions or '-'})" \
                if self.vacuum else ""
            lines.append(f"  {name}: {t.files_before} -> {t.files_after} files ({how}: -{t.files_removed} "
                         f"+{t.files_added}), checkpoint at v{t.checkpoint_version}{vacuumed}")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {"vacuum": self.vacuum, "tables": {name: t.__dict__ for name, t in self.tables.items()}}


def generation_versions(catalog: DeltaCatalog) -> dict[str, list[int]]:
    """Table → the versions that ready index generations were built from."""
    rows = catalog.read("index_generations", filter=pc.field("status") == "ready").to_pylist()
    keep: dict[str, set[int]] = {}
    for row in rows:
        for table, version in json.loads(row["catalog_versions_json"] or "{}").items():
            keep.setdefault(table, set()).add(int(version))
    return {table: sorted(versions) for table, versions in keep.items()}


def compact_small_files(catalog: DeltaCatalog, table_names: Sequence[str], *,
                        target_size: int = TARGET_FILE_BYTES) -> dict[str, dict[str, Any]]:
    """Bin-pack each table's small files (a no-data-change commit; retried on conflicts)."""
    properties = commit_properties(None, None, {"kb_ray.operation": "compact"})
    metrics = {}
    for name in table_names:
        metrics[name] = retry_on_conflict(
            lambda name=name: catalog.delta_table(name).optimize.compact(
                target_size=target_size, commit_properties=properties),
            what=f"compact {name}")
        logger.debug("compacted %s: %s", name, metrics[name])
    return metrics


def maintain(catalog: DeltaCatalog, *, retention_hours: int = 168, vacuum: bool = True, z_order: bool = False,
             target_size: int = TARGET_FILE_BYTES) -> MaintenanceReport:
    report = MaintenanceReport(vacuum=vacuum)
    keep = generation_versions(catalog)
    for name in contract.schemas().TABLES:
        report.tables[name] = _maintain_table(catalog, name, keep=keep.get(name, []), retention_hours=retention_hours,
                                              vacuum=vacuum, z_order=z_order, target_size=target_size)
    logger.info(report.render())
    return report


def _maintain_table(catalog: DeltaCatalog, name: str, *, keep: list[int], retention_hours: int, vacuum: bool,
                    z_order: bool, target_size: int) -> TableMaintenance:
    result = TableMaintenance(files_before=len(catalog.delta_table(name).file_uris()), kept_versions=keep)
    keys = list(contract.table_spec(name).keys)
    if z_order and result.files_before > 0 and keys:
        properties = commit_properties(None, None, {"kb_ray.operation": "z_order"})
        metrics = retry_on_conflict(lambda: catalog.delta_table(name).optimize.z_order(
            keys, target_size=target_size, commit_properties=properties), what=f"z-order {name}")
        result.z_ordered_by = keys
    else:
        metrics = compact_small_files(catalog, [name], target_size=target_size)[name]
    result.files_removed, result.files_added = metrics.get("numFilesRemoved", 0), metrics.get("numFilesAdded", 0)
    table = catalog.delta_table(name)
    table.create_checkpoint()
    result.checkpoint_version = table.version()
    if vacuum:
        removed = table.vacuum(retention_hours=retention_hours, dry_run=False, enforce_retention_duration=False,
                               keep_versions=keep or None)
        result.vacuumed_files = len(removed)
    result.files_after = len(catalog.delta_table(name).file_uris())
    return result
