"""``kb-ray ask "QUESTION"``: an answer with verified citations (docs/answers.md).

In-process by default (the live index generation of ``kb_root``, the packaged embedder,
no Ray); ``--url`` asks a running ``kb-ray serve`` over HTTP (``POST /v1/answer``).
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from kb_ray.cli.common import config_from_args


def register(commands: argparse._SubParsersAction) -> None:
    from kb_ray.cli import add_config_arguments

    parser = commands.add_parser("ask", help="answer a question with verified citations")
    parser.add_argument("query")
    parser.add_argument("--mode", default="qa", help="qa | summary | compare")
    parser.add_argument("--k", type=int, default=None, help="hits searched (default: answer.k)")
    parser.add_argument("--document", dest="documents", action="append", default=None, metavar="ID_OR_TITLE",
                        help="summary / compare: a document (repeatable)")
    parser.add_argument("--dimension", dest="dimensions", action="append", default=None,
                        help="compare: a row of the table (repeatable)")
    parser.add_argument("--url", default=None, help="a running service (default: answer in-process)")
    parser.add_argument("--api-key", default=None, help="--url: key for a service with serve.auth.enabled "
                        "(default: $KB_RAY_API_KEY)")
    parser.add_argument("--json", action="store_true", help="print the whole response as JSON")
    add_config_arguments(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    config = config_from_args(args)
    request = {"query": args.query, "mode": args.mode, "k": args.k, "filter": None, "documents": args.documents,
               "dimensions": args.dimensions}
    if args.url:
        response = ask_service(args.url, request, api_key=args.api_key)
    else:
        from kb_ray.answer.local import local_answerer

        response = local_answerer(config).answer(request)
    if args.json:
        print(json.dumps(response, indent=2, ensure_ascii=False))
    else:
        print(render_answer(response))
    return 0


def ask_service(url: str, request: dict[str, Any], *, api_key: str | None = None) -> dict[str, Any]:
    """``POST /v1/answer``; an unreachable service or an HTTP error raises a one-line ServiceError."""
    from kb_ray.cli.service_client import post_to_service

    return post_to_service(url, "/v1/answer", request, api_key=api_key, timeout_s=300,
                           local_hint="drop --url to answer in-process from the local catalog")


VERIFICATION = {
    "ok": "every sentence is supported by the passage it cites",
    "repaired": "flagged sentences were repaired; every sentence is now supported",
    "flagged": "some sentences are NOT supported by the passages they cite (marked below)",
    "refused": "no answer: the evidence does not support one",
}


def render_answer(response: dict[str, Any]) -> str:
    """The answer, its numbered citations (title, page, box, quote) and the verification outcome."""
    from kb_ray.serving.api import citation_line

    lines = [response["answer"], *([""] if response["citations"] else [])]
    for citation in response["citations"]:
        lines.append(f"[{citation['n']}] {citation_line(citation)}")
    for sentence in response["sentences"]:
        if not sentence["supported"]:
            lines.append(f"  ! {sentence['problem']} (support {sentence['support']:.2f}): {sentence['text']}")
    generator = response["generator"]
    lines.append(f"verification: {response['verification']} — {VERIFICATION.get(response['verification'], '')}")
    lines.append(f"generator: {generator['backend']}{' ' + generator['model'] if generator['model'] else ''}, "
                 f"{response['timings_ms'].get('total', 0):.0f} ms")
    return "\n".join(lines)
