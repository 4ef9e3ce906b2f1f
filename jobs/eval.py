"""Retrieval eval of the live index generation on a quote-labelled dataset (no Ray needed)."""

from __future__ import annotations

from jobs._common import job_parser, run_job


def main(config, args) -> int:
    from kb_ray.cli.eval_command import evaluate

    return evaluate(config, args)


def parser():
    from kb_ray.cli.eval_command import add_eval_arguments

    p = job_parser("eval", __doc__.splitlines()[0])
    add_eval_arguments(p)
    return p


if __name__ == "__main__":
    run_job(parser(), main)
