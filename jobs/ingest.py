"""Ingest the configured sources into the catalog (Ray Data → Delta); exit 1 if documents failed.

Connects to ``ray.address`` / ``RAY_ADDRESS`` when set (as under ``ray job submit``),
else starts a local Ray instance.
"""

from __future__ import annotations

import sys

from jobs._common import job_parser, run_job


def main(config, args) -> int:
    from kb_ray.cli.progress import ProgressPrinter
    from kb_ray.ingest.run import run_ingest

    report = run_ingest(config, on_progress=ProgressPrinter(bar=False, stream=sys.stdout))
    print(report.render())
    return 1 if report.documents["failed"] else 0


if __name__ == "__main__":
    run_job(job_parser("ingest", __doc__.splitlines()[0]), main)
