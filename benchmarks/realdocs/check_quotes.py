"""Check that every gold quote of a dataset resolves in an ingested catalog (and fill PDF pages).

    python benchmarks/realdocs/check_quotes.py --kb-root /tmp/realdocs-kb
    python benchmarks/realdocs/check_quotes.py --kb-root /tmp/realdocs-kb --fill-pages

Resolution is the eval harness's own (``kb_ray.eval.resolve``): exact substring of the
active canonical text, else whitespace-folded. ``--fill-pages`` rewrites the dataset with
``page`` set, for quotes in paginated documents, to the page of the element that holds the
quote's first character. Exit status 1 when a quote does not resolve.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pyarrow.compute as pc

from kb_ray.catalog.delta import DeltaCatalog
from kb_ray.eval.dataset import load_dataset
from kb_ray.eval.resolve import CanonicalTexts, resolve_queries

HERE = Path(__file__).resolve().parent


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kb-root", required=True, help="kb_root of a catalog with the corpus ingested")
    parser.add_argument("--dataset", type=Path, default=HERE / "queries.jsonl")
    parser.add_argument("--fill-pages", action="store_true", help="write the PDF page of each quote into the dataset")
    args = parser.parse_args(argv)
    catalog = DeltaCatalog.open(args.kb_root, create=False)
    queries = load_dataset(args.dataset)
    resolution = resolve_queries(queries, CanonicalTexts(catalog))
    for label, problems in (("UNRESOLVED", resolution.unresolved), ("ambiguous", resolution.ambiguous),
                            ("whitespace-normalized", resolution.normalized)):
        for problem in problems:
            print(f"{label}: {problem}")
    answerable = sum(q.answerable for q in queries)
    print(f"{len(queries)} queries ({answerable} answerable), {len(resolution.unresolved)} unresolved, "
          f"{len(resolution.ambiguous)} ambiguous, {len(resolution.normalized)} whitespace-normalized")
    if args.fill_pages and not resolution.unresolved:
        _fill_pages(args.dataset, catalog, resolution)
    return 1 if resolution.unresolved else 0


def _fill_pages(path: Path, catalog: DeltaCatalog, resolution) -> None:
    starts = _element_pages(catalog, sorted({g.version_id for spans in resolution.spans.values() for g in spans}))
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    for row in rows:
        spans = resolution.spans.get(row["id"], [])
        for index, gold in enumerate(row["relevant"]):
            found = [s for s in spans if s.quote == index]  # this quote's span, not the first of its document
            page = _page_at(starts.get(found[0].version_id, []), found[0].start) if found else None
            gold["page"] = page if gold["doc"].endswith(".pdf") else gold.get("page")
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    print(f"pages written to {path}")


def _element_pages(catalog: DeltaCatalog, version_ids: list[str]) -> dict[str, list[tuple[int, int, int]]]:
    table = catalog.read("elements", columns=["version_id", "span_start", "span_end", "regions"],
                         filter=pc.field("version_id").isin(version_ids))
    out: dict[str, list[tuple[int, int, int]]] = {}
    for row in table.to_pylist():
        if row["span_start"] is not None and row["regions"]:
            out.setdefault(row["version_id"], []).append((row["span_start"], row["span_end"], row["regions"][0]["page"]))
    return out


def _page_at(elements: list[tuple[int, int, int]], offset: int) -> int | None:
    pages = [page for start, end, page in elements if start <= offset < end]
    return pages[0] if pages else None


if __name__ == "__main__":
    sys.exit(main())
