"""The verdict of a retrieval scoring, read from the tables ragstudy.scoring.budget_eval made (retrieval_summary.csv,
retrieval_paired.csv; nothing is re-estimated): at every budget the best strategy, and the reference strategy
(paragraph) against each other one. `Verdict` tells it in words, as a strategy x budget matrix and as a table,
and is written as retrieval_verdict.csv (`to_frame` / `from_frame`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ragstudy.scoring import budget_metrics
from ragstudy.scoring.budgets import PAPER_K_LABEL
from ragstudy.scoring.stats import ci_label

DEFAULT_REFERENCE = "paragraph"  # the study's question: paragraph chunking against every other strategy
ALPHA = 0.05
UNIT_WORDS = {"chars": "characters", "tokens": "tokens"}
_TIE = 1e-9  # means closer than this are a tie


def budget_words(budget: str, unit: str) -> str:
    """'1,000 characters', or "each strategy's own k": a budget as a sentence names it."""
    if budget == PAPER_K_LABEL:
        return "each strategy's own k"
    return f"{int(budget):,} {UNIT_WORDS.get(unit, unit)}"


def budget_label(budget: str, unit: str) -> str:
    """'500 chars', 'own k': a budget as a column or row label."""
    return "own k" if budget == PAPER_K_LABEL else f"{int(budget):,} {unit}"


def _range(low: int, high: int) -> str:
    return f"{low}" if low == high else f"{low}–{high}"


def estimate(mean: float, low: float, high: float, signed: bool = False) -> str:
    """'0.733 [0.600, 0.867]' ('+0.133 [...]' when `signed`), minus signs typeset."""
    return f"{mean:{'+' if signed else ''}.3f} [{low:.3f}, {high:.3f}]".replace("-", "−")


@dataclass(frozen=True)
class VerdictScore:
    """One strategy's mean of the verdict's metric at one budget, with its bootstrap CI (retrieval_summary.csv)."""

    strategy: str
    display: str
    n: int  # questions scored
    mean: float
    ci_low: float
    ci_high: float


@dataclass(frozen=True)
class VerdictDifference:
    """reference − other at one budget, from retrieval_paired.csv (sign turned when the pair was stored as
    other − reference); NaN values when the pair was not compared (fewer than two questions scored for both)."""

    strategy: str  # the other strategy
    display: str
    n: int  # questions scored for both
    mean_diff: float
    ci_low: float
    ci_high: float
    p_holm: float
    significant: bool  # Holm p < alpha and a CI that excludes 0

    @property
    def compared(self) -> bool:
        return not math.isnan(self.mean_diff)


@dataclass(frozen=True)
class BudgetVerdict:
    """The verdict at one budget: the best strategies (several when tied), the reference's own score (None when
    it was not scored) and reference − each other strategy."""

    budget: str
    best: tuple[VerdictScore, ...]
    reference: VerdictScore | None
    differences: tuple[VerdictDifference, ...]
    n_range: tuple[int, int]  # fewest and most questions scored by a strategy at this budget
    scores: tuple[VerdictScore, ...] = ()  # every strategy's score (the matrix); empty in files written before it
    versus_best: tuple[VerdictDifference, ...] = ()  # the (first) best − each strategy not tied with it, if compared

    def below_best(self) -> set[str]:
        """Strategies whose score is significantly below the best's (Holm p < alpha and a CI that excludes 0)."""
        return {d.strategy for d in self.versus_best if d.significant and d.mean_diff > 0}


@dataclass(frozen=True)
class VerdictCell:
    """A cell of the verdict table: its text and, for a number, the exact value and CI behind it."""

    text: str
    value: float | None = None
    ci: tuple[float, float] | None = None
    best: bool = False  # the best score of its budget (shown bold)


BELOW_BEST_MARK = "†"  # the matrix's mark of a score significantly below the best of its budget


@dataclass(frozen=True)
class Verdict:
    """The study's answer in one box: at every budget the best strategy by `metric` and the reference strategy
    against each other one. Written as retrieval_verdict.csv (`to_frame` / `from_frame`) and told in words by
    `lines` (the same lines on stdout, in retrieval_summary.md and in the report)."""

    metric: str
    reference: str
    reference_display: str
    unit: str  # "chars" or "tokens"
    alpha: float
    confidence: float
    budgets: tuple[BudgetVerdict, ...]

    @property
    def reference_present(self) -> bool:
        return any(b.reference is not None for b in self.budgets)

    @property
    def metric_words(self) -> str:
        return budget_metrics.get(self.metric).words

    # ---- words

    def budgets_words(self, budgets: Sequence[str]) -> str:
        """Several budgets with the unit said once: '500, 1,000 and 2,000 characters and each strategy's own k'."""
        numbers = [f"{int(b):,}" for b in budgets if b != PAPER_K_LABEL]
        parts = [f"{_joined(numbers)} {UNIT_WORDS.get(self.unit, self.unit)}"] if numbers else []
        return " and ".join(parts + [budget_words(PAPER_K_LABEL, self.unit)] * (PAPER_K_LABEL in budgets))

    def _p(self, p: float) -> str:
        return "Holm p < 0.001" if p < 0.001 else f"Holm p = {p:.3f}"

    def header(self) -> str:
        ci = ci_label(self.confidence)
        if not self.reference_present:
            return (f"Verdict on {self.metric_words}: the reference strategy '{self.reference}' is "
                    "not in this run, so only the best strategy at each budget is shown and no difference is tested "
                    "(choose another reference with ragstudy score-retrieval --reference STRATEGY).")
        r = self.reference_display
        return (f"Verdict on {self.metric_words}: the best strategy at each budget, and {r} − each "
                f"other strategy on the same questions (mean difference [{ci} bootstrap CI], Wilcoxon p "
                f"Holm-adjusted over all strategy pairs of the budget). A difference is called significant when "
                f"Holm p < {self.alpha:g} and its CI excludes 0; the table gives difference [CI], Holm p, and * when "
                "significant.")

    def budget_line(self, b: BudgetVerdict) -> str:
        """One budget in words: n, the best strategy, then what the reference's differences support."""
        if len(b.best) == 1:
            s = b.best[0]
            best = f"best {self.metric_words} {s.display}, {estimate(s.mean, s.ci_low, s.ci_high)}."
        else:
            names = [s.display for s in b.best]
            best = (f"best {self.metric_words} {b.best[0].mean:.3f}, tied between {', '.join(names[:-1])} and "
                    f"{names[-1]}.")
        caveat = "; contexts of different sizes, not an equal budget" if b.budget == PAPER_K_LABEL else ""
        line = f"At {budget_words(b.budget, self.unit)} (n = {_range(*b.n_range)} questions scored{caveat}): {best}"
        return " ".join([line, *self._reference_sentences(b)]) if self.reference_present else line

    def _signed(self, d: VerdictDifference) -> str:
        return estimate(d.mean_diff, d.ci_low, d.ci_high, signed=True)

    def _reference_sentences(self, b: BudgetVerdict) -> list[str]:
        """The reference's score and its differences at one budget: each significant one, then the rest."""
        r, alpha = self.reference_display, f"{self.alpha:g}"
        if b.reference is None:
            return [f"{r} was not scored at this budget."]
        parts = []
        if b.reference not in b.best or len(b.best) > 1:
            parts.append(f"{r}: {estimate(b.reference.mean, b.reference.ci_low, b.reference.ci_high)}.")
        compared = [d for d in b.differences if d.compared]
        significant = [d for d in compared if d.significant]
        rest = [d for d in compared if not d.significant]
        for d in significant:
            direction = "higher" if d.mean_diff > 0 else "lower"
            parts.append(f"{r}'s {self.metric_words} is {abs(d.mean_diff):.3f} {direction} than {d.display}'s "
                         f"(difference {self._signed(d)}, {self._p(d.p_holm)}): significant at {alpha}.")
        if rest and not significant:
            closest = min(rest, key=lambda d: (d.p_holm, -abs(d.mean_diff)))
            p = self._p(closest.p_holm).replace("Holm ", "")
            if len(rest) == 1:
                parts.append(f"The difference between {r} and {closest.display} is not significant at {alpha} "
                             f"after Holm's correction ({self._signed(closest)}, {p}).")
            else:
                parts.append(f"No difference between {r} and the {len(rest)} other strategies is significant at "
                             f"{alpha} after Holm's correction (lowest Holm p: {r} − {closest.display} "
                             f"{self._signed(closest)}, {p}).")
        elif rest:
            parts.append(f"The other {len(rest)} difference{'s are' if len(rest) > 1 else ' is'} not significant at "
                         f"{alpha} after Holm's correction.")
        parts += [f"({r} − {d.display}: {self._p(d.p_holm)} but its CI {self._signed(d)} includes 0, so it is not "
                  "counted.)" for d in rest if d.p_holm < self.alpha]
        missing = [d.display for d in b.differences if not d.compared]
        if missing:
            parts.append(f"Not compared with {', '.join(missing)}: fewer than two questions scored for both.")
        return parts

    def lines(self) -> list[str]:
        return [self.header(), *(self.budget_line(b) for b in self.budgets)]

    def markdown(self) -> str:
        """The lines as a paragraph and a bullet list (how retrieval_summary.md and report.md show them)."""
        header, *rest = self.lines()
        return header + "\n\n" + "".join(f"- {line}\n" for line in rest)

    def headline(self, retriever: str | None = None, embedder: str | None = None) -> str:
        """The verdict in one plain sentence: which strategy is best at which budgets, under which retriever and
        embedder (as the run's config.json names them), and how sure: over how many of the other strategies the
        best's lead is significant at each budget (the matrix's † marks; each difference is in `lines`)."""
        under = [f"the {retriever} retriever" if retriever else "", f"the {embedder} embedder" if embedder else ""]
        setting = " and ".join(u for u in under if u)
        count = self._n_range()
        if setting:
            lead = f"With {setting} " + (f"(n = {count} questions), " if count else "")
        else:
            lead = f"Over {count} questions, " if count else ""
        sentence = f"{lead}the best {self.metric_words} is {self.winners()}"
        sentence = sentence[0].upper() + sentence[1:]
        return f"{sentence}; {self._how_sure()}."

    def _n_range(self) -> str:
        """'49' or '40–49': the fewest and most questions scored, over every budget ('' without budgets)."""
        n = [n for b in self.budgets for n in b.n_range]
        return _range(min(n), max(n)) if n else ""

    def also_on(self) -> str:
        """The headline of a second verdict (the contiguous hit rate after the hit rate), as one sentence."""
        sentence = self.headline()
        return f"On the {self.metric_words}: {sentence[0].lower()}{sentence[1:]}"

    def winners(self) -> str:
        """'Paragraph at every budget', 'Paragraph at 500 and 1,000 characters; Fixed-size at each strategy's own
        k': the best strategy (or tie) of each budget, budgets with the same best together."""
        winners: dict[str, list[str]] = {}
        for b in self.budgets:
            names = _joined([s.display for s in b.best]) + (" (tied)" if len(b.best) > 1 else "")
            winners.setdefault(names, []).append(b.budget)
        if len(winners) == 1 and len(self.budgets) > 1:
            return f"{next(iter(winners))} at every budget"
        return "; ".join(f"{name} at {self.budgets_words(where)}" for name, where in winners.items())

    def _how_sure(self) -> str:
        """Over how many of the others the best's lead is significant, budgets with the same count together; from
        the reference's differences in a file written before the verdict kept the best's own (`versus_best`)."""
        rule = f"Holm p < {self.alpha:g}, CI excluding 0"
        counts: dict[tuple[float, str], list[str]] = {}  # (share of the others it leads, words) -> budgets
        for b in self.budgets:
            compared = len(b.versus_best)
            if not compared:
                continue
            ahead = len(b.below_best())
            phrase = ("none" if not ahead else ("the other one" if compared == 1 else f"all {compared} others")
                      if ahead == compared else f"{ahead} of {compared}")
            counts.setdefault((ahead / compared, phrase), []).append(b.budget)
        if not counts:
            return self._reference_count(rule)
        if {phrase for _, phrase in counts} == {"none"}:
            return f"the best's lead over the others is not significant ({rule}) at any budget"
        every = len(counts) == 1 and len(next(iter(counts.values()))) == len(self.budgets) > 1
        parts = [f"{phrase} at {'every budget' if every else self.budgets_words(where)}"
                 for (_, phrase), where in sorted(counts.items(), key=lambda item: -item[0][0])]
        return f"the best's lead is significant ({rule}) over {_joined(parts)}"

    def _reference_count(self, rule: str) -> str:
        """How many of the reference's differences are significant (files without `versus_best`)."""
        if not self.reference_present:
            return f"{self.reference} is not in this run, so no difference is tested"
        significant, compared = self.reference_tally()
        return (f"{significant} of {self.reference_display}'s {compared} differences with the other strategies "
                f"{'is' if significant == 1 else 'are'} significant ({rule})")

    def reference_tally(self) -> tuple[int, int]:
        """(significant, compared): the reference's differences over every budget."""
        compared = [d for b in self.budgets for d in b.differences if d.compared]
        return sum(d.significant for d in compared), len(compared)

    # ---- the matrix: strategy x budget, the best bold, † below it

    def has_matrix(self) -> bool:
        return any(b.scores for b in self.budgets)

    def matrix(self) -> tuple[list[str], list[list[VerdictCell]]]:
        """One row per strategy, one column per budget: the strategy's mean, `best` set on the best of the budget
        and BELOW_BEST_MARK after a mean significantly below it; '–' where the strategy was not scored. No rows for
        a verdict file written before every strategy's score was kept (`has_matrix`)."""
        names = dict.fromkeys((s.strategy, s.display) for b in self.budgets for s in b.scores)
        headers = ["strategy", *(budget_label(b.budget, self.unit) for b in self.budgets)]
        rows = []
        for name, display in names:
            row = [VerdictCell(display)]
            for b in self.budgets:
                s = next((s for s in b.scores if s.strategy == name), None)
                if s is None:
                    row.append(VerdictCell("–"))
                    continue
                mark = f" {BELOW_BEST_MARK}" if name in b.below_best() else ""
                row.append(VerdictCell(f"{s.mean:.3f}{mark}", s.mean, (s.ci_low, s.ci_high),
                                       best=any(t.strategy == name for t in b.best)))
            rows.append(row)
        return headers, rows

    def matrix_markdown(self, legend: bool = True) -> str:
        """The matrix as a Markdown table (the best in bold) and its legend below; '' without the matrix's scores."""
        if not self.has_matrix():
            return ""
        headers, rows = self.matrix()
        lines = ["| " + " | ".join(headers) + " |", "| --- |" + " ---: |" * (len(headers) - 1)]
        lines += ["| " + " | ".join(f"**{c.text}**" if c.best else c.text for c in row) + " |" for row in rows]
        return "\n".join(lines) + "\n" + (f"\n{self.legend()}\n" if legend else "")

    def legend(self) -> str:
        """The matrix in one line: what the numbers are, what bold and the mark say."""
        questions = f"n = {self._n_range()} questions" if self.budgets else ""
        own_k = (" Own k: each strategy's own k, contexts of different sizes."
                 if any(b.budget == PAPER_K_LABEL for b in self.budgets) else "")
        return (f"{self.metric_words[0].upper()}{self.metric_words[1:]} per strategy and context budget "
                f"({questions}). Bold: the best at that budget; {BELOW_BEST_MARK}: significantly below it (Holm p < "
                f"{self.alpha:g} and a {ci_label(self.confidence)} CI that excludes 0).{own_k}")

    # ---- the table of numbers

    def others(self) -> list[tuple[str, str]]:
        """(name, display) of every strategy compared with the reference, in first-met order."""
        return list({d.strategy: d.display for b in self.budgets for d in b.differences}.items())

    def table(self) -> tuple[list[str], list[list[VerdictCell]]]:
        """Headers and rows (one per budget): budget, n, best, then reference − each other strategy."""
        others = self.others()
        headers = ["budget", "n", f"best {self.metric_words}",
                   *(f"{self.reference_display} − {display}" for _, display in others)]
        rows = []
        for b in self.budgets:
            best = b.best[0]
            cells = [VerdictCell(budget_label(b.budget, self.unit)),
                     VerdictCell(_range(*b.n_range), float(b.n_range[1])),
                     VerdictCell(f"{' = '.join(s.display for s in b.best)} "
                                 f"{estimate(best.mean, best.ci_low, best.ci_high)}", best.mean,
                                 (best.ci_low, best.ci_high))]
            by_name = {d.strategy: d for d in b.differences}
            for name, _ in others:
                d = by_name.get(name)
                if d is None or not d.compared:
                    cells.append(VerdictCell("–"))
                    continue
                text = f"{self._signed(d)}, {self._p(d.p_holm).replace('Holm ', '')}{' *' if d.significant else ''}"
                cells.append(VerdictCell(text, d.mean_diff, (d.ci_low, d.ci_high)))
            rows.append(cells)
        return headers, rows

    # ---- the file (retrieval_verdict.csv, ragstudy.results.RETRIEVAL_VERDICT)

    def to_frame(self):
        """One row per fact: role best / reference / score (every strategy's, for the matrix) / difference
        (reference − strategy) / versus_best (the best − strategy)."""
        import pandas as pd

        from ragstudy.results import RETRIEVAL_VERDICT

        fixed = {"metric": self.metric, "unit": self.unit, "reference": self.reference, "alpha": self.alpha,
                 "confidence": self.confidence}
        records = []
        for b in self.budgets:
            facts = [("best", s) for s in b.best] + ([("reference", b.reference)] if b.reference else []) + [
                ("score", s) for s in b.scores] + [("difference", d) for d in b.differences] + [
                ("versus_best", d) for d in b.versus_best]
            for role, f in facts:
                score = isinstance(f, VerdictScore)
                records.append({**fixed, "budget": b.budget, "role": role, "strategy": f.strategy,
                                "strategy_display": f.display, "n": f.n, "value": f.mean if score else f.mean_diff,
                                "ci_low": f.ci_low, "ci_high": f.ci_high, "p_holm": math.nan if score else f.p_holm,
                                "significant": 0 if score else int(f.significant), "n_min": b.n_range[0],
                                "n_max": b.n_range[1]})
        return pd.DataFrame(records, columns=list(RETRIEVAL_VERDICT.columns))

    @classmethod
    def from_frame(cls, frame, metric: str | None = None) -> "Verdict":
        """The Verdict on `metric` (default: the table's first) that a `to_frame` table holds (as read back by
        ragstudy.results.read_table; one table may hold verdicts on several metrics, see `all_from_frame`)."""
        if frame is None or not len(frame):
            raise ValueError("an empty verdict table")
        metric = str(frame["metric"].iloc[0]) if metric is None else metric
        frame = frame[frame["metric"].astype(str) == metric]
        if not len(frame):
            raise ValueError(f"no verdict on {metric!r} in the table")
        first = frame.iloc[0]
        budgets = []
        for budget in dict.fromkeys(str(b) for b in frame["budget"]):
            part = frame[frame["budget"].astype(str) == budget]
            reference = _read_scores(part, "reference")
            budgets.append(BudgetVerdict(budget, _read_scores(part, "best"), reference[0] if reference else None,
                                         _read_differences(part, "difference"),
                                         (int(part["n_min"].iloc[0]), int(part["n_max"].iloc[0])),
                                         _read_scores(part, "score"), _read_differences(part, "versus_best")))
        display = next((b.reference.display for b in budgets if b.reference), str(first["reference"]))
        return cls(str(first["metric"]), str(first["reference"]), display, str(first["unit"]),
                   float(first["alpha"]), float(first["confidence"]), tuple(budgets))


def all_verdicts(frame) -> list[Verdict]:
    """Every verdict a retrieval_verdict.csv holds, in the table's order (the main one first; with evidence and the
    hit rate as main metric, the contiguous hit rate follows)."""
    if frame is None or not len(frame):
        raise ValueError("an empty verdict table")
    return [Verdict.from_frame(frame, str(m)) for m in dict.fromkeys(frame["metric"].astype(str))]


def verdict_metrics(metric: str, evidence: bool) -> list[str]:
    """The verdicts a run states: on `metric`, and, when that is the (lenient) hit rate, on the contiguous hit
    rate too (docs/metrics.md: the reading of the paper's coherent-context claim)."""
    return [metric, budget_metrics.HIT_CONTIGUOUS] if metric == budget_metrics.HIT and evidence else [metric]


def _scores(rows, column: str) -> tuple[VerdictScore, ...]:
    """The VerdictScore of each row, its mean in `column` (retrieval_summary.csv's mean, the verdict file's value)."""
    return tuple(VerdictScore(str(r.strategy), str(r.strategy_display), int(r.n), float(getattr(r, column)),
                              float(r.ci_low), float(r.ci_high)) for r in rows.itertuples())


def _read_scores(part, role: str) -> tuple[VerdictScore, ...]:
    return _scores(part[part["role"] == role], "value")


def _read_differences(part, role: str) -> tuple[VerdictDifference, ...]:
    return tuple(VerdictDifference(str(r.strategy), str(r.strategy_display), int(r.n), float(r.value),
                                   float(r.ci_low), float(r.ci_high), float(r.p_holm), bool(int(r.significant)))
                 for r in part[part["role"] == role].itertuples())


def verdict(summary, paired, reference: str = DEFAULT_REFERENCE, metric: str = budget_metrics.HIT, unit: str = "chars",
            alpha: float = ALPHA, confidence: float = 0.95) -> Verdict:
    """The verdict from the tables `summarize` and `compare` made (retrieval_summary.csv, retrieval_paired.csv):
    at every budget the strategies with the highest mean `metric` (ties named), and `reference` − each other
    strategy with the paired CI and Holm p already computed. Nothing is re-estimated here. A `reference` that is
    not in `summary` gives a verdict with only the best strategies."""
    part = summary[summary["metric"] == metric]
    if part.empty:
        raise ValueError(f"no '{metric}' rows in the summary (metrics: {sorted(set(summary['metric']))})")
    pairs = paired[paired["metric"] == metric] if len(paired) else paired
    budgets = []
    for label in sorted(dict.fromkeys(str(b) for b in part["budget"]),
                        key=lambda budget: (0, int(budget)) if budget.isdigit() else (1, 0)):  # own k last
        scores = _scores(part[part["budget"].astype(str) == label], "mean")
        top = max(s.mean for s in scores)
        best = tuple(s for s in scores if s.mean >= top - _TIE)
        ref = next((s for s in scores if s.strategy == reference), None)
        at = pairs[pairs["budget"].astype(str) == label] if len(pairs) else pairs
        differences = [_difference(at, reference, other, alpha)
                       for other in scores if other.strategy != reference] if ref is not None else []
        tied = {s.strategy for s in best}
        versus_best = [_difference(at, best[0].strategy, other, alpha)
                       for other in scores if other.strategy not in tied]
        ns = [s.n for s in scores]
        budgets.append(BudgetVerdict(label, best, ref, tuple(differences), (min(ns), max(ns)), tuple(scores),
                                     tuple(d for d in versus_best if d.compared)))
    display = next((b.reference.display for b in budgets if b.reference), reference)
    return Verdict(metric, reference, display, unit, alpha, confidence, tuple(budgets))


def _negated(value: float) -> float:
    return -float(value) + 0.0  # no "-0.000"


def _difference(pairs, reference: str, other: VerdictScore, alpha: float) -> VerdictDifference:
    """reference − other from the paired rows of one budget and metric; NaN when the pair is not there."""
    for r in (pairs.itertuples() if len(pairs) else ()):
        if (r.strategy_a, r.strategy_b) == (reference, other.strategy):
            diff, low, high = float(r.mean_diff), float(r.ci_low), float(r.ci_high)
        elif (r.strategy_a, r.strategy_b) == (other.strategy, reference):
            diff, low, high = _negated(r.mean_diff), _negated(r.ci_high), _negated(r.ci_low)
        else:
            continue
        p = float(r.p_holm)
        return VerdictDifference(other.strategy, other.display, int(r.n), diff, low, high, p,
                                 bool(p < alpha and (low > 0 or high < 0)))
    nan = math.nan
    return VerdictDifference(other.strategy, other.display, 0, nan, nan, nan, nan, False)


def _joined(items: Sequence[str]) -> str:
    """'a', 'a and b', 'a, b and c'."""
    items = list(items)
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def verdict_setting(config: Mapping) -> dict[str, str]:
    """The retriever and the embedder a retrieval run's config.json records, as `Verdict.headline` names them."""
    models = config.get("models") or {}
    embedder = config.get("embedding_server_model") or models.get("embedding") or "unknown"
    backend = config.get("embedding_backend")
    if backend and not config.get("embedding_server"):
        embedder = f"{embedder} ({backend})"
    return {"retriever": str(config.get("retriever") or "dense"), "embedder": str(embedder).removeprefix("wheel:")}
