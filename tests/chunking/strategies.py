"""Hypothesis strategies: random but well-formed block lists."""

from hypothesis import strategies as st

from kb_ray.parsing.blocks import Block

WORDS = st.sampled_from(
    ["pump", "valve", "Tiếng", "Việt", "kW", "42", "the", "and", "pressure", "São", "naïve", "x|y", "a.b", "—", "東京"]
)


@st.composite
def sentences(draw, max_words: int = 30) -> str:
    words = draw(st.lists(WORDS, min_size=1, max_size=max_words))
    return " ".join(words) + draw(st.sampled_from([".", "!", "?", ""]))


@st.composite
def prose(draw) -> str:
    return " ".join(draw(st.lists(sentences(), min_size=1, max_size=12)))


@st.composite
def tables(draw) -> Block:
    width = draw(st.integers(1, 4))
    rows = draw(st.lists(st.lists(WORDS, min_size=width, max_size=width), min_size=1, max_size=25))
    return Block("table", "", attrs={"rows": rows, "header_rows": 1})


@st.composite
def blocks(draw) -> Block:
    kind = draw(st.sampled_from(["heading", "paragraph", "paragraph", "list_item", "table", "caption", "code",
                                 "page_footer", "figure"]))
    if kind == "table":
        return draw(tables())
    page = draw(st.none() | st.integers(1, 5))
    bbox = (0.1, 0.1, 0.9, 0.2) if page else None
    return Block(kind, draw(prose()), page=page, bbox=bbox, level=draw(st.integers(0, 3)))


block_lists = st.lists(blocks(), min_size=1, max_size=25)
