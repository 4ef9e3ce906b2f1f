"""The vector layouts (``index.vector_layout``, docs/indexes.md "Passage vectors") side by side:
one fresh catalog per variant, ingested and indexed with it, then the eval, in one command.

    .venv/bin/python benchmarks/vector_layouts.py --source benchmarks/work/realdocs/corpus --work /tmp/vl \\
        [--dataset benchmarks/realdocs/queries.jsonl] [--naive-cache /tmp/rd_naive] \\
        [--variants chunk_and_passages,passages,late,late:32] [--ingest-only]

A variant is a layout, ``late:N`` the late layout with ``index.late_overlap_tokens=N``. For each,
under ``--work/<variant>``: ``kb-ray ingest --source SRC --set kb_root=… --set index.vector_layout=…
--json`` (its report: ``ingest.json``), ``kb-ray build-index … --json`` (``build.json``), then
``benchmarks/eval_splits.py --kb … --modes dense,lexical,hybrid`` (``eval/eval_{dev,test,all}.json``);
a dataset without a ``<stem>.split.json`` (golden) is evaluated whole by ``kb-ray eval --json``.
Each step runs in its own process. Writes ``--work/summary.md``: what each ingest embedded (texts,
chunks pooled late, tokens read by the model against the chunk texts' own tokens, per page), its
seconds, the build's vectors, and R@1 / MRR of dense and hybrid per part of the dataset.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
KB_RAY = [sys.executable, "-m", "kb_ray.cli"]
DEFAULT_VARIANTS = "chunk_and_passages,passages,late"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", required=True, help="the corpus directory to ingest")
    parser.add_argument("--work", type=Path, required=True, help="one catalog per variant is made under it")
    parser.add_argument("--dataset", type=Path, default=REPO / "benchmarks" / "realdocs" / "queries.jsonl")
    parser.add_argument("--naive-cache", default=None, help="passed to the eval: the naive reference's vectors")
    parser.add_argument("--variants", default=DEFAULT_VARIANTS, help=f"comma-separated (default: {DEFAULT_VARIANTS})")
    parser.add_argument("--ingest-only", action="store_true", help="ingest and count, no index and no eval")
    args = parser.parse_args(argv)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    rows = [run_variant(variant, args, env) for variant in args.variants.split(",")]
    summary = render(rows, args)
    (args.work / "summary.md").write_text(summary, encoding="utf-8")
    print(summary)
    return 0


def run_variant(variant: str, args: argparse.Namespace, env: dict[str, str]) -> dict:
    layout, _, overlap = variant.partition(":")
    kb = args.work / variant.replace(":", "-")
    sets = ["--set", f"kb_root={kb}", "--set", f"index.vector_layout={layout}",
            "--set", f"index.late_overlap_tokens={overlap or 0}"]
    kb.mkdir(parents=True, exist_ok=True)
    row = {"variant": variant, "ingest": _json([*KB_RAY, "ingest", "--source", args.source, *sets, "--json"],
                                              kb / "ingest.json", env)}
    if args.ingest_only:
        return row
    row["build"] = _json([*KB_RAY, "build-index", *sets, "--json"], kb / "build.json", env)
    row["eval"] = evaluate(kb, sets, args, env)
    return row


def evaluate(kb: Path, sets: list[str], args: argparse.Namespace, env: dict[str, str]) -> dict[str, dict]:
    naive = ["--naive-cache", args.naive_cache] if args.naive_cache else []
    if args.dataset.with_name(args.dataset.stem + ".split.json").is_file():
        subprocess.run([sys.executable, str(REPO / "benchmarks" / "eval_splits.py"), "--kb", str(kb), "--dataset",
                        str(args.dataset), "--modes", "dense,lexical,hybrid", *naive, "--out", str(kb / "eval")],
                       check=True, env=env, stdout=subprocess.DEVNULL)
        return {part: json.loads((kb / "eval" / f"eval_{part}.json").read_text()) for part in ("dev", "test", "all")}
    return {"all": _json([*KB_RAY, "eval", *sets, "--dataset", str(args.dataset), "--modes", "dense,lexical,hybrid",
                          "--no-report", *naive, "--json"], kb / "eval_all.json", env)}


def _json(command: list[str], out: Path, env: dict[str, str]) -> dict:
    print("+", " ".join(command), file=sys.stderr)
    text = subprocess.run(command, check=True, env=env, capture_output=True, text=True).stdout
    value = json.loads(text[text.index("{"):])
    out.write_text(json.dumps(value, indent=2) + "\n", encoding="utf-8")
    return value


def render(rows: list[dict], args: argparse.Namespace) -> str:
    lines = [f"# Vector layouts on `{args.source}`", "",
             f"Command: `benchmarks/vector_layouts.py {' '.join(sys.argv[1:])}`; {os.cpu_count()} CPUs.", "",
             "| variant | pages | chunks | texts embedded | chunks pooled late (vectors) | tokens embedded | "
             "chunk-text tokens | ratio | tokens / page | embed stage s | ingest s | dense vectors | missing rows |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for row in rows:
        report = row["ingest"]
        stage = report["stages"]["embed_write"]
        counts, build = stage["counts"], row.get("build", {}).get("stats", {})
        tokens, text = counts.get("embed_tokens", 0), counts.get("text_tokens", 0)
        lines.append(f"| {row['variant']} | {report['pages']} | {report['chunks']['new']} | {counts.get('embed_texts', 0)}"
                     f" | {counts.get('late_chunks', 0)} ({counts.get('late_vectors', 0)}) | {tokens} | {text} | "
                     f"{tokens / text if text else 0:.2f} | {tokens / max(report['pages'], 1):.0f} | "
                     f"{stage['seconds']:.1f} | {report['seconds']:.1f} | "
                     f"{build.get('rows', 0) + build.get('passages', 0) if build else '–'} | "
                     f"{build.get('passages_missing_rows', '–') if build else '–'} |")
    if any("eval" in row for row in rows):
        lines += ["", "| variant | part | dense R@1 / MRR | hybrid R@1 / MRR | naive-hybrid R@1 / MRR |", "|---|---|---|---|---|"]
        for row in rows:
            for part, summary in row.get("eval", {}).items():
                lines.append(f"| {row['variant']} | {part} | " + " | ".join(
                    _metrics(summary["modes"].get(mode, {})) for mode in ("dense", "hybrid", "naive-hybrid")) + " |")
    return "\n".join(lines) + "\n"


def _metrics(mode: dict) -> str:
    metrics = mode.get("metrics") if mode.get("available") else None
    return f"{metrics['recall@1']:.3f} / {metrics['mrr']:.3f}" if metrics else "–"


if __name__ == "__main__":
    sys.exit(main())
