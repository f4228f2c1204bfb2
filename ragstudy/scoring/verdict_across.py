"""The verdict checked across groups of variants (retrievers, embedders, text layers, ...): `CrossVerdict` sets the
groups' verdicts (ragstudy.scoring.verdict.Verdict, each from its own folder's retrieval_verdict.csv) side by side and
says in words what changes with the axis, the best strategy first (`best_sentence`), then which of the reference's
differences reach significance (`significance_sentence`, `sentences`). Nothing is re-estimated. What it writes and
where the report shows it: docs/retrieval.md (the groups of a run).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ragstudy.errors import StudyInputError
from ragstudy.scoring.verdict import BudgetVerdict, Verdict, VerdictDifference, _joined, all_verdicts, budget_words


def _outcome(d: VerdictDifference | None) -> str:
    """How one reference − other difference reads (significant: 'higher' / 'lower')."""
    if d is None or not d.compared:
        return "not compared"
    if not d.significant:
        return "not significant"
    return "higher" if d.mean_diff > 0 else "lower"


def _under(names: Sequence[str]) -> str:
    return "under " + _joined(list(names))


def _named(best: str) -> str:
    """'Paragraph = Token' (a tie, as best_changes keys it) as 'Paragraph and Token (tied)'."""
    return best.replace(" = ", " and ") + (" (tied)" if " = " in best else "")


def _plural(axis: str) -> str:
    return axis if axis.endswith("s") else axis + "s"


@dataclass(frozen=True)
class CrossVerdict:
    """The main verdict of each group of one run (label -> Verdict, in the run's order); `axis` names what the
    labels vary ("retriever", "embedder", or "setting" for labels that combine several axes)."""

    verdicts: Mapping[str, Verdict]
    axis: str = "retriever"

    def __post_init__(self) -> None:
        if not self.verdicts:
            raise ValueError(f"no verdict to compare across {_plural(self.axis)}")
        metrics = {v.metric for v in self.verdicts.values()}
        references = {v.reference for v in self.verdicts.values()}
        if len(metrics) > 1 or len(references) > 1:
            raise ValueError(f"the {_plural(self.axis)}' verdicts differ in metric {sorted(metrics)} or reference "
                             f"{sorted(references)}: score every folder with the same --verdict-metric and "
                             "--reference")

    @classmethod
    def read(cls, folders: Mapping[str, str | Path], axis: str = "retriever") -> "CrossVerdict":
        """The main verdict (the first of retrieval_verdict.csv) of each group's results folder (label -> folder);
        a folder without one is an error naming it and the command that writes it."""
        from ragstudy import results

        verdicts = {}
        for name, folder in folders.items():
            frame = results.read_table(folder, results.RETRIEVAL_VERDICT)
            if frame is None or not len(frame):
                raise StudyInputError(f"{Path(folder) / results.RETRIEVAL_VERDICT.name}: missing; run "
                                      f"`ragstudy score-retrieval --results-dir {Path(folder).parent}`")
            verdicts[name] = all_verdicts(frame)[0]
        return cls(verdicts, axis)

    @classmethod
    def scored(cls, folders: Mapping[str, str | Path], axis: str = "retriever") -> "CrossVerdict | None":
        """`read`, or None for a one-group run or while a group's folder has no verdict yet."""
        from ragstudy import results

        if len(folders) < 2 or not all(results.RETRIEVAL_VERDICT.path(f).is_file() for f in folders.values()):
            return None
        return cls.read(folders, axis)

    # ---- what the verdicts share

    @property
    def labels(self) -> list[str]:
        return list(self.verdicts)

    @property
    def first(self) -> Verdict:
        return next(iter(self.verdicts.values()))

    def budgets(self) -> list[str]:
        """Budget labels in the first verdict's order, then any only another verdict has."""
        return list(dict.fromkeys(b.budget for v in self.verdicts.values() for b in v.budgets))

    def at(self, label: str, budget: str) -> BudgetVerdict | None:
        return next((b for b in self.verdicts[label].budgets if b.budget == budget), None)

    def others(self) -> list[tuple[str, str]]:
        """(name, display) of every strategy the reference is compared with, in any group."""
        seen: dict[str, str] = {}
        for v in self.verdicts.values():
            seen.update({name: display for name, display in v.others() if name not in seen})
        return list(seen.items())

    # ---- where the conclusion changes

    def best_changes(self, budget: str) -> dict[str, list[str]] | None:
        """Best strategy (display names, ties joined with ' = ') -> the groups it is best under, when they do not
        all agree at `budget`; None when they agree (or only one group scored it)."""
        by_best: dict[str, list[str]] = {}
        for name in self.labels:
            b = self.at(name, budget)
            if b is not None:
                by_best.setdefault(" = ".join(s.display for s in b.best), []).append(name)
        return by_best if len(by_best) > 1 else None

    def outcomes(self, budget: str) -> list[tuple[str, dict[str, list[str]]]]:
        """(other strategy's display, outcome -> groups) for each of the reference's differences at `budget`."""
        out = []
        for name, display in self.others():
            by_outcome: dict[str, list[str]] = {}
            for label in self.labels:
                b = self.at(label, budget)
                if b is None or b.reference is None:
                    continue
                d = next((d for d in b.differences if d.strategy == name), None)
                by_outcome.setdefault(_outcome(d), []).append(label)
            if by_outcome:
                out.append((display, by_outcome))
        return out

    def difference_changes(self, budget: str) -> list[tuple[str, dict[str, list[str]]]]:
        """The `outcomes` at `budget` whose outcome (significantly higher / lower / not significant) is not the same
        in every group."""
        return [(display, by) for display, by in self.outcomes(budget)
                if len([o for o in by if o != "not compared"]) > 1]

    def _difference_sentence(self, displays: Sequence[str], by_outcome: Mapping[str, list[str]]) -> str:
        """One outcome pattern, shared by the differences with every strategy of `displays`."""
        r = self.first.reference_display
        which = _joined(list(displays))
        significant = {o: names for o, names in by_outcome.items() if o in ("higher", "lower")}
        if len(significant) == 1 and set(by_outcome) - {"not compared"} == {*significant, "not significant"}:
            (outcome, names), = significant.items()
            word = "lead over" if outcome == "higher" else "deficit against"
            return f"{r}'s {word} {which} is significant only {_under(names)}."
        parts = []
        for outcome in ("higher", "lower", "not significant"):
            if outcome in by_outcome:
                what = (f"significantly {outcome} than {which}" if outcome != "not significant"
                        else f"not significantly different from {which}")
                parts.append(f"{what} {_under(by_outcome[outcome])}")
        return f"{r} is " + "; ".join(parts) + "."

    def budget_sentence(self, budget: str) -> str | None:
        """In words what changes with the axis at `budget` (None when nothing does): the best strategy first, then
        the reference's differences whose significance changes, those with the same outcomes named together."""
        first = self.first
        words = budget_words(budget, first.unit)
        parts = []
        best = self.best_changes(budget)
        if best:
            (lead, names), *rest = sorted(best.items(), key=lambda item: -len(item[1]))
            tail = ", ".join(f"{_named(other)} {_under(under)}" for other, under in rest)
            verb = "are" if " = " in lead else "is"
            parts.append(f"At {words} {_named(lead)} {verb} best {_under(names)}, but {tail}.")
        patterns: dict[tuple, list[str]] = {}
        for display, by in self.difference_changes(budget):
            patterns.setdefault(tuple((o, tuple(n)) for o, n in by.items()), []).append(display)
        sentences = [self._difference_sentence(displays, {o: list(n) for o, n in key})
                     for key, displays in patterns.items()]
        if sentences and not parts:
            sentences[0] = f"At {words}, {sentences[0]}"
        parts += sentences
        return " ".join(parts) or None

    def sentences(self) -> list[str]:
        """One sentence per budget where the conclusion changes with the axis (the details)."""
        return [s for s in (self.budget_sentence(b) for b in self.budgets()) if s]

    def best_sentence(self) -> str:
        """Whether the best strategy (or a tie) changes with the axis, and where: what matters, said first."""
        names, axis = self.labels, self.axis
        if len(names) == 1:
            return f"Checked under one {axis} ({names[0]}) only: nothing to compare."
        lead = f"Checked under {len(names)} {_plural(axis)} ({_joined(names)}), on the {self.first.metric_words}: "
        changed = [b for b in self.budgets() if self.best_changes(b)]
        if not changed:
            return lead + (f"the best strategy is the same under every {axis} at every budget "
                           f"({self.first.winners()}).")
        split = "; ".join(f"at {budget_words(b, self.first.unit)} "
                          + ", ".join(f"{_named(best)} {_under(under)}" for best, under in self.best_changes(b).items())
                          for b in changed)
        same = " and is the same at the other budgets" if len(changed) < len(self.budgets()) else ""
        return lead + f"the best strategy changes with the {axis} ({split}){same}."

    def significance_sentence(self) -> str | None:
        """Apart from the best: how many of the reference's differences are significant under each group, and on
        how many the groups disagree (each one in `sentences`). None when there is one group or no reference."""
        if len(self.labels) < 2 or not any(v.reference_present for v in self.verdicts.values()):
            return None
        r, axis = self.first.reference_display, self.axis
        counts = [(*v.reference_tally(), label) for label, v in self.verdicts.items()]
        changed = [b for b in self.budgets() if self.difference_changes(b)]
        if not changed:
            each = {(k, n) for k, n, _ in counts}
            tally = f" ({counts[0][0]} of {counts[0][1]})" if len(each) == 1 else ""
            return f"{r}'s significant differences are the same under every {axis}{tally}."
        disagree = sum(len(self.difference_changes(b)) for b in changed)
        tally = _joined([f"{k} of {n} under {label}" for k, n, label in counts])
        return (f"Which of {r}'s differences reach significance (Holm p < {self.first.alpha:g} with a CI that "
                f"excludes 0) depends on the {axis}: {tally}; they disagree on {disagree}, at "
                f"{self.first.budgets_words(changed)}.")

    def headline(self) -> str:
        """Under how many groups the verdict was checked and what holds: whether the best strategy (or a tie)
        changes with the axis first; then, apart, whether only which of the reference's differences reach
        significance does (that varies more easily: it depends on the spread as much as on the order)."""
        names, axis = self.labels, self.axis
        if len(names) == 1:
            return self.best_sentence()
        best = any(self.best_changes(b) for b in self.budgets())
        significance = any(self.difference_changes(b) for b in self.budgets())
        if not best and not significance and self.first.reference_present:
            lead = f"Checked under {len(names)} {_plural(axis)} ({_joined(names)}), on the {self.first.metric_words}: "
            return lead + (f"the conclusion is the same under every {axis}: the same best strategy at every budget "
                           f"({self.first.winners()}) and the same significant differences of "
                           f"{self.first.reference_display}.")
        return " ".join(s for s in (self.best_sentence(), self.significance_sentence()) if s)

    def per_group_lines(self) -> list[str]:
        """Per group, the best strategy at each budget and how sure (each verdict's own sentence)."""
        return [f"Under {name}: {v.headline()}" for name, v in self.verdicts.items()]

    # ---- the file (retrieval_verdict_across.csv)

    def to_frame(self):
        """One row per group (column `group`, its label) x budget: the best strategy (ties joined with ' = ') with its
        mean and CI, the reference's mean, then per other strategy reference − it: diff / ci_low / ci_high / p_holm /
        significant (columns `<field>:<strategy>`)."""
        import pandas as pd

        from ragstudy.results import RETRIEVAL_VERDICT_ACROSS

        others = self.others()
        records = []
        for name, v in self.verdicts.items():
            for b in v.budgets:
                top = b.best[0]
                row = {"group": name, "metric": v.metric, "unit": v.unit, "reference": v.reference,
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
                    for field, attr in (("diff", "mean_diff"), ("ci_low", "ci_low"), ("ci_high", "ci_high"),
                                        ("p_holm", "p_holm")):
                        row[f"{field}:{other}"] = getattr(d, attr) if compared else math.nan
                    row[f"significant:{other}"] = int(compared and d.significant)
                records.append(row)
        frame = pd.DataFrame(records)
        fixed = list(RETRIEVAL_VERDICT_ACROSS.columns)
        return frame[fixed + [c for c in frame.columns if c not in fixed]]
