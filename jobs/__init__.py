"""Thin Ray job entry points: ``python -m jobs.<name> --config conf/<file>.yaml [--set k=v]``.

Submitted with ``ray job submit --working-dir . -- python -m jobs.<name> ...``. Each module
parses arguments, loads the config and calls ``kb_ray``; no logic lives here.
"""
