"""Cleaning measured apart from segmentation: paragraph minus fixed-size, split in two at every budget.

    paragraph − fixed-size(raw)  =  [fixed-size(clean) − fixed-size(raw)]  +  [paragraph − fixed-size(clean)]
           total                              cleaning                               segmentation

Each part is a paired difference over the same questions with its paired bootstrap CI. Why, how to read it and
where the runs come from: docs/text-layer.md ("The decomposition").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

from ragstudy.scoring import budget_metrics
from ragstudy.scoring.stats import compare_paired
from ragstudy.scoring.verdict import budget_label, budget_words, estimate

SEGMENTED, BASELINE = "paragraph", "fixed-size"  # the study's question: layout-aware paragraphs against naive chunks
PARTS = ("total", "cleaning", "segmentation")
PART_WORDS = {"total": "paragraph − fixed-size (raw)", "cleaning": "cleaning: fixed-size clean − raw",
              "segmentation": "segmentation: paragraph − fixed-size clean"}


INTRO = ("Paragraph minus fixed-size on the raw text layer = cleaning (fixed-size on the clean text layer minus "
         "fixed-size on the raw one) + segmentation (paragraph minus fixed-size on the clean text layer), over the "
         "same questions; each part with its paired bootstrap CI.")


@dataclass(frozen=True)
class Part:
    """One part of the decomposition at one budget: the paired mean difference and its CI."""

    budget: str
    metric: str
    part: str  # total | cleaning | segmentation
    n: int
    mean_diff: float
    ci_low: float
    ci_high: float
    p_wilcoxon: float


def decompose(raw, clean, labels: Sequence[str], metric: str = budget_metrics.HIT, n_resamples: int = 10_000,
              seed: int = 0, confidence: float = 0.95) -> list[Part]:
    """The three parts at every budget label, from the per-question frames of the raw and the clean run
    (budget_eval.evaluate_folder's rows: strategy, budget, question_index, the metric's column). Paragraph is read
    from the raw run (its input does not depend on the text layer); only questions scored in all three are used."""
    column = budget_metrics.get(metric).column
    out: list[Part] = []
    for label in labels:
        series = (_values(raw, SEGMENTED, label, column), _values(raw, BASELINE, label, column),
                  _values(clean, BASELINE, label, column))
        common = sorted(set.intersection(*(set(s.index) for s in series)))
        if len(common) < 2:  # also where a strategy was not scored at this budget
            continue
        p, r, c = (s.loc[common].to_numpy(float) for s in series)
        for part, (a, b) in (("total", (p, r)), ("cleaning", (c, r)), ("segmentation", (p, c))):
            result = compare_paired(a, b, n_resamples, seed, confidence)
            out.append(Part(label, metric, part, result.n, result.mean_diff, result.ci_low, result.ci_high,
                            result.p_wilcoxon))
    return out


def _values(frame, strategy: str, label: str, column: str):
    part = frame[(frame["strategy"] == strategy) & (frame["budget"].astype(str) == label)]
    return part.set_index("question_index")[column].dropna()


def to_frame(parts: Sequence[Part]):
    """The retrieval_decomposition.csv table (ragstudy.results.RETRIEVAL_DECOMPOSITION)."""
    import pandas as pd

    from ragstudy.results import RETRIEVAL_DECOMPOSITION

    return pd.DataFrame([asdict(p) for p in parts], columns=list(RETRIEVAL_DECOMPOSITION.columns))


def _effect(low: float, high: float) -> str:
    return "it helps" if low > 0 else "it hurts" if high < 0 else "no clear effect, the CI spans 0"


def sentences(frame, unit: str = "chars") -> list[str]:
    """The decomposition in plain words, one sentence per budget (frame: to_frame's columns, or the CSV; the
    metric named as the verdict names it)."""
    metric_words = budget_metrics.get(str(frame["metric"].iloc[0]) if len(frame) else budget_metrics.HIT).words
    lines = []
    for label, part in frame.groupby("budget", sort=False):
        rows = {r.part: r for r in part.itertuples()}
        if not all(name in rows for name in PARTS):
            continue
        total, cleaning, segmentation = (rows[name] for name in PARTS)
        # a share only where the lead itself is clear and both parts go its way (else it reads as nonsense)
        clear = total.ci_low > 0 or total.ci_high < 0
        same_way = cleaning.mean_diff * total.mean_diff >= 0 and segmentation.mean_diff * total.mean_diff >= 0
        caveat = "" if str(label).isdigit() else "; contexts of different sizes, not an equal budget"
        share = (f" Cleaning accounts for {cleaning.mean_diff / total.mean_diff:.0%} of the difference."
                 if clear and same_way else "")
        shown = {r.part: estimate(r.mean_diff, r.ci_low, r.ci_high, signed=True)
                 for r in (total, cleaning, segmentation)}
        lines.append(
            f"At {budget_words(label, unit)} (n = {total.n} questions{caveat}): paragraph − fixed-size on the raw text "
            f"layer is {shown['total']} in {metric_words}. Cleaning alone (fixed-size clean − raw) gives "
            f"{shown['cleaning']} ({_effect(cleaning.ci_low, cleaning.ci_high)}); segmenting into paragraphs on the "
            f"same cleaning (paragraph − fixed-size clean) gives {shown['segmentation']} "
            f"({_effect(segmentation.ci_low, segmentation.ci_high)}).{share}")
    return lines


def by_metric(frame):
    """(metric, its rows) of a decomposition table, in the order the metrics come (hit first)."""
    return [(str(metric), part) for metric, part in frame.groupby("metric", sort=False)]


def table_rows(frame, unit: str) -> list[list[str]]:
    """One row per budget of one metric's rows: the budget, then each part's difference [CI]."""
    rows = []
    for label, part in frame.groupby("budget", sort=False):
        cells = {r.part: estimate(r.mean_diff, r.ci_low, r.ci_high, signed=True) for r in part.itertuples()}
        rows.append([budget_label(label, unit), *(cells.get(p, "–") for p in PARTS)])
    return rows


GROUP = "group"  # the column naming the pair of groups (every axis but the text layer) in a run's top-level table


def group_rows(frame, unit: str) -> list[list[str]]:
    """One row per group and budget of one metric's rows of a table over several pairs of groups."""
    return [[str(label), *row] for label, part in frame.groupby(GROUP, sort=False) for row in table_rows(part, unit)]


def markdown(frame, unit: str = "chars", confidence: float = 0.95, details: str = "") -> str:
    """The decomposition section: per metric, the sentences, then a table budget × part with the paired CIs. A table
    over several pairs of groups (a `group` column) gets one table per metric with a row per group and budget; its
    sentences are in each group's own summary (`details` says where)."""
    if frame is None or frame.empty:
        return ""
    level = f"{confidence:.0%}".replace("%", " %")
    out = f"## Cleaning or segmentation? (paired differences with {level} bootstrap CIs)\n\n{INTRO}\n\n"
    grouped = GROUP in frame.columns
    if grouped and details:
        out += f"{details}\n\n"
    header = ("| group " if grouped else "") + "| budget | " + " | ".join(PART_WORDS[p] for p in PARTS) + " |\n|---|" \
        + ("---|" if grouped else "") + "---:|" * len(PARTS) + "\n"
    for metric, part in by_metric(frame):
        out += f"### On the {budget_metrics.get(metric).words}\n\n"
        if not grouped:
            out += "".join(f"- {line}\n" for line in sentences(part, unit)) + "\n"
        rows = group_rows(part, unit) if grouped else table_rows(part, unit)
        out += header + "".join("| " + " | ".join(row) + " |\n" for row in rows) + "\n"
    return out
