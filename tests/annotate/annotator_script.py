"""Scripted multimodal annotators on loopback: they look at the image they are sent and answer.

:class:`Annotator` wraps one :class:`openai_server.OpenAIServer` (real HTTP). For a vote question
it reads the box's label back from the image's colour (:func:`ann_data.label_of_jpeg`), applies
its ``bias`` (true label → the label it answers), finds that label's letter among the shuffled
options *in the prompt text* (so the shuffle is exercised for real) and answers in one of several
honest formats (``B``, ``b.``, ``**B**``, ``Answer: B``). ``invalid`` and ``refuse`` name items it
answers with chatter or declines; ``script`` prepends scripted failures (429 with Retry-After,
500s, timeouts) consumed by the first requests. A caption request gets ``"A person in <label>."``;
a judge request gets ``judge(prompt_text)`` (default ``"Verdict: 1"``).
"""

from __future__ import annotations

import base64
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ann_data import label_of_jpeg

from fairsets.annotate.vote.prompts import OPTIONS
from openai_server import OpenAIServer, Step, last_user_text

_FORMATS = ("{L}", "{l}.", "**{L}**", "Answer: {L}", "{L}) {text}")
_OPTION_LINE = re.compile(r"^([A-Z])\. (.+)$", re.M)


def _image(body: dict[str, Any]) -> bytes | None:
    for msg in body.get("messages", []):
        content = msg.get("content")
        for part in content if isinstance(content, list) else []:
            url = (part.get("image_url") or {}).get("url", "") if isinstance(part, dict) else ""
            if url.startswith("data:"):
                return base64.b64decode(url.partition(",")[2])
    return None


class Annotator:
    """One scripted annotator (see the module docstring); use as a context manager."""

    def __init__(
        self,
        name: str,
        attribute: str = "gender",
        *,
        bias: dict[str, str] | None = None,
        answer: Callable[[str, bytes], str | None] | None = None,
        invalid: Sequence[str] = (),
        refuse: Sequence[str] = (),
        refuse_field: Sequence[str] = (),
        script: Sequence[Step] = (),
        delay: float = 0.0,
        judge: Callable[[str], str] | None = None,
        image_dir: Path | None = None,
    ) -> None:
        self.name = name
        self.attribute = attribute
        self.bias = dict(bias or {})
        self.custom = answer  # (true label, image) -> label to answer, or None: use bias
        self.invalid, self.refuse, self.refuse_field = set(invalid), set(refuse), set(refuse_field)
        self.delay = delay
        self.judge = judge or (lambda text: "Verdict: 1")
        self.labels = [lab for lab, _ in OPTIONS[attribute][1]]
        self.texts = dict(OPTIONS[attribute][1])
        self.server = OpenAIServer(image_dir=image_dir)
        self.server.script = list(script)
        self.server.respond = self._respond
        self.answers = 0

    # the box's labels are painted in their colours over the palette of the attribute's labels
    def truth(self, image: bytes) -> str:
        return label_of_jpeg(image, self.labels)

    def _respond(self, body: dict[str, Any]) -> Step | None:
        with self.server._lock:
            if self.server.script:
                return None  # scripted failures first
            self.answers += 1
            n = self.answers
        text = last_user_text(body)
        image = _image(body)
        if "Verdict" in text or "Caption 1" in text:
            return Step(text=self.judge(text), delay=self.delay)
        options = dict(_OPTION_LINE.findall(text))
        if not options or image is None:
            true = self.truth(image) if image is not None else "nobody"
            return Step(text=f"A person in {true}.", delay=self.delay)
        true = self.truth(image)
        said = self.custom(true, image) if self.custom else None
        said = said or self.bias.get(true, true)
        tag = f"{true}:{n}"
        if true in self.invalid or tag in self.invalid:
            return Step(text="The person seems to be standing near a wall.", delay=self.delay)
        if true in self.refuse or tag in self.refuse:
            return Step(text="I'm sorry, I can't help with that.", delay=self.delay)
        if true in self.refuse_field or tag in self.refuse_field:
            return Step(refusal="I cannot identify people.", delay=self.delay)
        letter = next(L for L, t in options.items() if t == self.texts[said])
        fmt = _FORMATS[n % len(_FORMATS)]
        return Step(text=fmt.format(L=letter, l=letter.lower(), text=self.texts[said]), delay=self.delay)

    @property
    def base_url(self) -> str:
        return self.server.base_url

    def table(self, model: str | None = None, **extra: Any) -> str:
        """This annotator's ``[annotators.NAME]`` table for an annotators.toml."""
        lines = [
            f"[annotators.{self.name}]",
            f'base_url = "{self.base_url}"',
            f'model = "{model or self.name}-vl"',
        ]
        lines += [f"{k} = {v!r}" if not isinstance(v, str) else f'{k} = "{v}"' for k, v in extra.items()]
        return "\n".join(lines) + "\n"

    def __enter__(self) -> Annotator:
        self.server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.stop()


def annotators_toml(path: Path, annotators: Sequence[Annotator], **extra: Any) -> Path:
    """Write an annotators.toml naming every annotator (``extra`` settings in each table)."""
    path.write_text("\n".join(a.table(**extra) for a in annotators))
    return path
