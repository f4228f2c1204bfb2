"""The Italian prompt that asks for one question about a passage, and the JSON it asks for.

The model is asked for exactly one JSON object {"domanda", "risposta", "evidenza"} (question, short answer, an exact
quote of the passage that contains the answer); the English keys {question, answer, evidence} are accepted too.
A passage that crosses a block or page break is shown as two parts, and the model is asked to quote across them.
`prompt_hash` identifies the templates in the sidecar and in cache keys (any edit changes it).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from ..io import sha256_text, stable_json
from .sampling import Passage

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
KEYS = {"question": ("domanda", "question"), "answer": ("risposta", "answer"), "evidence": ("evidenza", "evidence")}


def prompt_hash() -> str:
    """sha256 (16 hex digits) of the prompt templates and their version."""
    return sha256_text(stable_json({"version": PROMPT_VERSION, "single": SINGLE, "spanning": SPANNING}))[:16]


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


_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.S)


def parse_generation(text: str) -> Generated | None:
    """The first JSON object in the model's answer (a ```json fence allowed) with a non-empty string for each of
    question, answer and evidence (Italian or English keys); None when there is none."""
    fenced = _FENCE.search(text)
    candidates = [fenced.group(1)] if fenced else []
    candidates.append(text)
    decoder = json.JSONDecoder()
    for body in candidates:
        start = body.find("{")
        while start >= 0:
            try:
                value, _ = decoder.raw_decode(body, start)
            except ValueError:
                start = body.find("{", start + 1)
                continue
            found = _fields(value)
            if found is not None:
                return found
            start = body.find("{", start + 1)
    return None


def _fields(value: object) -> Generated | None:
    if not isinstance(value, dict):
        return None
    lowered = {str(k).strip().casefold(): v for k, v in value.items()}
    out = {}
    for field, names in KEYS.items():
        found = next((lowered[n] for n in names if n in lowered), None)
        if not isinstance(found, str) or not found.strip():
            return None
        out[field] = found.strip()
    return Generated(**out)
