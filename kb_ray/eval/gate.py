"""The eval gate: measured numbers of one mode against stored minimums.

Thresholds live in a JSON file (``golden/eval_thresholds.json``) with ``mode`` and
``minimums`` (metric name -> lowest acceptable value); names are looked up in the mode
summary's ``metrics`` and then its ``citations`` (e.g. ``quote_ok``, ``page@1``).
``minimums_without_kinds`` (optional: ``{"kinds": [...], "minimums": {...}}``) gates the
per-kind columns over the answerable queries of every other kind, so a new kind of question
(e.g. multi-hop, whose recall@1 is capped by its two passages) cannot hide a regression of
the questions that were there before.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kb_ray.errors import KbRayError

TOLERANCE = 1e-9


class GateError(KbRayError):
    """A thresholds file is unreadable or names a metric the summary does not have."""


def load_thresholds(path: str | Path) -> dict[str, Any]:
    try:
        thresholds = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise GateError(f"cannot read eval thresholds {path}: {exc}") from exc
    if not isinstance(thresholds.get("minimums"), dict) or not thresholds.get("mode"):
        raise GateError(f"{path} needs a 'mode' and a 'minimums' object (metric -> lowest acceptable value)")
    return thresholds


def gate_failures(summary: dict[str, Any], thresholds: dict[str, Any]) -> list[str]:
    """One line per metric below its minimum (empty when the gate passes)."""
    mode = summary["modes"].get(thresholds["mode"])
    if not mode or not mode.get("available"):
        return [f"mode {thresholds['mode']!r} was not evaluated: {mode.get('note') if mode else 'not run'}"]
    values = {**mode["citations"], **mode["metrics"]}
    failures = []
    for name, minimum in thresholds["minimums"].items():
        if name not in values:
            raise GateError(f"threshold names unknown metric {name!r}; known: {', '.join(sorted(values))}")
        value = values[name]
        if value is None or value < minimum - TOLERANCE:
            failures.append(f"{thresholds['mode']} {name} = {value} is below the threshold {minimum}")
    return failures + _subset_failures(mode, thresholds)


def _subset_failures(mode: dict[str, Any], thresholds: dict[str, Any]) -> list[str]:
    subset = thresholds.get("minimums_without_kinds")
    if not subset:
        return []
    kinds = {kind: row for kind, row in mode["by_kind"].items() if kind not in subset["kinds"]}
    queries = sum(row["queries"] for row in kinds.values())
    failures = []
    for name, minimum in subset["minimums"].items():
        if any(name not in row for row in kinds.values()):
            raise GateError(f"minimums_without_kinds names {name!r}, which the per-kind table does not have")
        value = round(sum(row[name] * row["queries"] for row in kinds.values()) / queries, 4) if queries else None
        if value is None or value < minimum - TOLERANCE:
            failures.append(f"{thresholds['mode']} {name} without {', '.join(subset['kinds'])} = {value} "
                            f"is below the threshold {minimum}")
    return failures
