"""Heavy objects a process keeps by key, least recently used dropped: one small cache with a lock,
for the resources that are worth building once per process (the parser router with its child,
kb_ray/processing.py; the loaded text encoder, kb_ray/embedding/text.py)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

V = TypeVar("V")


class KeptByKey(Generic[V]):
    """At most ``size`` objects by key; ``on_drop`` is called on one that is pushed out."""

    def __init__(self, *, size: int, on_drop: Callable[[V], None] | None = None) -> None:
        self.size, self.on_drop = size, on_drop
        self._kept: OrderedDict[Hashable, V] = OrderedDict()
        self._lock = threading.Lock()  # one make at a time: two threads never load the same weights twice

    def get(self, key: Hashable, make: Callable[[], V]) -> tuple[V, bool]:
        """The object kept under ``key``, else ``make()``'s (kept now); True when it was made now."""
        with self._lock:
            made = key not in self._kept
            if made:
                self._kept[key] = make()
            self._kept.move_to_end(key)
            while len(self._kept) > self.size:
                dropped = self._kept.popitem(last=False)[1]
                if self.on_drop is not None:
                    self.on_drop(dropped)
            return self._kept[key], made

    def __len__(self) -> int:
        return len(self._kept)
