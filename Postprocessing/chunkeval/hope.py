"""HOPE: annotation-free evaluation of text chunks (Brådland et al., "A New HOPE: Domain-agnostic Automatic
Evaluation of Text Chunking", 2025), with Italian prompts and the study's own LLM and embedding model.

- concept unity (intrinsic): per sampled passage the LLM writes Q questions about it; the passage's score is the
  mean cosine of each question embedding to the questions' centroid, clipped to [0, 1];
- semantic independence (extrinsic): each question is answered once from the focus passage alone and once from
  the focus passage plus the most similar other passages (a small RAG); the score is the cosine of the two
  answers' embeddings, clipped to [0, 1]; a passage that needs no other passage scores high;
- information preservation (passage-document): sentence windows are sampled from the document; the LLM writes
  one true and three false statements about a window; passages are retrieved with the true statement; given
  those passages the LLM must pick the true statement; the score is the accuracy;
- the aggregate is the weighted mean of the three.

Differences from the reference implementation, on purpose: sampling is seeded (numpy default_rng), legitimate
0.0 scores are kept in the averages, and an LLM output that cannot be parsed is counted as a parse failure and
left out of the mean (never scored as 0). The LLM is any callable prompt -> text, so tests inject a fake.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

import numpy as np

logger = logging.getLogger(__name__)

LLM = Callable[[str], str]

CONCEPT_UNITY = "concept_unity"
SEMANTIC_INDEPENDENCE = "semantic_independence"
INFORMATION_PRESERVATION = "information_preservation"
MEASURES = (CONCEPT_UNITY, SEMANTIC_INDEPENDENCE, INFORMATION_PRESERVATION)
AGGREGATE = "hope"

QUESTIONS_PROMPT = (
    "Leggi il testo seguente e scrivi {n} domande diverse a cui il testo risponde. Scrivi solo le domande, una "
    "per riga, numerate (1., 2., ...), senza risposte.\n\nTesto:\n{passage}"
)
ANSWER_PROMPT = (
    "Usa solo il contesto seguente per rispondere alla domanda con una o due frasi.\n\nContesto:\n{context}\n\n"
    "Domanda: {question}"
)
STATEMENTS_PROMPT = (
    "Leggi il testo seguente. Scrivi un'affermazione VERA secondo il testo e tre affermazioni FALSE (plausibili "
    "ma contraddette dal testo). Usa esattamente questo formato, una per riga:\nVERA: ...\nFALSA: ...\n"
    "FALSA: ...\nFALSA: ...\n\nTesto:\n{window}"
)
CHOICE_PROMPT = (
    "Contesto:\n{context}\n\nQuale delle seguenti affermazioni è vera secondo il contesto? Rispondi solo con la "
    "lettera.\n{options}"
)
LETTERS = "ABCD"


class Embedder(Protocol):
    def embed_documents(self, texts: list[str]) -> list[list[float]]: ...

    def embed_query(self, text: str) -> list[float]: ...


@dataclass(frozen=True)
class HopeSettings:
    """Sample sizes and limits; the defaults keep 3 strategies x 3 documents under 15 min with SmolLM2 on CPU."""

    passages: int = 4  # focus passages sampled per strategy (concept unity, semantic independence)
    questions: int = 3  # questions the LLM writes per passage
    si_questions: int = 2  # of those, how many are answered twice for semantic independence
    rag_passages: int = 2  # other passages retrieved (semantic independence, information preservation)
    windows: int = 4  # sentence windows sampled (information preservation), shared by all strategies
    window_sentences: int = 3
    min_window_chars: int = 80
    max_passage_chars: int = 1200  # passages are cut to this length inside prompts (bounds prompt cost)
    seed: int = 0
    weights: tuple[float, float, float] = (1.0, 1.0, 1.0)  # concept unity, semantic independence, info pres.
    # max_new_tokens per kind of call (the LLM's own limit applies when it is a plain callable)
    question_tokens: int = 72
    answer_tokens: int = 40
    statement_tokens: int = 120
    choice_tokens: int = 8

    def __post_init__(self) -> None:
        for name in ("passages", "questions", "si_questions", "rag_passages", "windows", "window_sentences"):
            if getattr(self, name) < 0:
                raise ValueError(f"HOPE setting {name} must be >= 0, got {getattr(self, name)}")
        if self.questions and self.questions < 2:
            raise ValueError("HOPE concept unity needs at least 2 questions per passage (--hope-questions)")
        if len(self.weights) != 3 or any(w < 0 for w in self.weights) or sum(self.weights) <= 0:
            raise ValueError(f"HOPE weights must be 3 non-negative numbers, not all 0; got {self.weights}")


@dataclass(frozen=True)
class HopeLLMs:
    """One callable per kind of call, so each can have its own output length."""

    questions: LLM
    answer: LLM
    statements: LLM
    choice: LLM

    @classmethod
    def single(cls, llm: LLM) -> "HopeLLMs":
        return cls(llm, llm, llm, llm)


class TokenLimited:
    """A CachedGenerator called with its own max_new_tokens (part of the cache key, so answers stay separate).

    The settings travel with each request; the shared generator's own settings are never changed.
    """

    def __init__(self, generator, max_new_tokens: int) -> None:  # generator: ragstudy CachedGenerator
        self.generator = generator
        self.params = replace(generator.params, max_new_tokens=max_new_tokens)

    def __call__(self, prompt: str) -> str:
        return self.generator(prompt, params=self.params)


def llms_from_generator(generator, settings: HopeSettings) -> HopeLLMs:
    return HopeLLMs(TokenLimited(generator, settings.question_tokens), TokenLimited(generator, settings.answer_tokens),
                    TokenLimited(generator, settings.statement_tokens),
                    TokenLimited(generator, settings.choice_tokens))


@dataclass(frozen=True)
class Passage:
    doc_id: str
    document: str
    text: str


@dataclass(frozen=True)
class HopeItem:
    """One scored (or failed) item: a passage for concept unity / semantic independence, a window for IP."""

    strategy: str
    measure: str
    item: str  # passage doc_id, or "<document>#<window index>"
    score: float | None  # None when the item failed
    failure: str = ""  # why it failed (parse failure, empty answer), "" when scored
    detail: str = ""


# --------------------------------------------------------------------------------------------------- parsing

_NUMBERING = re.compile(r"^\s*(?:(?:domanda|d)\s*\d*\s*[:.)-]|\d+\s*[.):-]|[-*•·]|\(\d+\))\s*", re.IGNORECASE)
_TRUE_LABEL = re.compile(r"^\s*(?:\d+\s*[.)]\s*)?\**\s*(?:vera|vero|true|v)\s*\d*\s*\**\s*[:.)-]\s*\**\s*",
                         re.IGNORECASE)
_FALSE_LABEL = re.compile(r"^\s*(?:\d+\s*[.)]\s*)?\**\s*(?:falsa|falso|false|f)\s*\d*\s*\**\s*[:.)-]\s*\**\s*",
                          re.IGNORECASE)


def _clean_line(line: str) -> str:
    return _NUMBERING.sub("", line).strip().strip("*").strip()


_INTERROGATIVE = re.compile(r"^(?:chi|che|cosa|come|dove|quando|qual|quale|quali|quanto|quanta|quanti|quante|"
                            r"perché|perche|in che|in quale|per quale|a cosa|a chi|di cosa|con cosa|da chi)\b",
                            re.IGNORECASE)
_LISTED = re.compile(r"^\s*(?:\d+\s*[.):-]|[-*•·]|\(\d+\))\s*")


def is_question(text: str) -> bool:
    """A question: it ends with '?' or starts with an Italian interrogative word (an echo of the passage is not)."""
    return text.rstrip().endswith("?") or bool(_INTERROGATIVE.match(text.strip()))


def parse_questions(text: str, limit: int) -> list[str]:
    """Questions from an LLM output: numbered or bulleted lines, or several '?' sentences on one line.

    Only questions count (see `is_question`); fragments under three words and duplicates are dropped; at most
    `limit` are returned. Missing items simply make the list shorter.
    """
    candidates: list[str] = []
    for line in text.splitlines():
        line = _clean_line(line)
        if line.count("?") > 1:
            candidates += [_clean_line(part) + "?" for part in line.split("?") if part.strip()]
        elif line:
            candidates.append(line)
    questions, seen = [], set()
    for question in candidates:
        key = " ".join(question.casefold().split())
        if len(question.split()) >= 3 and is_question(question) and key not in seen:
            seen.add(key)
            questions.append(question)
    return questions[:limit]


def parse_statements(text: str) -> tuple[str | None, list[str]]:
    """(true statement, false statements) from an LLM output.

    Lines labelled VERA/FALSA (a label alone on its line labels the next line); without any label, numbered or
    bulleted lines: the first is taken as true, the next three as false (plain echoed text is not accepted).
    Statements under three words are dropped.
    """
    true, false = None, []
    listed: list[str] = []
    pending: str | None = None  # "true"/"false": a bare label waiting for its statement on the next line
    for line in text.splitlines():
        if not line.strip():
            continue
        kind = "true" if _TRUE_LABEL.match(line) else "false" if _FALSE_LABEL.match(line) else None
        if kind is not None:
            statement = (_TRUE_LABEL if kind == "true" else _FALSE_LABEL).sub("", line).strip()
            if not statement:
                pending = kind
                continue
        elif pending is not None:
            kind, statement = pending, _clean_line(line)
        else:
            statement = _clean_line(line)
            if _LISTED.match(line) and len(statement.split()) >= 3:
                listed.append(statement)
        pending = None
        if kind is None or len(statement.split()) < 3:
            continue
        if kind == "true" and true is None:
            true = statement
        elif kind == "false":
            false.append(statement)
    if true is None and not false and len(listed) >= 2:
        true, false = listed[0], listed[1:]
    false = [f for f in dict.fromkeys(false) if f != true]
    return true, false[:3]


def parse_choice(text: str, options: Sequence[str]) -> int | None:
    """Index of the option the LLM picked: a leading letter ("B", "B)", "(B)"), "risposta: B", or the text of
    exactly one option quoted in the answer. None when none of these is found."""
    letters = LETTERS[:len(options)]
    stripped = text.strip()
    match = re.match(rf"^\W*([{letters}])(?:\s*[).:\]-]|\s*$)", stripped)
    if match is None:
        match = re.search(rf"(?i:risposta|opzione|lettera|affermazione)(?:\s+(?i:corretta|giusta|vera|esatta))?"
                          rf"\s*(?:è|:)?\s*\(?([{letters}])(?:\W|$)", stripped)
    if match is not None:
        return letters.index(match.group(1))
    folded = " ".join(stripped.casefold().split())
    quoted = [i for i, option in enumerate(options) if " ".join(option.casefold().split()) in folded]
    return quoted[0] if len(quoted) == 1 else None


# ------------------------------------------------------------------------------------------------------ maths

def _unit(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=-1, keepdims=True)
    return vectors / np.where(norms == 0, 1.0, norms)


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    u, v = _unit(np.asarray([a, b], dtype=float))
    return float(u @ v)


def clip01(value: float) -> float:
    return float(min(1.0, max(0.0, value)))


def unity_score(vectors: Sequence[Sequence[float]]) -> float:
    """Mean cosine of each vector to their centroid, clipped to [0, 1] (HOPE's concept unity of one passage)."""
    unit = _unit(np.asarray(vectors, dtype=float))
    centroid = unit.mean(axis=0)
    norm = np.linalg.norm(centroid)
    if norm == 0:
        return 0.0
    return clip01(float((unit @ (centroid / norm)).mean()))


def weighted_mean(values: Sequence[float | None], weights: Sequence[float]) -> float | None:
    """Weighted mean of the values that exist; None when none does."""
    pairs = [(v, w) for v, w in zip(values, weights, strict=True) if v is not None and w > 0]
    total = sum(w for _, w in pairs)
    return sum(v * w for v, w in pairs) / total if total else None


# -------------------------------------------------------------------------------------------- sampling, text

def sample_indices(n: int, k: int, seed: int, salt: str = "") -> list[int]:
    """`k` distinct indices of range(n), seeded (the same strategy, seed and n give the same sample)."""
    if n <= 0 or k <= 0:
        return []
    entropy = [seed, *salt.encode("utf-8")]
    rng = np.random.default_rng(entropy)
    return sorted(int(i) for i in rng.choice(n, size=min(k, n), replace=False))


def split_sentences(text: str) -> list[str]:
    """Sentences: text up to . ! ? … followed by whitespace; a line break without one also ends a sentence."""
    sentences = []
    for block in re.split(r"\n\s*\n", text):
        flat = " ".join(block.split())
        for match in re.finditer(r".+?(?:[.!?…](?=\s|$)|$)", flat):
            sentence = match.group().strip()
            if sentence:
                sentences.append(sentence)
    return sentences


def sentence_windows(text: str, size: int, min_chars: int) -> list[str]:
    """Non-overlapping windows of `size` consecutive sentences with at least `min_chars` characters."""
    sentences = split_sentences(text)
    windows = [" ".join(sentences[i:i + size]) for i in range(0, len(sentences), max(1, size))]
    return [w for w in windows if len(w) >= min_chars]


def _clip_text(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit].rsplit(" ", 1)[0] + " …"


class PassageIndex:
    """Cosine search over a strategy's passages (numpy, in memory)."""

    def __init__(self, passages: Sequence[Passage], embedder: Embedder) -> None:
        self.passages = list(passages)
        self.embedder = embedder
        vectors = embedder.embed_documents([p.text for p in self.passages]) if self.passages else []
        self.vectors = _unit(np.asarray(vectors, dtype=float)) if self.passages else np.zeros((0, 1))

    def search(self, query: str, k: int, exclude: set[int] | None = None) -> list[int]:
        if k <= 0 or not self.passages:
            return []
        query_vector = _unit(np.asarray(self.embedder.embed_query(query), dtype=float))
        scores = self.vectors @ query_vector
        order = [int(i) for i in np.argsort(-scores, kind="stable") if int(i) not in (exclude or set())]
        return order[:k]


# ------------------------------------------------------------------------------------------------- measures

def passage_questions(passage: Passage, llms: HopeLLMs, settings: HopeSettings) -> tuple[list[str], str]:
    prompt = QUESTIONS_PROMPT.format(n=settings.questions, passage=_clip_text(passage.text, settings.max_passage_chars))
    output = llms.questions(prompt)
    return parse_questions(output, settings.questions), output


def concept_unity(strategy: str, passage: Passage, questions: list[str], embedder: Embedder) -> HopeItem:
    if len(questions) < 2:
        return HopeItem(strategy, CONCEPT_UNITY, passage.doc_id, None,
                        f"parse failure: {len(questions)} question(s) parsed, need 2")
    vectors = embedder.embed_documents(questions)
    return HopeItem(strategy, CONCEPT_UNITY, passage.doc_id, unity_score(vectors), detail=" | ".join(questions))


def semantic_independence(strategy: str, focus: int, index: PassageIndex, questions: list[str], llms: HopeLLMs,
                          embedder: Embedder, settings: HopeSettings) -> HopeItem:
    passage = index.passages[focus]
    asked = questions[:settings.si_questions]
    if not asked:
        return HopeItem(strategy, SEMANTIC_INDEPENDENCE, passage.doc_id, None, "parse failure: no question parsed")
    focus_text = _clip_text(passage.text, settings.max_passage_chars)
    scores, empty = [], 0
    for question in asked:
        others = index.search(question, settings.rag_passages, exclude={focus})
        rag_context = "\n\n".join([_clip_text(index.passages[i].text, settings.max_passage_chars) for i in others]
                                  + [focus_text])
        alone = llms.answer(ANSWER_PROMPT.format(context=focus_text, question=question)).strip()
        with_rag = llms.answer(ANSWER_PROMPT.format(context=rag_context, question=question)).strip()
        if not alone or not with_rag:
            empty += 1
            continue
        a, b = embedder.embed_documents([alone, with_rag])
        scores.append(clip01(cosine(a, b)))
    if not scores:
        return HopeItem(strategy, SEMANTIC_INDEPENDENCE, passage.doc_id, None,
                        f"empty answer to all {len(asked)} question(s)")
    return HopeItem(strategy, SEMANTIC_INDEPENDENCE, passage.doc_id, float(np.mean(scores)),
                    detail=f"{len(scores)} question(s), {empty} with an empty answer")


@dataclass(frozen=True)
class Window:
    document: str
    number: int  # index among the document's windows
    text: str

    @property
    def key(self) -> str:
        return f"{self.document}#{self.number}"


def statements_for(window: Window, llms: HopeLLMs, settings: HopeSettings) -> tuple[str | None, list[str]]:
    return parse_statements(llms.statements(STATEMENTS_PROMPT.format(window=window.text)))


def shuffled_options(true: str, false: Sequence[str], seed: int, key: str) -> tuple[list[str], int]:
    """The statements in a seeded order (the same for every strategy) and the index of the true one."""
    options = [true, *false]
    order = np.random.default_rng([seed, *key.encode("utf-8")]).permutation(len(options))
    shuffled = [options[i] for i in order]
    return shuffled, shuffled.index(true)


def information_preservation(strategy: str, window: Window, statements: tuple[str | None, list[str]],
                             index: PassageIndex, llms: HopeLLMs, settings: HopeSettings) -> HopeItem:
    true, false = statements
    if true is None or not false:
        return HopeItem(strategy, INFORMATION_PRESERVATION, window.key, None,
                        f"parse failure: statements ({'no' if true is None else 'a'} true, {len(false)} false)")
    options, answer = shuffled_options(true, false, settings.seed, window.key)
    hits = index.search(true, settings.rag_passages)
    context = "\n\n".join(_clip_text(index.passages[i].text, settings.max_passage_chars) for i in hits)
    listing = "\n".join(f"{LETTERS[i]}) {option}" for i, option in enumerate(options))
    picked = parse_choice(llms.choice(CHOICE_PROMPT.format(context=context, options=listing)), options)
    if picked is None:
        return HopeItem(strategy, INFORMATION_PRESERVATION, window.key, None, "parse failure: no option picked")
    return HopeItem(strategy, INFORMATION_PRESERVATION, window.key, float(picked == answer),
                    detail=f"{len(options)} options, picked {LETTERS[picked]}, true {LETTERS[answer]}")


def sample_windows(references: Sequence[tuple[str, str]], settings: HopeSettings) -> list[Window]:
    """Seeded sample of sentence windows from (document name, reference text) pairs (strategy-independent)."""
    pool = [Window(name, i, text) for name, ref_text in references
            for i, text in enumerate(sentence_windows(ref_text, settings.window_sentences, settings.min_window_chars))]
    return [pool[i] for i in sample_indices(len(pool), settings.windows, settings.seed, "windows")]


def evaluate_strategy(strategy: str, passages: Sequence[Passage], windows: Sequence[Window], llms: HopeLLMs,
                      embedder: Embedder, settings: HopeSettings,
                      statements: dict[str, tuple[str | None, list[str]]] | None = None) -> list[HopeItem]:
    """All HOPE items of one strategy. `statements` caches the window statements across strategies."""
    from tqdm.auto import tqdm

    index = PassageIndex(passages, embedder)
    items: list[HopeItem] = []
    focus = sample_indices(len(passages), settings.passages, settings.seed, strategy)
    for i in tqdm(focus, desc=f"HOPE passages {strategy}", unit="passage", disable=len(focus) < 2):
        questions, _ = passage_questions(passages[i], llms, settings)
        items.append(concept_unity(strategy, passages[i], questions, embedder))
        if settings.si_questions:
            items.append(semantic_independence(strategy, i, index, questions, llms, embedder, settings))
    statements = {} if statements is None else statements
    for window in tqdm(windows, desc=f"HOPE windows {strategy}", unit="window", disable=len(windows) < 2):
        if window.key not in statements:
            statements[window.key] = statements_for(window, llms, settings)
        items.append(information_preservation(strategy, window, statements[window.key], index, llms, settings))
    return items


@dataclass(frozen=True)
class HopeSummary:
    measure: str
    scores: tuple[float, ...]
    failures: int

    @property
    def mean(self) -> float | None:
        return float(np.mean(self.scores)) if self.scores else None


def summarize(items: Sequence[HopeItem], settings: HopeSettings) -> dict[str, HopeSummary]:
    """Per measure: the scores of the items that succeeded (0.0 kept) and how many failed; plus the aggregate
    (weighted mean of the three means; its scores are empty, so it has no CI)."""
    out = {}
    for measure in MEASURES:
        chosen = [item for item in items if item.measure == measure]
        out[measure] = HopeSummary(measure, tuple(item.score for item in chosen if item.score is not None),
                                   sum(item.score is None for item in chosen))
    aggregate = weighted_mean([out[m].mean for m in MEASURES], settings.weights)
    out[AGGREGATE] = HopeSummary(AGGREGATE, () if aggregate is None else (aggregate,),
                                 sum(s.failures for s in out.values()))
    return out


# ----------------------------------------------------------------------------------------------------- the floor

FLOOR = "_random"  # a measure's floor: the same measure on random cuts (metric f"{measure}_random")
LEAD = "_over_random"  # a strategy's lead over its floor (metric f"{measure}_over_random")
FLOOR_SALT = "~random-cuts"  # the floor's sampling salt, beside the strategy's name


def random_cuts(texts: dict[str, str], lengths: dict[str, Sequence[int]], seed: int, salt: str) -> list[Passage]:
    """The floor's chunks: each document's text tiled with the lengths of a strategy's chunks of that document, in a
    seeded random order, from a random start (the first piece is a random part of its length); each cut moves to
    the next whitespace so no word is split. Only where the cuts fall differs from the strategy: the same lengths,
    the same text, no regard for sentences or blocks."""
    out = []
    for document in sorted(texts):
        text, sizes = texts[document], [max(1, int(n)) for n in lengths.get(document, ())]
        if not sizes or not text.strip():
            continue
        rng = np.random.default_rng([seed, *f"{salt}:{document}".encode("utf-8")])
        order = [sizes[i] for i in rng.permutation(len(sizes))]
        position, step = 0, 0
        first = int(rng.integers(1, order[0] + 1))
        while position < len(text):
            while position < len(text) and text[position].isspace():  # a piece starts at a word
                position += 1
            size = first if step == 0 else order[step % len(order)]
            end = min(len(text), position + size)
            while end < len(text) and not text[end].isspace():
                end += 1
            piece = text[position:end].rstrip()
            if piece:
                out.append(Passage(f"random:{document}:{position}-{end}", document, piece))
            position, step = end, step + 1
    return out


def floor_sentences(leads: Sequence[tuple[str, str, float, float, float]], display=lambda s: s) -> list[str]:
    """What the floor says, one sentence per measure, from (strategy, metric, lead, ci_low, ci_high) rows of the
    `<measure>_over_random` metrics: which strategies score above random cuts of their own chunk lengths, and that a
    difference between strategies none of which beats its floor is not evidence about where chunks are cut."""
    out = []
    for measure in MEASURES:
        rows = [r for r in leads if r[1] == measure + LEAD and r[3] == r[3]]  # NaN CI: no items
        if not rows:
            continue
        above = [display(r[0]) for r in rows if r[3] > 0]
        below = [display(r[0]) for r in rows if not r[3] > 0]
        title = measure.replace("_", " ")
        if not above:
            out.append(f"{title}: no strategy scores above random cuts of its own chunk lengths (every lead's CI "
                       "includes 0 or lies below it): the differences between strategies on this measure do not beat "
                       "the floor and are not evidence about where chunks are cut.")
        else:
            out.append(f"{title}: above random cuts of its own chunk lengths: {', '.join(above)}"
                       + (f"; not above: {', '.join(below)} (a difference involving only these does not beat the "
                          "floor)" if below else "") + ".")
    return out
