"""Answers with verified citations (question answering, summary, comparison).

The flow (docs/answers.md): search → bounded evidence pack (``pack``) → a generator writes
text with ``[n]`` markers (``generators``) → every sentence is verified against only the
passages it cites (``verify``) → one bounded repair round → the response, logged to the
``answers`` table. Everything here is Ray-free; ``kb_ray.serving`` and the CLI wire it.
"""
