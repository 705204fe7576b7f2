"""The card sections of the Hugging Face dataset card template that a person may have to write.

Both cards (a build's and an annotation folder's) follow the template headings of
``huggingface_hub``'s ``datasetcard_template.md``: Uses (Direct Use, Out-of-Scope Use), Source Data
(Who are the source data producers?), Annotations (Annotation process, Who are the annotators?),
Personal and Sensitive Information, Bias, Risks and Limitations (Recommendations), Maintenance and
versioning, Dataset Card Contact. What fairsets knows it writes; what only a person knows comes
from the person-written facts (:class:`fairsets.publish.rai_text.RaiText`), and where they are
missing the section shows :data:`PLACEHOLDER`, the template's own placeholder, followed by where to
write it, so ``fairsets card lint`` finds it and ``fairsets publish`` refuses it unless told.

Person text is data: each line is escaped by :func:`~fairsets.publish.card.md_text` (one line,
no markup); a list becomes bullets.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..rai_text import as_lines
from .markdown import Md, md_text

__all__ = ["OUT_OF_SCOPE", "PLACEHOLDER", "RECOMMENDATIONS", "person_block", "person_sections"]

#: The dataset card template's placeholder; ``fairsets card lint`` lists every section holding it.
PLACEHOLDER = "[More Information Needed]"

#: Uses fairsets always names as out of scope for a dataset about people.
OUT_OF_SCOPE = (
    "Identifying people, or linking an image to a person's identity.",
    "Inferring the sensitive attributes (gender, ethnicity, origin, …) of an individual.",
    "Surveillance, targeting or excluding people, or any decision about a person.",
)
#: Recommendations fairsets always gives.
RECOMMENDATIONS = (
    "Report results per group and with the counts they rest on, not only overall.",
    "Read the group labels as the annotations they are (see Annotations), not as facts about people.",
    "Check the bias and limitation notes above against your use before you rely on the data.",
)


def person_block(value: Any, where: str, *, fixed: tuple[str, ...] = (), required: bool = False) -> Md:
    """A section's Markdown: ``fixed`` lines (fairsets' own), then the person's text; the
    placeholder naming ``where`` to write it when there is no person text and either ``required``
    or nothing else to show."""
    person = as_lines(value)
    lines = [md_text(x) for x in (*fixed, *person)]
    if not person and (required or not lines):
        lines.append(f"{PLACEHOLDER} (write it in {md_text(where)})")
    if len(lines) == 1:
        return Md(lines[0])
    return Md("\n".join(f"- {x}" for x in lines))


def person_sections(
    person: Mapping[str, Any],
    where: str,
    *,
    contact: Any = None,
    producers: tuple[str, ...] = (),
    annotators: tuple[str, ...] = (),
    annotators_required: bool = True,
) -> dict[str, Md]:
    """The person-written sections of a card, ``where`` naming the place they are written
    (``[publish.rai]`` of the recipe, or the ``--rai`` file); ``producers`` and ``annotators`` are
    what fairsets knows of who made the source data and the labels."""

    def at(field: str) -> str:
        return f"{where} {field}"

    return {
        "direct_use": person_block(person.get("data_use_cases"), at("data_use_cases")),
        "out_of_scope": person_block(
            person.get("out_of_scope_uses"), at("out_of_scope_uses"), fixed=OUT_OF_SCOPE
        ),
        "social_impact": person_block(person.get("data_social_impact"), at("data_social_impact")),
        "annotators": person_block(
            person.get("annotator_demographics"),
            at("annotator_demographics"),
            fixed=annotators,
            required=annotators_required,
        ),
        "recommendations": person_block(
            person.get("recommendations"), at("recommendations"), fixed=RECOMMENDATIONS
        ),
        "maintenance": person_block(
            person.get("data_release_maintenance_plan"), at("data_release_maintenance_plan")
        ),
        "contact": person_block(person.get("contact") or contact, at("contact")),
        "producers": person_block(
            person.get("source_data_producers"), at("source_data_producers"), fixed=producers
        ),
    }
