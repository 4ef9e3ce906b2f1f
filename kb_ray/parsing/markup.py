"""A fast, iterative depth check for HTML/XML before a recursive parser sees it.

Docling (through BeautifulSoup/lxml) walks an HTML tree recursively: 100,000 nested
``<div>``s held a parse worker for 400 s before failing with "maximum recursion depth
exceeded". :func:`nesting_depth` scans the tags with one regex, in linear time and without
building a tree, and stops as soon as the depth passes the limit. Elements whose end tag
HTML lets authors omit (``<p>``, ``<li>``, ``<td>``, …) and void elements (``<br>``,
``<img>``, …) are not counted, so sloppy real pages do not look deep.
"""

from __future__ import annotations

import re

_TAG = re.compile(rb"<!--.*?-->|<(/?)([A-Za-z][\w:.-]*)\b[^>]*?(/?)>", re.DOTALL)
_UNCOUNTED = frozenset(
    b"area base br col embed hr img input link meta param source track wbr "  # void
    b"p li dt dd tr td th thead tbody tfoot option optgroup rt rp colgroup caption html head body".split())


def nesting_depth(data: bytes, *, stop_above: int | None = None) -> int:
    """The deepest nesting of counted elements (stops early once past ``stop_above``)."""
    depth = deepest = 0
    for match in _TAG.finditer(data):
        closing, name, self_closing = match.group(1), match.group(2), match.group(3)
        if name is None or self_closing or name.lower() in _UNCOUNTED:
            continue
        if closing:
            depth = max(0, depth - 1)
            continue
        depth += 1
        if depth > deepest:
            deepest = depth
            if stop_above is not None and deepest > stop_above:
                break
    return deepest
