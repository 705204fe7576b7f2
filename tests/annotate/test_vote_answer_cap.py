"""A hostile or rambling annotator cannot blow up the answers table, and what is kept stays readable."""

from __future__ import annotations

from fairsets.annotate.vote.ask import MAX_ANSWER_CHARS, _kept
from fairsets.annotate.vote.prompts import build_question, parse_answer


def test_long_answers_keep_their_start_and_their_end() -> None:
    question = build_question("gender", "00000/k/0", 0, annotator="a")
    letter = next(L for L, lab in question.options.items() if lab == "female")
    reply = "<think>" + "hmm " * 50_000 + "</think>\n" + letter
    assert parse_answer(reply, question) == ("female", "ok")  # parsed from the whole reply
    stored = _kept(reply)
    assert len(stored) < MAX_ANSWER_CHARS + 100
    assert stored.startswith("<think>hmm") and stored.endswith("</think>\n" + letter)
    assert f"[{len(reply) - MAX_ANSWER_CHARS} characters not stored]" in stored
    assert _kept("B") == "B" and _kept(None) is None
    assert _kept("x" * MAX_ANSWER_CHARS) == "x" * MAX_ANSWER_CHARS
