"""The Italian prompts that ask for one question, and the JSON they ask for: FROM_EVIDENCE (`--evidence-by code`,
the model writes {"domanda", "risposta"} about the code-chosen evidence) and SINGLE, SPANNING (`--evidence-by
model`, the model also quotes the evidence); see docs/make-qa.md (The prompt). `prompt_hash` identifies the templates
of one way in the sidecar and in cache keys (any edit changes it).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace

from ragstudy.io import sha256_text, stable_json
from ragstudy.qagen.sampling import Passage

PROMPT_VERSION = "make-qa-it-v1"

SINGLE = (
    "Sei un esperto che prepara domande d'esame su un documento tecnico.\n"
    "Leggi il passaggio seguente, tratto dal documento «{pdf}» (pagina {page}).\n\n"
    "PASSAGGIO:\n\"\"\"\n{passage}\n\"\"\"\n\n"
    "Scrivi UNA domanda in italiano a cui il passaggio risponde, come la farebbe un utente che non ha il testo "
    "davanti: usa parole tue, non copiare frasi del passaggio. Non chiedere di titoli, numeri di pagina, "
    "intestazioni o indici.\n"
    "Poi scrivi la risposta breve e corretta, e copia ESATTAMENTE dal passaggio la frase (o le frasi) che "
    "contengono la risposta, senza cambiare nessuna parola.\n"
    "Rispondi solo con un oggetto JSON, senza altro testo:\n"
    "{{\"domanda\": \"...\", \"risposta\": \"...\", \"evidenza\": \"...\"}}"
)
SPANNING = (
    "Sei un esperto che prepara domande d'esame su un documento tecnico.\n"
    "Leggi il passaggio seguente, tratto dal documento «{pdf}» (pagine {page}); è diviso in due parti "
    "consecutive del testo.\n\n"
    "PRIMA PARTE:\n\"\"\"\n{first}\n\"\"\"\n\nSECONDA PARTE:\n\"\"\"\n{second}\n\"\"\"\n\n"
    "Scrivi UNA domanda in italiano la cui risposta richieda sia la fine della prima parte sia l'inizio della "
    "seconda, come la farebbe un utente che non ha il testo davanti: usa parole tue, non copiare frasi del "
    "passaggio. Non chiedere di titoli, numeri di pagina, intestazioni o indici.\n"
    "Poi scrivi la risposta breve e corretta, e copia ESATTAMENTE dal passaggio il testo che contiene la risposta "
    "(dalla prima parte fino alla seconda), senza cambiare nessuna parola.\n"
    "Rispondi solo con un oggetto JSON, senza altro testo:\n"
    "{{\"domanda\": \"...\", \"risposta\": \"...\", \"evidenza\": \"...\"}}"
)
FROM_EVIDENCE_VERSION = "make-qa-it-evidence-v1"
FROM_EVIDENCE = (  # the answer first: a small model then asks for that fact instead of something vaguer. No
    # worked example: Qwen2.5-Coder-0.5B copied one into its items (make-qa on the bundled sample, 2 of 3 drafts)
    "Testo tratto dal documento «{pdf}»:\n\"\"\"\n{evidence}\n\"\"\"\n\n"
    "Scegli un'informazione precisa di questo testo: sarà la risposta, breve e presa dal testo. Poi scrivi in "
    "italiano la domanda che un utente farebbe per ottenere proprio quella risposta, senza avere il testo davanti: "
    "usa parole tue e sinonimi, non copiare le frasi del testo. Non chiedere di titoli, numeri di pagina o indici.\n"
    "Rispondi solo con JSON: {{\"risposta\": \"...\", \"domanda\": \"...\"}}"
)
ROUND_TRIP = (  # make-qa's check of a draft: its own question asked again with only the evidence (filters.round_trip)
    "Testo:\n\"\"\"\n{evidence}\n\"\"\"\n\n"
    "Domanda: {question}\n"
    "Rispondi in italiano con la sola informazione richiesta, presa dal testo, in poche parole."
)
ROUND_TRIP_TOKENS = 64  # generation limit of a round-trip answer (a short answer; the study's own is 512)
EVIDENCE_BY = ("code", "model")
KEYS = {"question": ("domanda", "question"), "answer": ("risposta", "answer"), "evidence": ("evidenza", "evidence")}


def prompt_version(evidence_by: str = "code") -> str:
    return FROM_EVIDENCE_VERSION if evidence_by == "code" else PROMPT_VERSION


def prompt_hash(evidence_by: str = "code") -> str:
    """sha256 (16 hex digits) of the prompt templates of one way to draft (EVIDENCE_BY) and their version."""
    templates = ({"version": FROM_EVIDENCE_VERSION, "template": FROM_EVIDENCE} if evidence_by == "code" else
                 {"version": PROMPT_VERSION, "single": SINGLE, "spanning": SPANNING})
    return sha256_text(stable_json({**templates, "round_trip": ROUND_TRIP}))[:16]


def build_evidence_prompt(passage: Passage, evidence: str) -> str:
    """The prompt that shows only the code-chosen evidence of a passage (FROM_EVIDENCE)."""
    return FROM_EVIDENCE.format(pdf=passage.pdf, evidence=evidence)


def build_prompt(passage: Passage) -> str:
    """The prompt for one passage (SPANNING for a passage of two parts)."""
    if len(passage.spans) == 1:
        return SINGLE.format(pdf=passage.pdf, page=passage.page, passage=passage.text)
    cut = passage.spans[0][1] - passage.spans[0][0]
    pages = "-".join(str(p) for p in passage.pages)
    return SPANNING.format(pdf=passage.pdf, page=pages, first=passage.text[:cut], second=passage.text[cut + 1:])


_QUOTED = re.compile(r'"""\n(.*?)\n"""', re.S)


def passage_parts(prompt: str) -> list[str]:
    """The passage text (one part, or two for a spanning passage) a prompt of these templates shows."""
    return _QUOTED.findall(prompt)


@dataclass(frozen=True)
class Generated:
    question: str
    answer: str
    evidence: str
    backslashes_as_written: bool = False  # parsed only once every backslash was read as the character itself


_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.S)
_ESCAPE = re.compile(r'\\(.)', re.S)
# what `\thispagestyle`, `\begin`, `\fbox` or `\ref` become when read as JSON escapes
_CONTROL = re.compile(r"[\t\b\f\r]")
_COMMAND = re.compile(r"\\[A-Za-z]{2,}")  # `\notag`, `\newpage`: a JSON reader makes them a line break and a word


def literal_backslashes(text: str) -> str:
    """The text with each backslash that does not start `\\"`, `\\\\` or `\\/` doubled: a model quoting a LaTeX command
    (`\\leftmargin`) or a Windows path writes JSON that no parser reads."""
    return _ESCAPE.sub(lambda m: m.group(0) if m.group(1) in '"\\/' else "\\\\" + m.group(1), text)


def parse_generation(text: str, evidence: str | None = None) -> Generated | None:
    """The first JSON object in the model's answer (a ```json fence allowed) with a non-empty string for each of
    question, answer and evidence (Italian or English keys); None when there is none. With `evidence` (chosen by
    the code) the object needs only question and answer, and the evidence is that text whatever the model wrote.
    When nothing parses as written, or what parses holds a tab, backspace, form feed or carriage return (a LaTeX
    command read as an escape), or the text quotes a backslash command that the evidence holds as written
    (`\\notag` read as a line break and "otag"), the backslashes are read as written (`backslashes_as_written`)."""
    found = _first_object(text, evidence)
    quoted = evidence is not None and any(command in evidence for command in _COMMAND.findall(text))
    if "\\" in text and (found is None or quoted or _CONTROL.search(found.question + found.answer)):
        literal = _first_object(literal_backslashes(text), evidence)
        if literal is not None and (found is None or (literal.question, literal.answer) != (found.question,
                                                                                            found.answer)):
            found = replace(literal, backslashes_as_written=True)
    return found


def _first_object(text: str, evidence: str | None) -> Generated | None:
    fenced = _FENCE.search(text)
    decoder = json.JSONDecoder()
    for body in ([fenced.group(1)] if fenced else []) + [text]:
        for start in (i for i, ch in enumerate(body) if ch == "{"):
            try:
                found = _fields(decoder.raw_decode(body, start)[0], evidence)
            except ValueError:
                continue
            if found is not None:
                return found
    return None


def _fields(value: object, evidence: str | None = None) -> Generated | None:
    if not isinstance(value, dict):
        return None
    lowered = {str(k).strip().casefold(): v for k, v in value.items()}
    given = {} if evidence is None else {"evidence": evidence}
    found = {field: next((lowered[n] for n in names if n in lowered), None)
             for field, names in KEYS.items() if field not in given}
    if not all(isinstance(text, str) and text.strip() for text in found.values()):
        return None
    return Generated(**{field: text.strip() for field, text in found.items()}, **given)
