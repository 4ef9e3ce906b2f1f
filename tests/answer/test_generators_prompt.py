"""The prompt the model generators send: numbered passages, forced citations, refusal, repair list."""

from __future__ import annotations

from kb_ray.answer.generators.prompt import (
    MODE_INSTRUCTIONS,
    answer_messages,
    format_passage,
    plain_prompt,
    prompt_fingerprint,
    repair_messages,
)
from kb_ray.answer.types import Passage, Sentence

REFUSAL = "The knowledge base has no passage that answers this."


def passage(n: int, quote: str, *, pages: list[int], title: str | None = "Pump manual", context=None) -> Passage:
    return Passage(n=n, chunk_id=f"ch{n}", document_id="doc_manual", version_id="ver_manual", title=title, uri=None,
                   quote=quote, spans=[(0, len(quote))], pages=pages, regions=[], context=context)


PASSAGES = [passage(1, "The seal kit is AF-SK-118.", pages=[4]),
            passage(2, "Keep the discharge\npressure below 8 bar.", pages=[5, 6], title=None),
            passage(3, "Prime the pump before use.", pages=[], context="Section 2 Installation")]


def test_each_passage_is_wrapped_with_its_number_title_and_page():
    assert format_passage(PASSAGES[0]) == "[1] Pump manual, page 4: The seal kit is AF-SK-118."
    assert format_passage(PASSAGES[1]) == "[2] doc_manual, pages 5-6: Keep the discharge pressure below 8 bar."
    assert format_passage(PASSAGES[2]).splitlines() == [
        "[3] Pump manual: Prime the pump before use.",
        "    (surrounding text, do not cite: Section 2 Installation)"]


def test_answer_prompt_forces_citations_from_the_given_numbers_and_the_refusal():
    system, user = answer_messages(question=" What is the seal kit? ", passages=PASSAGES, mode="qa", refusal=REFUSAL)
    assert system["role"] == "system" and user["role"] == "user"
    assert "Use only these passage numbers: [1], [2], [3]." in system["content"]
    assert f"reply with exactly this sentence and nothing else: {REFUSAL}" in system["content"]
    assert "ONLY the numbered evidence passages" in system["content"]
    assert all(format_passage(p) in user["content"] for p in PASSAGES)
    assert user["content"].endswith("Question: What is the seal kit?")
    assert MODE_INSTRUCTIONS["qa"] in user["content"]


def test_each_mode_gets_its_own_instruction():
    users = {mode: answer_messages(question="q", passages=PASSAGES, mode=mode, refusal=REFUSAL)[1]["content"]
             for mode in ("qa", "summary", "compare")}
    assert len(set(users.values())) == 3
    assert all(MODE_INSTRUCTIONS[mode] in text for mode, text in users.items())


def test_repair_prompt_lists_each_flagged_sentence_with_its_problem():
    flagged = [Sentence("The kit is AF-SK-999 [7].", [7], False, 0.0, "unknown_citation"),
               Sentence("The pump is red.", [], False, 0.0, "no_citation"),
               Sentence("Pressure may reach 20 bar [2].", [2], False, 0.2, "unsupported")]
    messages = repair_messages(question="q", passages=PASSAGES, mode="qa", refusal=REFUSAL,
                               answer="The kit is AF-SK-999 [7]. The pump is red.", flagged=flagged)
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user"]
    assert messages[2]["content"] == "The kit is AF-SK-999 [7]. The pump is red."
    request = messages[3]["content"]
    assert '- "The kit is AF-SK-999 [7].": unknown_citation: it cites a number that was not given ([7])' in request
    assert '- "The pump is red.": no_citation: it has no [n] citation' in request
    assert '- "Pressure may reach 20 bar [2].": unsupported: the passage it cites does not state this ([2])' in request
    assert "Rewrite the WHOLE answer" in request and "[1], [2], [3]" in request and REFUSAL in request


def test_plain_prompt_keeps_every_turn_and_ends_with_the_assistant_cue():
    text = plain_prompt(answer_messages(question="q?", passages=PASSAGES, mode="qa", refusal=REFUSAL))
    assert text.startswith("System: You answer questions") and "\n\nUser: Evidence passages:" in text
    assert text.endswith("Question: q?\n\nAssistant:")


def test_fingerprint_changes_with_what_changes_the_output():
    base = {"backend": "openai", "model_id": "m", "max_new_tokens": 384, "temperature": 0.0}
    fingerprints = {prompt_fingerprint(**base),
                    prompt_fingerprint(**{**base, "backend": "transformers"}),
                    prompt_fingerprint(**{**base, "model_id": "other"}),
                    prompt_fingerprint(**{**base, "max_new_tokens": 64}),
                    prompt_fingerprint(**{**base, "temperature": 0.7})}
    assert len(fingerprints) == 5 and prompt_fingerprint(**base) == prompt_fingerprint(**dict(base))
    assert all(len(fp) == 64 for fp in fingerprints)
