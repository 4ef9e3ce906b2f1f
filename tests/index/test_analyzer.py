"""The bm25 analyzer: identifier-aware tokens, stemming, stopwords; one analyzer for both sides."""

from __future__ import annotations

import pytest

from kb_ray.index.analyzer import TextAnalyzer

ANALYZER = TextAnalyzer(stem=True, identifiers=True)


@pytest.mark.parametrize("text, whole, parts", [
    ("call os.path.join(a, b)", "os.path.join", ["os", "path", "join"]),
    ("set snake_case_name here", "snake_case_name", ["snake", "case", "name"]),
    (r"the \documentclass command", "\\documentclass", ["documentclass"]),
    ("pass --no-install-recommends to apt", "--no-install-recommends", ["instal", "recommend"]),
    ("requires version 8.4 or later", "8.4", ["version"]),
    ("released as v2.1.3 today", "v2.1.3", ["v2"]),
    ("order seal kit AF-SK-118 now", "af-sk-118", ["af", "sk", "118"]),
    ("edit /etc/apt/sources.list first", "etc/apt/sources.list", ["etc", "apt", "sourc", "list"]),
    ("use std::vector here", "std::vector", ["std", "vector"]),
])
def test_compounds_are_kept_whole_and_split_into_stemmed_parts(text, whole, parts):
    terms = ANALYZER.terms(text)
    assert whole in terms and all(part in terms for part in parts), terms
    assert whole in ANALYZER.exact_terms(text)


def test_lowercase_stem_stopwords_and_camel_case():
    assert ANALYZER.terms("The Pumps are Running and the HTTPServer getScores") == [
        "pump", "run", "httpserver", "http", "server", "getscor", "get", "score"]
    assert ANALYZER.exact_terms("The pumps are running") == []  # no compound, no digit


def test_a_sentence_end_is_not_part_of_a_token_and_unicode_words_survive():
    assert ANALYZER.terms("It ends here. vùng chè Tân Cương") == ["end", "here", "vùng", "chè", "tân", "cương"]


def test_query_and_document_meet_on_the_same_terms():
    document = ANALYZER.terms("Configuring the mechanical seals of AF-220 pumps")
    query = ANALYZER.terms("configure mechanical seal af-220")
    assert set(query) <= set(document)


def test_switches_turn_stemming_and_identifiers_off():
    plain = TextAnalyzer()  # the default: plain lowercased parts, stopwords dropped
    assert plain.terms("running os.path.join getScores") == ["running", "os", "path", "join", "getscores"]
    assert plain.exact_terms("os.path.join 8.4") == ["os.path.join", "8.4"]
    assert plain.spec()["stem"] is False and ANALYZER.spec()["identifiers"] is True
