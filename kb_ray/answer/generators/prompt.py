"""The prompt every model generator sends, and ``ChatGenerator``, the base they share.

``answer_messages`` is a system message (answer only from the passages, cite every sentence
with ``[n]`` using only the given numbers, else reply with exactly ``settings.refusal``) and
a user message holding the numbered passages (``[n] title, page p: quote``), a mode line
(qa / summary / compare) and the question. ``repair_messages`` continues that conversation
with the model's answer and a user turn listing each flagged sentence with its problem
(``no_citation`` / ``unknown_citation`` / ``unsupported``), asking for a corrected whole
answer against the same passages. A backend without a chat template gets the same
messages as plain text (:func:`plain_prompt`).

``prompt_fingerprint`` is the sha256 of what changes the output: backend, model id, every
template text below, ``max_new_tokens`` and ``temperature``.
"""

from __future__ import annotations

import hashlib
import json
import time

from kb_ray.answer.types import AnswerMode, Generation, Passage, Sentence
from kb_ray.config import AnswerSettings

SYSTEM_TEMPLATE = """You answer questions about documents using ONLY the numbered evidence passages given below.
Rules:
1. State only what the passages say. Do not use outside knowledge and do not guess.
2. End every sentence with the number of the passage that supports it, in square brackets, like [1] or [1][3].
3. Use only these passage numbers: {numbers}. Never invent a number.
4. Cite a passage only when it states what your sentence says.
5. If the passages do not answer the question, reply with exactly this sentence and nothing else: {refusal}
6. No preamble, no headings, no list of sources at the end."""

USER_TEMPLATE = """Evidence passages:
{passages}

Task: {instruction}
Question: {question}"""

MODE_INSTRUCTIONS: dict[str, str] = {
    "qa": "Answer the question in a few short sentences, each one cited.",
    "summary": "Write one short paragraph that summarises what the passages say about the topic, each sentence cited.",
    "compare": "Compare what the passages say about each document on the topic; name the document in every "
               "sentence, and say 'not stated' where a document's passages say nothing about it.",
}

REPAIR_TEMPLATE = """These sentences of your answer failed the citation check:
{flagged}

Rewrite the WHOLE answer using the same evidence passages. Keep the sentences that passed. Fix or drop each flagged
sentence: cite the passage that states it, say only what the cited passage states, and use only the numbers {numbers}.
If the passages do not answer the question, reply with exactly: {refusal}"""

PROBLEMS: dict[str, str] = {
    "no_citation": "it has no [n] citation",
    "unknown_citation": "it cites a number that was not given",
    "unsupported": "the passage it cites does not state this",
}
_PROBLEM_FALLBACK = "it failed verification"


def format_passage(passage: Passage) -> str:
    """``[n] title, page p: quote`` (``pages p-q`` over several pages), then its context line if any."""
    where = [passage.title or passage.document_id]
    if passage.pages:
        first, last = min(passage.pages), max(passage.pages)
        where.append(f"page {first}" if first == last else f"pages {first}-{last}")
    text = f"[{passage.n}] {', '.join(where)}: {_one_line(passage.quote)}"
    if passage.context:
        text += f"\n    (surrounding text, do not cite: {_one_line(passage.context)})"
    return text


def answer_messages(*, question: str, passages: list[Passage], mode: AnswerMode,
                    refusal: str) -> list[dict[str, str]]:
    """The system + user messages of a first answer."""
    numbers = _numbers(passages)
    system = SYSTEM_TEMPLATE.format(numbers=numbers, refusal=refusal)
    user = USER_TEMPLATE.format(passages="\n".join(format_passage(p) for p in passages) or "(none)",
                                instruction=MODE_INSTRUCTIONS[mode], question=question.strip())
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def repair_messages(*, question: str, passages: list[Passage], mode: AnswerMode, refusal: str, answer: str,
                    flagged: list[Sentence]) -> list[dict[str, str]]:
    """The first answer's conversation, the model's answer, and the list of flagged sentences."""
    listed = "\n".join(f"- \"{s.text.strip()}\": {_problem(s, passages)}" for s in flagged) or "- (none)"
    request = REPAIR_TEMPLATE.format(flagged=listed, numbers=_numbers(passages), refusal=refusal)
    return [*answer_messages(question=question, passages=passages, mode=mode, refusal=refusal),
            {"role": "assistant", "content": answer}, {"role": "user", "content": request}]


def plain_prompt(messages: list[dict[str, str]]) -> str:
    """The messages as one text prompt, for a tokenizer without a chat template."""
    turns = [f"{m['role'].capitalize()}: {m['content']}" for m in messages]
    return "\n\n".join([*turns, "Assistant:"])


def prompt_fingerprint(*, backend: str, model_id: str | None, max_new_tokens: int, temperature: float) -> str:
    parts = {"backend": backend, "model_id": model_id, "max_new_tokens": max_new_tokens, "temperature": temperature,
             "templates": [SYSTEM_TEMPLATE, USER_TEMPLATE, REPAIR_TEMPLATE, MODE_INSTRUCTIONS, PROBLEMS]}
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode("utf-8")).hexdigest()


class ChatGenerator:
    """A :class:`~kb_ray.answer.types.Generator` over chat messages; a backend implements
    :meth:`complete` (messages -> Generation without cost) and sets ``backend``."""

    backend = "chat"

    def __init__(self, settings: AnswerSettings, *, model: str | None) -> None:
        self.settings = settings
        self.model = model
        self.fingerprint = prompt_fingerprint(backend=self.backend, model_id=model,
                                              max_new_tokens=settings.max_new_tokens,
                                              temperature=settings.temperature)

    def generate(self, *, question: str, passages: list[Passage], mode: AnswerMode) -> Generation:
        return self.run(answer_messages(question=question, passages=passages, mode=mode,
                                        refusal=self.settings.refusal))

    def repair(self, *, question: str, passages: list[Passage], mode: AnswerMode, answer: str,
               flagged: list[Sentence]) -> Generation:
        return self.run(repair_messages(question=question, passages=passages, mode=mode,
                                        refusal=self.settings.refusal, answer=answer, flagged=flagged))

    def complete(self, messages: list[dict[str, str]]) -> Generation:
        """One completion of ``messages``: text (or an error code) and token counts."""
        raise NotImplementedError

    def complete_batch(self, conversations: list[list[dict[str, str]]]) -> list[Generation]:
        """Several completions; a backend that batches (vLLM) overrides this."""
        return [self.complete(messages) for messages in conversations]

    def run(self, messages: list[dict[str, str]]) -> Generation:
        started = time.perf_counter()
        return self.priced(self.complete(messages), seconds=time.perf_counter() - started)

    def priced(self, result: Generation, *, seconds: float) -> Generation:
        """``result`` with its wall time, its cost from the configured prices, and stripped text."""
        s = self.settings
        cost = (result.prompt_tokens * s.price_per_1k_prompt_tokens
                + result.completion_tokens * s.price_per_1k_completion_tokens) / 1000
        return Generation(text=result.text.strip() if result.error is None else "", error=result.error,
                          prompt_tokens=result.prompt_tokens, completion_tokens=result.completion_tokens,
                          seconds=seconds, cost_usd=cost)

    def close(self) -> None:
        """Release clients or models (idempotent)."""


def _numbers(passages: list[Passage]) -> str:
    return ", ".join(f"[{p.n}]" for p in passages) or "(none)"


def _problem(sentence: Sentence, passages: list[Passage]) -> str:
    given = {p.n for p in passages}
    problem = PROBLEMS.get(sentence.problem or "", _PROBLEM_FALLBACK)
    if sentence.problem == "unknown_citation":
        unknown = [n for n in sentence.citations if n not in given]
        problem += f" ({', '.join(f'[{n}]' for n in unknown)})" if unknown else ""
    elif sentence.problem == "unsupported" and sentence.citations:
        problem += f" ({', '.join(f'[{n}]' for n in sentence.citations)})"
    return f"{sentence.problem or 'flagged'}: {problem}"


def _one_line(text: str) -> str:
    return " ".join(text.split())
