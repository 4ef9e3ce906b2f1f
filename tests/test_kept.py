"""kb_ray/kept.py: objects kept by key, the least recently used one dropped (and closed)."""

from __future__ import annotations

from kb_ray.kept import KeptByKey


def test_a_kept_object_is_made_once_and_the_least_recently_used_is_dropped_through_on_drop():
    dropped: list[str] = []
    kept: KeptByKey[str] = KeptByKey(size=2, on_drop=dropped.append)
    assert kept.get("a", lambda: "A") == ("A", True)
    assert kept.get("b", lambda: "B") == ("B", True)
    assert kept.get("a", lambda: "never made") == ("A", False)  # "a" is now the most recently used
    assert kept.get("c", lambda: "C") == ("C", True)
    assert dropped == ["B"] and len(kept) == 2
    assert kept.get("b", lambda: "B2") == ("B2", True) and dropped == ["B", "A"]
