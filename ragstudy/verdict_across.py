"""The verdict checked across retrievers: a retrieval-only run that ranked with several retrievers (`--retriever
dense,bm25,hybrid`) has one verdict per retriever (ragstudy.budget_eval.Verdict, each read from its own folder's
retrieval_verdict.csv); `CrossVerdict` sets them side by side and says in words where the conclusion changes with
the retriever: at which budgets the best strategy differs, and for which of the reference's differences the
significance or the direction differs. Nothing is re-estimated: every number is one a Verdict already holds.

Written as retrieval_verdict_by_retriever.csv (`to_frame`, ragstudy.results.RETRIEVAL_VERDICT_BY_RETRIEVER) and as a
section of the parent folder's retrieval_summary.md (`markdown`); the report shows `headline` and `sentences` in the
verdict box, below the main retriever's headline.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from .budget_eval import BudgetVerdict, Verdict, VerdictDifference, _joined


def _outcome(d: VerdictDifference | None) -> str:
    """How one reference − other difference reads: 'higher' / 'lower' (significant), 'not significant', or
    'not compared' (absent, or too few questions)."""
    if d is None or not d.compared:
        return "not compared"
    if not d.significant:
        return "not significant"
    return "higher" if d.mean_diff > 0 else "lower"


def _under(names: Sequence[str]) -> str:
    return "under " + _joined(list(names))


@dataclass(frozen=True)
class CrossVerdict:
    """The main verdict of each retriever of one run (retriever -> Verdict, in the run's order)."""

    verdicts: Mapping[str, Verdict]

    def __post_init__(self) -> None:
        if not self.verdicts:
            raise ValueError("no verdict to compare across retrievers")
        metrics = {v.metric for v in self.verdicts.values()}
        references = {v.reference for v in self.verdicts.values()}
        if len(metrics) > 1 or len(references) > 1:
            raise ValueError(f"the retrievers' verdicts differ in metric {sorted(metrics)} or reference "
                             f"{sorted(references)}: score every retriever's folder with the same --verdict-metric "
                             "and --reference")

    @classmethod
    def read(cls, folders: Mapping[str, str | Path]) -> "CrossVerdict":
        """The main verdict (the first of retrieval_verdict.csv) of each retriever's results folder; a folder
        without one is an error naming it and the command that writes it."""
        from . import results
        from .budget_eval import all_verdicts
        from .errors import StudyInputError

        verdicts = {}
        for name, folder in folders.items():
            frame = results.read_table(folder, results.RETRIEVAL_VERDICT)
            if frame is None or not len(frame):
                raise StudyInputError(f"{Path(folder) / results.RETRIEVAL_VERDICT.name}: missing; run "
                                      f"`ragstudy score-retrieval --results-dir {Path(folder).parent}`")
            verdicts[name] = all_verdicts(frame)[0]
        return cls(verdicts)

    @classmethod
    def scored(cls, folders: Mapping[str, str | Path]) -> "CrossVerdict | None":
        """`read`, or None for a one-retriever run or while a retriever's folder has no verdict yet."""
        from . import results

        if len(folders) < 2 or not all(results.RETRIEVAL_VERDICT.path(f).is_file() for f in folders.values()):
            return None
        return cls.read(folders)

    # ---- what the verdicts share

    @property
    def retrievers(self) -> list[str]:
        return list(self.verdicts)

    @property
    def first(self) -> Verdict:
        return next(iter(self.verdicts.values()))

    def budgets(self) -> list[str]:
        """Budget labels in the first verdict's order, then any only another verdict has."""
        return list(dict.fromkeys(b.budget for v in self.verdicts.values() for b in v.budgets))

    def at(self, retriever: str, budget: str) -> BudgetVerdict | None:
        return next((b for b in self.verdicts[retriever].budgets if b.budget == budget), None)

    def others(self) -> list[tuple[str, str]]:
        """(name, display) of every strategy the reference is compared with, under any retriever."""
        seen: dict[str, str] = {}
        for v in self.verdicts.values():
            seen.update({name: display for name, display in v.others() if name not in seen})
        return list(seen.items())

    # ---- where the conclusion changes

    def best_changes(self, budget: str) -> dict[str, list[str]] | None:
        """Best strategy (display names, ties joined with ' = ') -> the retrievers it is best under, when they do
        not all agree at `budget`; None when they agree (or only one retriever scored it)."""
        by_best: dict[str, list[str]] = {}
        for name in self.retrievers:
            b = self.at(name, budget)
            if b is not None:
                by_best.setdefault(" = ".join(s.display for s in b.best), []).append(name)
        return by_best if len(by_best) > 1 else None

    def difference_changes(self, budget: str) -> list[tuple[str, dict[str, list[str]]]]:
        """(other strategy's display, outcome -> retrievers) for each of the reference's differences at `budget`
        whose outcome (significantly higher / lower / not significant) is not the same under every retriever."""
        out = []
        for name, display in self.others():
            by_outcome: dict[str, list[str]] = {}
            for retriever in self.retrievers:
                b = self.at(retriever, budget)
                if b is None or b.reference is None:
                    continue
                d = next((d for d in b.differences if d.strategy == name), None)
                by_outcome.setdefault(_outcome(d), []).append(retriever)
            if len([o for o in by_outcome if o != "not compared"]) > 1:
                out.append((display, by_outcome))
        return out

    def _difference_sentence(self, display: str, by_outcome: Mapping[str, list[str]]) -> str:
        r = self.first.reference_display
        significant = {o: names for o, names in by_outcome.items() if o in ("higher", "lower")}
        if len(significant) == 1 and set(by_outcome) - {"not compared"} == {*significant, "not significant"}:
            (outcome, names), = significant.items()
            word = "lead over" if outcome == "higher" else "deficit against"
            return f"{r}'s {word} {display} is significant only {_under(names)}."
        parts = []
        for outcome in ("higher", "lower", "not significant"):
            if outcome in by_outcome:
                what = (f"significantly {outcome} than {display}" if outcome != "not significant"
                        else f"not significantly different from {display}")
                parts.append(f"{what} {_under(by_outcome[outcome])}")
        return f"{r} is " + "; ".join(parts) + "."

    def budget_sentence(self, budget: str) -> str | None:
        """In words what changes with the retriever at `budget` (None when nothing does)."""
        first = self.first
        words = first.budget_words(budget)
        parts = []
        best = self.best_changes(budget)
        if best:
            (lead, names), *rest = sorted(best.items(), key=lambda item: -len(item[1]))
            def named(best: str) -> str:
                return best.replace(" = ", " and ") + (" (tied)" if " = " in best else "")

            tail = ", ".join(f"{named(other)} {_under(under)}" for other, under in rest)
            verb = "are" if " = " in lead else "is"
            parts.append(f"At {words} {named(lead)} {verb} best {_under(names)}, but {tail}.")
        sentences = [self._difference_sentence(display, by) for display, by in self.difference_changes(budget)]
        if sentences and not parts:
            sentences[0] = f"At {words}, {sentences[0]}"
        parts += sentences
        return " ".join(parts) or None

    def sentences(self) -> list[str]:
        """One sentence per budget where the conclusion changes with the retriever."""
        return [s for s in (self.budget_sentence(b) for b in self.budgets()) if s]

    def headline(self) -> str:
        """One sentence: under how many retrievers the verdict was checked and whether its conclusion holds. What
        matters comes first: whether the best strategy (or a tie) changes with the retriever; then, apart, whether
        only which of the reference's differences reach significance does (that varies more easily: it depends on
        the spread as much as on the order)."""
        names = self.retrievers
        if len(names) == 1:
            return f"Checked under one retriever ({names[0]}) only: nothing to compare."
        lead = f"Checked under {len(names)} retrievers ({_joined(names)}), on the {self.first.metric_words}: "
        ref = self.first.reference_display
        best = [b for b in self.budgets() if self.best_changes(b)]
        significance = [b for b in self.budgets() if self.difference_changes(b)]
        if not best and not significance:
            return lead + ("the conclusion is the same under every retriever: the same best strategy at every budget "
                           f"and the same significant differences of {ref}.")

        def where(budgets: list[str]) -> str:
            return _joined([self.first.budget_words(b) for b in budgets])

        if not best:
            return lead + ("the best strategy is the same under every retriever at every budget; only which of "
                           f"{ref}'s differences are significant changes with the retriever, at {where(significance)}.")
        if not significance:
            return lead + (f"the best strategy changes with the retriever at {where(best)}; {ref}'s significant "
                           "differences are the same under every retriever.")
        return lead + (f"the best strategy changes with the retriever at {where(best)}, and which of {ref}'s "
                       f"differences are significant at {where(significance)}.")

    def per_retriever_lines(self) -> list[str]:
        """Per retriever, the best strategy at each budget and the reference's differences (each verdict's own
        words, from Verdict.headline)."""
        return [f"{name}: {v.headline(retriever=name)}" for name, v in self.verdicts.items()]

    # ---- the file (retrieval_verdict_by_retriever.csv)

    def to_frame(self):
        """One row per retriever x budget: the best strategy (ties joined with ' = ') with its mean and CI, the
        reference's mean, then per other strategy reference − it: diff / ci_low / ci_high / p_holm / significant
        (columns `<field>:<strategy>`)."""
        import pandas as pd

        from .results import RETRIEVAL_VERDICT_BY_RETRIEVER

        others = self.others()
        records = []
        for name, v in self.verdicts.items():
            for b in v.budgets:
                top = b.best[0]
                row = {"retriever": name, "metric": v.metric, "unit": v.unit, "reference": v.reference,
                       "budget": b.budget, "n_min": b.n_range[0], "n_max": b.n_range[1],
                       "best": " = ".join(s.strategy for s in b.best),
                       "best_display": " = ".join(s.display for s in b.best),
                       "best_value": top.mean, "best_ci_low": top.ci_low, "best_ci_high": top.ci_high,
                       "reference_value": b.reference.mean if b.reference else math.nan,
                       "changes": self.budget_sentence(b.budget) or ""}
                by_name = {d.strategy: d for d in b.differences}
                for other, _ in others:
                    d = by_name.get(other)
                    compared = d is not None and d.compared
                    row[f"diff:{other}"] = d.mean_diff if compared else math.nan
                    row[f"ci_low:{other}"] = d.ci_low if compared else math.nan
                    row[f"ci_high:{other}"] = d.ci_high if compared else math.nan
                    row[f"p_holm:{other}"] = d.p_holm if compared else math.nan
                    row[f"significant:{other}"] = int(compared and d.significant)
                records.append(row)
        frame = pd.DataFrame(records)
        fixed = list(RETRIEVAL_VERDICT_BY_RETRIEVER.columns)
        return frame[fixed + [c for c in frame.columns if c not in fixed]]
