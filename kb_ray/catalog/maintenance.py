"""``maintain``: compact small files, checkpoint, and vacuum without breaking time travel
to any table version a ready index generation was built from.

Micro-batch commits leave many small files; ``optimize.compact`` merges them. ``vacuum``
then deletes files no longer referenced by recent versions — which would break
rebuilding the live generation from its recorded catalog versions, so every version an
index generation names is passed to delta-rs as ``keep_versions``.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field

import pyarrow.compute as pc

from kb_ray.catalog import contract
from kb_ray.catalog.delta import DeltaCatalog

logger = logging.getLogger(__name__)


@dataclass
class MaintenanceReport:
    compacted: dict[str, dict] = field(default_factory=dict)
    vacuumed_files: dict[str, int] = field(default_factory=dict)
    kept_versions: dict[str, list[int]] = field(default_factory=dict)

    def render(self) -> str:
        lines = ["catalog maintenance:"]
        for name, metrics in self.compacted.items():
            lines.append(f"  {name}: compacted {metrics.get('numFilesRemoved', 0)} -> {metrics.get('numFilesAdded', 0)}"
                         f" files, vacuumed {self.vacuumed_files.get(name, 0)}, kept versions "
                         f"{self.kept_versions.get(name) or '-'}")
        return "\n".join(lines)


def generation_versions(catalog: DeltaCatalog) -> dict[str, list[int]]:
    """Table → the versions that ready index generations were built from."""
    rows = catalog.read("index_generations", filter=pc.field("status") == "ready").to_pylist()
    keep: dict[str, set[int]] = {}
    for row in rows:
        for table, version in json.loads(row["catalog_versions_json"] or "{}").items():
            keep.setdefault(table, set()).add(int(version))
    return {table: sorted(versions) for table, versions in keep.items()}


def maintain(catalog: DeltaCatalog, *, retention_hours: int = 168, vacuum: bool = True) -> MaintenanceReport:
    report = MaintenanceReport()
    keep = generation_versions(catalog)
    for name in contract.schemas().TABLES:
        table = catalog.delta_table(name)
        report.compacted[name] = table.optimize.compact()
        table.create_checkpoint()
        if vacuum:
            report.kept_versions[name] = keep.get(name, [])
            removed = table.vacuum(retention_hours=retention_hours, dry_run=False, enforce_retention_duration=False,
                                   keep_versions=keep.get(name) or None)
            report.vacuumed_files[name] = len(removed)
    logger.info(report.render())
    return report
