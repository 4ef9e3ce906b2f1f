"""What every ingest stage shares: the statistics it returns beside its output.

A stage is a plain class: heavy set-up in ``__init__`` (settings, catalog, models), and
:meth:`Stage.run` taking one Arrow table of its input record and returning the output
table and a :class:`StageStats`. Subclasses implement :meth:`Stage.process`, which
returns the output table and the stage's own counts. No stage imports Ray.
"""

from __future__ import annotations

import abc
import time
from dataclasses import dataclass, field

import pyarrow as pa


@dataclass
class StageStats:
    """One call of one stage: rows in and out, busy seconds, and the stage's counts."""

    stage: str
    rows_in: int = 0
    rows_out: int = 0
    seconds: float = 0.0
    calls: int = 1
    counts: dict[str, int] = field(default_factory=dict)

    def add(self, other: StageStats) -> None:
        self.rows_in += other.rows_in
        self.rows_out += other.rows_out
        self.seconds += other.seconds
        self.calls += other.calls
        self.counts = {key: self.counts.get(key, 0) + other.counts.get(key, 0)
                       for key in sorted(self.counts.keys() | other.counts.keys())}


class Stage(abc.ABC):
    name: str = "stage"

    def run(self, table: pa.Table) -> tuple[pa.Table, StageStats]:
        started = time.perf_counter()
        out, counts = self.process(table)
        return out, StageStats(stage=self.name, rows_in=table.num_rows, rows_out=out.num_rows,
                               seconds=time.perf_counter() - started, counts={k: int(v) for k, v in counts.items()})

    @abc.abstractmethod
    def process(self, table: pa.Table) -> tuple[pa.Table, dict[str, int]]:
        """The output table and this call's counts (e.g. ``{"pages_rendered": 3}``)."""
