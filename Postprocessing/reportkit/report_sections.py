"""One builder per report section. Each returns a Section whose blocks are shown when their inputs exist; a
missing input becomes a Note naming the command that would produce it. Nothing here re-derives what a file
records: setup comes from config.json, scores from the scripts' CSVs."""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from Postprocessing import metric_catalogue
from Postprocessing.common import DataError
from Postprocessing.reportkit import figures
from Postprocessing.reportkit.blocks import (Block, Bullets, Cell, Details, Figure, Fold, Heading, Lead, Note, Section,
                                             Table, Text, Tiles, estimate, num, pvalue)
from Postprocessing.reportkit.inputs import Inputs, Strategies
from ragstudy import results
from ragstudy.scoring.budget_metrics import CONTEXT_CHARS, HIT
from ragstudy.scoring.stats import ci_label, recorded_confidence

logger = logging.getLogger(__name__)

ALPHA = 0.05
EXAMPLE_CHARS = 300
DATE_KEYS = ("date", "created", "created_at", "started_at", "timestamp", "run_date")
VERSION_KEYS = ("git_commit", "code_version", "commit", "git", "version")


def _cmd(subcommand: str, results_dir: Path, extra: str = "") -> str:
    """The command line of `ragstudy SUBCOMMAND` on `results_dir` (the advice a note gives)."""
    return f"ragstudy {subcommand} --results-dir {results_dir}{extra}"


def ci_text(frame: pd.DataFrame, table: str) -> str:
    """'90 % CI': the confidence level `table` records (labels are never assumed); an error naming the file when
    it records none or several."""
    try:
        return f"{ci_label(recorded_confidence(frame, table))} CI"
    except ValueError as exc:
        raise DataError(str(exc)) from exc


def strategy_cell(name: str, styles: Strategies) -> Cell:
    return Cell(styles.display(name), color=styles.color(name))


def _digits(metric: str) -> int:
    """Decimals the metric catalogue gives ``metric`` (BLEU's 0–100 scale: 2; lengths: 1)."""
    return metric_catalogue.decimals(str(metric))  # the budget metrics' too (context size: 1)


def _compact(value: Any) -> str:
    if isinstance(value, (dict, list)):
        return json.dumps(value, ensure_ascii=False, separators=(", ", ": "))
    return "–" if value is None else str(value)


# ---------------------------------------------------------------------------------------------- 0. verdict

VERDICT_DETAILS = "Details: every difference in words, with its CI and Holm p"


def verdict_section(inp: Inputs, styles: Strategies) -> Section:
    """The box at the top, from retrieval_verdict.csv: the verdict in one sentence (its chart beside it), the check
    across groups when there are several, a strategy × budget matrix per group with its legend; the long prose and
    the table of differences behind a toggle."""
    from ragstudy.scoring.verdict import all_verdicts

    s = Section("verdict", "Verdict")
    if inp.retrieval_verdict is None or not len(inp.retrieval_verdict):
        s.blocks.append(Note("No retrieval_verdict.csv: the verdict (best strategy at each context budget, paragraph "
                             "against each other strategy) comes from a retrieval-only run and its evaluation.",
                             (f"ragstudy retrieve --output-dir {inp.results_dir}",
                              _cmd("score-retrieval", inp.results_dir))))
        return s
    try:
        verdicts = all_verdicts(inp.retrieval_verdict)
    except ValueError as exc:
        rerun = _cmd("score-retrieval", inp.results_dir)
        raise DataError(f"{inp.results_dir / results.RETRIEVAL_VERDICT.name}: not a verdict table as "
                        f"ragstudy score-retrieval writes it ({exc}); re-run `{rerun}`") from exc
    main, cross = verdicts[0], inp.retrieval_across
    s.blocks.append(verdict_lead(inp, styles, main))
    if cross is not None:
        s.blocks.append(Text(cross.headline()))
    groups = dict(cross.verdicts) if cross is not None else {"": main}
    s.blocks += matrix_blocks(groups, "verdict-matrix")
    for v in verdicts[1:]:  # the contiguous hit rate after the hit rate (docs/metrics.md): its sentence here
        s.blocks.append(Text(v.also_on()))
    s.blocks.append(Fold(VERDICT_DETAILS, verdict_details(verdicts, cross)))
    s.blocks += decomposition_blocks(inp, main.unit)
    return s


def matrix_blocks(groups: Mapping[str, Any], table_id: str) -> list[Block]:
    """One strategy × budget matrix per group (label -> Verdict; the label '' shows no caption) side by side, and
    the legend once; nothing for a verdict file written before the matrix's scores were kept."""
    tiles = []
    for number, (label, v) in enumerate(groups.items()):
        if not v.has_matrix():
            continue
        headers, rows = v.matrix()
        cells = [[Cell(c.text, c.value, c.ci, bold=c.best) for c in row] for row in rows]
        tiles.append((f"Under {label}" if label else "",
                      Table(headers, cells, "l" + "r" * (len(headers) - 1),
                            table_id=table_id if not number else f"{table_id}-{number}")))
    if not tiles:
        return []
    return [Tiles(tiles), Text(next(iter(groups.values())).legend())]


def verdict_details(verdicts: Sequence[Any], cross: Any) -> list[Block]:
    """Behind the toggle: what changes with the axis, each group's sentence, then per verdict its words and the
    table of the reference's differences (the contiguous hit rate's matrix too)."""
    out: list[Block] = []
    if cross is not None:
        axis = cross.axis
        out += [Heading(f"What changes with the {axis}"),
                Bullets(cross.sentences() or [f"Nothing: the best strategy and the significant differences are the "
                                              f"same at every budget under every {axis}."]),
                Text(f"Under each {axis}:"), Bullets(cross.per_group_lines())]
    for number, verdict in enumerate(verdicts):
        if number:
            out.append(Heading(f"The same verdict on the {verdict.metric_words}"))
            out += matrix_blocks({"": verdict}, f"verdict-matrix-{verdict.metric}")
        elif cross is not None:
            out.append(Heading(f"Under {next(iter(cross.verdicts))}"))
        header, *lines = verdict.lines()
        headers, rows = verdict.table()
        cells = [[Cell(c.text, c.value, c.ci) for c in row] for row in rows]
        out += [Text(header), Bullets(lines),
                Table(headers, cells, "lrl" + "r" * (len(headers) - 3),
                      table_id="verdict-table" if number == 0 else f"verdict-table-{verdict.metric}")]
    return out


def decomposition_blocks(inp: Inputs, unit: str) -> list[Block]:
    """Cleaning vs segmentation (retrieval_decomposition.csv, runs with both text layers): per metric, the sentences
    ragstudy.scoring.decomposition writes and a table budget × part; nothing when the run has one text layer."""
    from ragstudy import results
    from ragstudy.scoring import budget_metrics, decomposition

    folder = inp.retrieval_dir or inp.results_dir
    frame = results.read_table(folder, results.RETRIEVAL_DECOMPOSITION)
    if frame is None:
        return []
    from ragstudy.grid.variants import varying_axes

    if "text_layer" not in varying_axes(results.open_run(folder).variants()):  # a stale file: not this run's split
        logger.warning("%s: not shown: the run has one text layer now; re-score the folder (ragstudy score-retrieval "
                       "removes it)", results.RETRIEVAL_DECOMPOSITION.path(folder))
        return []
    out: list[Block] = [Heading("Cleaning or segmentation?"), Text(decomposition.INTRO)]
    parts = [decomposition.PART_WORDS[p] for p in decomposition.PARTS]
    for metric, part in decomposition.by_metric(frame):
        out.append(Text(f"On the {budget_metrics.get(metric).words}:"))
        if decomposition.GROUP in part.columns:  # several pairs of groups: a row per group and budget
            out.append(Table(["group", "budget", *parts], decomposition.group_rows(part, unit), "llrrr",
                             table_id=f"decomposition-{metric}"))
            continue
        out += [Bullets(decomposition.sentences(part, unit)),
                Table(["budget", *parts], decomposition.table_rows(part, unit), "lrrr",
                      table_id=f"decomposition-{metric}")]
    return out


def verdict_lead(inp: Inputs, styles: Strategies, verdict) -> Lead:
    """The verdict's one sentence (under the retrieval run's retriever and embedder) and a compact chart of the
    verdict's metric against the budget beside it."""
    from ragstudy.scoring.verdict import verdict_setting

    config = inp.retrieval_config if inp.retrieval_config is not None else inp.config
    fig, caption = None, ""
    summary = inp.retrieval_summary
    if summary is not None and {"metric", "budget", "strategy", "mean", "ci_low", "ci_high"} <= set(summary.columns) \
            and (summary["metric"] == verdict.metric).any():
        fig = figures.compact_budget_curve(summary, verdict.metric, styles)
        caption = f"{verdict.metric_words} against the context budget (k: each strategy's own k); details below."
    return Lead(verdict.headline(**verdict_setting(config or {})), fig, caption)


# ------------------------------------------------------------------------------------------------ 1. setup

def setup_section(inp: Inputs, styles: Strategies) -> Section:
    s = Section("setup", "Setup")
    config = inp.config
    if config is None:
        s.blocks.append(Note(f"No config.json in {inp.results_dir}: the run's settings are unknown. "
                             "ragstudy answer writes it at the start of every run.",
                             (f"ragstudy answer --output-dir {inp.results_dir}",)))
        return s
    used = {"models", "origins", "model_labels", "answering_model", "strategy_params", "strategies",
            "documents_sha256", "documents", "documents_pages", "questions", "limit", "budgets", "budget_unit",
            "profile", "retriever"}
    date = next((config[k] for k in DATE_KEYS if config.get(k)), None)
    version = next((config[k] for k in VERSION_KEYS if config.get(k)), None)
    used |= set(DATE_KEYS) | set(VERSION_KEYS)
    budgets = config.get("budgets")
    run_rows = [
        ["profile", _compact(config.get("profile"))],
        ["documents", _compact(config.get("documents"))],
        ["questions", _compact(config.get("questions")) + (f" (first {config['limit']} only: --limit)"
                                                          if config.get("limit") else "")],
        ["context budgets", (", ".join(str(b) for b in budgets) + f" {config.get('budget_unit') or ''}").strip()
         if budgets else "not recorded"],
        ["retriever", _compact(config.get("retriever") or "dense")],
        ["date", _compact(date) if date else "not recorded in config.json"],
        ["code version", _compact(version) if version else "not recorded in config.json"],
    ]
    s.blocks.append(Table(["setting", "value"], run_rows))

    models = config.get("models") or {}
    if models:
        s.blocks.append(Heading("Models and devices"))
        s.blocks.append(Table(["setting", "value", "resolved model", "set by"], _model_rows(config)))
        shipped = _wheel_llm_source(config)
        if shipped:
            s.blocks.append(Text(shipped))

    params = config.get("strategy_params") or {}
    names = styles.ordered([*(config.get("strategies") or []), *params])
    if names:
        s.blocks.append(Heading("Strategies and their parameters"))
        rows = []
        for name in names:
            p = params.get(name) or {}
            parent = p.get("parent") or {}
            rows.append([strategy_cell(name, styles), name,
                         ", ".join(f"{k}={_compact(v)}" for k, v in parent.items()) or "–",
                         num(p.get("child_chunk_size"), 0), num(p.get("child_chunk_overlap"), 0), num(p.get("k"), 0)])
        s.blocks.append(Table(["strategy", "registry name", "parent splitter", "child size", "child overlap", "k"],
                              rows, "lllrrr"))

    shas = config.get("documents_sha256") or {}
    pages = config.get("documents_pages") or {}
    if shas:
        s.blocks.append(Heading("Documents"))
        rows = []
        for path, sha in shas.items():
            if isinstance(sha, Mapping):  # tolerate {path: {sha256, pages}}
                pages.setdefault(path, sha.get("pages"))
                sha = sha.get("sha256")
            rows.append([str(path), num(pages.get(path), 0) if pages.get(path) is not None else "not recorded",
                         _compact(sha)])
        s.blocks.append(Table(["document", "pages", "sha256"], rows, "lrl"))

    other = {k: v for k, v in config.items() if k not in used}
    if other:
        s.blocks.append(Details("All other settings recorded in config.json",
                                "\n".join(f"{k}: {_compact(v)}" for k, v in other.items())))
    return s


def _model_rows(config: Mapping[str, Any]) -> list[list[str]]:
    """The Setup table's models: each model setting, its resolved model and where it was set; the LLM row names the
    model that answered as the run recorded it (results.RunRecord.answering_model: with --llm-server, the served
    model and each server's /v1/models list, not the profile's unused in-process LLM)."""
    models = config.get("models") or {}
    origins, labels = config.get("origins") or {}, config.get("model_labels") or {}
    rows = [[k, _compact(v), _compact(labels.get(k, "")), _compact(origins.get(k, ""))] for k, v in models.items()]
    answering = results.RunRecord(dict(config)).answering_model
    if answering is None or not answering.servers:  # the profile's LLM answered, in-process
        return rows
    resolved = ", ".join(part for part in (answering.label, answering.served_by()) if part)
    return [["llm", _compact(answering.name), _compact(resolved), "--llm-server-model"] if row[0] == "llm" else row
            for row in rows]


def _wheel_llm_source(config: Mapping[str, Any]) -> str:
    """Where an LLM shipped in wheels comes from, its licence and its pinned checksum (ragstudy.models.WheelLLM), when
    one answered in-process; "" otherwise."""
    from ragstudy.models import wheel_llm

    answering = results.RunRecord(dict(config)).answering_model
    model = wheel_llm(str((config.get("models") or {}).get("llm") or ""))
    if model is None or (answering is not None and answering.servers):
        return ""
    return f"The LLM, {model.title}: {model.source}. Its GGUF file's sha256: {model.sha256} ({model.size:,} bytes)."


# ----------------------------------------------------------------------------------------------- 2. chunks

def _example(frame: pd.DataFrame, row: pd.Series) -> str:
    text = " ".join(str(row["contents"]).split())
    return text[:EXAMPLE_CHARS] + ("…" if len(text) > EXAMPLE_CHARS else "")


def _where(row: pd.Series) -> str:
    """The chunk's file and pages, from its metadata (decoded by ragstudy.results.read_chunk_rows)."""
    where = Path(str(row["path"])).name
    meta = row["metadata"]
    start, end = meta.get("page_start"), meta.get("page_end")
    if start is not None:
        where += f" p.{start}" + (f"–{end}" if end not in (None, start) else "")
    return where


def chunks_section(inp: Inputs, styles: Strategies) -> Section:
    s = Section("chunks", "Chunks per strategy")
    if not inp.chunks:
        s.blocks.append(Note("No chunks_<strategy>.csv in the results folder.",
                             (f"ragstudy chunks --output-dir {inp.results_dir}",)))
        return s
    names = styles.ordered(inp.chunks)
    rows, examples = [], []
    for name in names:
        frame = inp.chunks[name]
        chars = frame["chars"]
        rows.append([strategy_cell(name, styles), num(len(frame), 0), num(chars.min(), 0),
                     num(float(chars.median()), 1), num(float(chars.mean()), 1), num(chars.max(), 0)])
        if len(frame):
            median = float(chars.median())
            typical = frame.iloc[int((chars - median).abs().to_numpy().argmin())]
            longest = frame.iloc[int(chars.to_numpy().argmax())]
            for label, row in (("typical (median length)", typical), ("longest", longest)):
                examples.append([strategy_cell(name, styles), label, num(row["chars"], 0), _where(row),
                                 _example(frame, row)])
    s.blocks.append(Table(["strategy", "chunks", "min chars", "median", "mean", "max chars"], rows, "lrrrrr"))
    s.blocks.append(Figure(figures.chunk_lengths({n: inp.chunks[n]["chars"].tolist() for n in names}, styles),
                           "Chunk length distribution per strategy (parent chunks, characters; same axis)."))
    s.blocks.append(Heading(f"Example chunks (first {EXAMPLE_CHARS} characters)"))
    s.blocks.append(Table(["strategy", "which", "chars", "from", "text"], examples, "llrll"))
    return s


# -------------------------------------------------------------------------------------- paired sentences

def paired_sentence(metric: str, a: str, b: str, diff: float, low: float, high: float, p_holm: float,
                    digits: int = 3) -> str:
    """What a paired comparison supports: a direction only when Holm p < 0.05 *and* the CI excludes 0."""
    if any(v is None or (isinstance(v, float) and math.isnan(v)) for v in (diff, low, high)):
        return f"{metric}: {a} vs {b} could not be compared (no paired values)"
    est = f"{diff:+.{digits}f} [{low:.{digits}f}, {high:.{digits}f}]".replace("-", "−")
    p = "p<0.001" if p_holm < 0.001 else f"p={p_holm:.3f}" if not math.isnan(p_holm) else "p=–"
    excludes = low > 0 or high < 0
    if p_holm < ALPHA and excludes:
        higher, lower = (a, b) if diff > 0 else (b, a)
        verb = "retrieves more characters than" if metric == CONTEXT_CHARS else "scores higher than"
        return f"{higher} {verb} {lower} in {metric} ({a} − {b} {est}, Holm {p})"
    caveat = ("; Holm p < 0.05 but the CI includes 0" if p_holm < ALPHA else
              "; the CI excludes 0 but Holm p ≥ 0.05" if excludes else "")
    return f"no significant difference in {metric} between {a} and {b} ({est}, Holm {p}{caveat})"


def paired_table(frame: pd.DataFrame, styles: Strategies, p_col: str, p_holm_col: str, table_id: str,
                 lead: Sequence[str] = (), ci: str = "CI", interpretable=lambda metric: True) -> Table:
    """Every paired comparison; `interpretable(metric)` False: its words say "not interpretable", not a finding."""
    rows = []
    for _, r in frame.iterrows():
        a, b, metric = str(r["strategy_a"]), str(r["strategy_b"]), str(r["metric"])
        d = _digits(metric)
        words = (paired_sentence(metric, styles.display(a), styles.display(b), r["mean_diff"], r["ci_low"],
                                 r["ci_high"], r[p_holm_col], d) if interpretable(metric)
                 else f"not interpretable: {metric} has no signal (see the signal check above)")
        rows.append([*(str(r[c]) for c in lead), metric, strategy_cell(a, styles), strategy_cell(b, styles),
                     num(r.get("n"), 0), estimate(r["mean_diff"], r["ci_low"], r["ci_high"], d, signed=True),
                     pvalue(r[p_col]), pvalue(r[p_holm_col]), words])
    return Table([*lead, "metric", "A", "B", "n", f"A − B [{ci}]", "p (Wilcoxon)", "p (Holm)", "in words"],
                 rows, "l" * len(lead) + "lllrrrrl", table_id=table_id, filterable=len(rows) > 12,
                 filter_column=len(lead))


def significant_summary(frame: pd.DataFrame, styles: Strategies, p_holm_col: str,
                        budget_col: str | None = None) -> list[Block]:
    """How many paired comparisons show a difference, and a sentence for each of them."""
    found = []
    for _, r in frame.iterrows():
        if r[p_holm_col] < ALPHA and (r["ci_low"] > 0 or r["ci_high"] < 0):
            text = paired_sentence(str(r["metric"]), styles.display(r["strategy_a"]), styles.display(r["strategy_b"]),
                                   r["mean_diff"], r["ci_low"], r["ci_high"], r[p_holm_col], _digits(r["metric"]))
            found.append(f"budget {r[budget_col]}: {text}" if budget_col else text)
    blocks: list[Block] = [Text(f"{len(found)} of {len(frame)} comparisons show a difference (Holm p < 0.05 and a "
                                "CI that excludes 0)" + (":" if found else "."))]
    return blocks + ([Bullets(found)] if found else [])


# -------------------------------------------------------------------------------------------- 3. retrieval

def retrieval_section(inp: Inputs, styles: Strategies) -> Section:
    s = Section("retrieval", "Retrieval")
    summary, paired = inp.retrieval_summary, inp.retrieval_paired
    if summary is not None and len(summary):
        metrics = list(dict.fromkeys(summary["metric"]))
        main = HIT if HIT in metrics else metrics[0]
        s.blocks.append(Figure(figures.budget_curve(summary, main, styles),
                               f"{main} against the context budget (mean over questions, "
                               f"{ci_text(summary, results.RETRIEVAL_SUMMARY.name)} band)."))
        budgets = sorted(set(summary["budget"]), key=lambda b: (not b.isdigit(), int(b) if b.isdigit() else 0))
        rows = []
        for budget in budgets:
            for name in styles.ordered(summary["strategy"]):
                part = summary[(summary["budget"] == budget) & (summary["strategy"] == name)]
                if part.empty:
                    continue
                by_metric = dict(zip(part["metric"], part.itertuples(), strict=True))
                cells = [estimate(by_metric[m].mean, by_metric[m].ci_low, by_metric[m].ci_high,
                                  _digits(m)) if m in by_metric else Cell("–")
                         for m in metrics]
                rows.append([budget, strategy_cell(name, styles), num(int(part["n"].max()), 0), *cells])
        s.blocks.append(Heading(f"Per budget (mean [{ci_text(summary, results.RETRIEVAL_SUMMARY.name)}])"))
        s.blocks.append(Table(["budget", "strategy", "n", *metrics], rows, "llr" + "r" * len(metrics),
                              table_id="retrieval-table"))
    else:
        s.blocks.append(Note("No retrieval_summary.csv: hit rate against context budget needs a retrieval-only run "
                             "and its evaluation.",
                             (f"ragstudy retrieve --output-dir {inp.results_dir}",
                              _cmd("score-retrieval", inp.results_dir))))
        cq = inp.chunk_quality
        if cq is not None and "group" in cq.columns and (cq["group"] == "retrieval").any():
            s.blocks.append(Heading("At each strategy's own k, from the chain's retrieved contexts "
                                    "(chunk_quality.csv)"))
            s.blocks.append(_quality_table(cq[cq["group"] == "retrieval"], styles))
        else:
            s.blocks.append(Note("No chunk_quality.csv: the retrieval metrics and context size at each strategy's own "
                                 "k come from the chain's Dataset files through ragstudy chunk-quality.",
                                 (_cmd("chunk-quality", inp.results_dir),)))
    if paired is not None and len(paired):
        s.blocks.append(Heading("Paired differences (A − B on the same questions; Holm over the pairs of each "
                                "budget and metric)"))
        s.blocks += significant_summary(paired, styles, "p_holm", "budget")
        s.blocks.append(paired_table(paired, styles, "p_wilcoxon", "p_holm", "retrieval-paired", lead=("budget",),
                                     ci=ci_text(paired, results.RETRIEVAL_PAIRED.name)))
    return s


# ---------------------------------------------------------------------------------------------- 4. answers

def answers_section(inp: Inputs, styles: Strategies) -> Section:
    """The signal check's sentence first, then every metric beside its floors and references, then the paired
    comparisons: worded as findings only on the metrics that carry signal."""
    s = Section("answers", "Answers")
    summary = inp.metrics_summary
    if summary is None or not len(summary):
        s.blocks.append(Note("No metrics_summary.csv: the answers have not been scored.",
                             (_cmd("score-answers", inp.results_dir),)))
        return s
    signal = inp.metrics_signal
    with_signal = set(signal["with_signal"]) if signal else set()
    if inp.answers_across:
        s.blocks.append(Text("Answered by several LLMs, each scored beside its own floors:"))
        s.blocks.append(Bullets(list(inp.answers_across)))
        s.blocks.append(Text(f"The tables below are those of {inp.answers_group}."))
    elif inp.answers_group:
        s.blocks.append(Note("Answered by several LLMs, but the verdict across them has not been written.",
                             (_cmd("score-answers", inp.results_dir),)))
    if signal:
        s.blocks.append(Text(f"Signal check: {signal['sentence']}"))
    else:
        s.blocks.append(Note("No signal check: these scores were written without floors (an earlier version); "
                             "their strategy comparisons are not interpretable until the answers are re-scored.",
                             (_cmd("score-answers", inp.results_dir),)))
    names = styles.ordered(summary["strategy"])
    s.blocks.append(Figure(figures.dot_whisker(summary, styles),
                           "Every answer metric per strategy: mean over questions with its "
                           f"{ci_text(summary, results.METRICS_SUMMARY.name).replace(' CI', ' bootstrap CI')}."))
    rows = []
    for metric in dict.fromkeys(summary["metric"]):
        part = summary[summary["metric"] == metric].set_index("strategy")
        cells = _strategy_cells(part, names, lambda r: estimate(r["mean"], r["ci_low"], r["ci_high"],
                                                                 _digits(metric)))
        rows.append([str(metric), *cells, num(int(part["n"].max()), 0)])
    s.blocks.append(Table(["metric", *[styles.display(n) for n in names], "n"], rows,
                          "l" + "r" * (len(names) + 1), table_id="answers-table"))
    if inp.metrics_baselines is not None and len(inp.metrics_baselines):
        s.blocks += baseline_blocks(inp.metrics_baselines, styles, names)
    paired = inp.metrics_paired
    if paired is not None and len(paired):
        s.blocks.append(Heading("Paired comparisons (A − B on the same questions; Holm over the pairs of each "
                                "metric)"))
        open_ = paired[paired["metric"].astype(str).isin(with_signal)]
        closed = sorted(set(paired["metric"].astype(str)) - with_signal, key=list(paired["metric"].astype(str)).index)
        if len(open_):
            s.blocks += significant_summary(open_, styles, "p_holm")
        if closed:
            s.blocks.append(Text(f"Not interpretable (no signal): {len(paired) - len(open_)} comparisons on "
                                 f"{', '.join(closed)}; listed below for completeness, not as findings."))
        s.blocks.append(paired_table(paired, styles, "p_wilcoxon", "p_holm", "answers-paired",
                                     ci=ci_text(paired, results.METRICS_PAIRED.name),
                                     interpretable=lambda m: m in with_signal))
    return s


def _strategy_cells(part: pd.DataFrame, names: Sequence[str], cell: Callable[[pd.Series], Cell]) -> list[Cell]:
    """One cell per strategy of `names`, made by `cell` from its row of `part` (indexed by strategy); "–" where the
    strategy has no row."""
    return [cell(part.loc[n]) if n in part.index else Cell("–") for n in names]


def _baseline_cell(r: pd.Series, digits: int) -> Cell:
    """A baseline's mean [CI], with the LLM's paired difference from it (▲ where the LLM is above it)."""
    text = estimate(r["mean"], r["ci_low"], r["ci_high"], digits).text
    if pd.notna(r["diff"]):
        diff = estimate(r["diff"], r["diff_ci_low"], r["diff_ci_high"], digits, signed=True).text
        text += f"; LLM − it {diff}" + (" ▲" if r["llm_above"] == 1 else "")
    return Cell(text)


def baseline_blocks(frame: pd.DataFrame, styles: Strategies, names: Sequence[str]) -> list[Block]:
    """Each metric's floor, context-copy baseline and evidence reference per strategy, with LLM − baseline."""
    from Postprocessing.answer_baselines import BASELINE_LABELS, BASELINES

    rows = []
    for metric in dict.fromkeys(frame["metric"]):
        d = _digits(str(metric))
        for baseline in BASELINES:
            part = frame[(frame["metric"] == metric) & (frame["baseline"] == baseline)].set_index("strategy")
            if part.empty:
                continue
            cells = _strategy_cells(part, names, lambda r: _baseline_cell(r, d))
            rows.append([str(metric), BASELINE_LABELS[baseline], *cells, num(int(part["n"].max()), 0)])
    return [Heading("Floors and references (mean [CI]; LLM − baseline paired on the same questions)"),
            Text("Shuffled-oracle floor: each question's reference scored against another question's reference. "
                 "Context-copy baseline: the first N characters of the context the LLM was given, N = the mean length "
                 "of that strategy's answers. Evidence reference: the evidence passage as the answer. ▲: the LLM's "
                 "answers score above it (the CI of LLM − baseline excludes 0)."),
            Table(["metric", "baseline", *[styles.display(n) for n in names], "n"], rows,
                  "ll" + "r" * (len(names) + 1), table_id="answers-baselines")]


# ---------------------------------------------------------------------------------- 5. quality, survey, sweeps

def _quality_cell(r: pd.Series, digits: int) -> Cell:
    """A chunk-quality mean [CI], with how many documents failed to score where any did."""
    cell = estimate(r["mean"], r["ci_low"], r["ci_high"], digits)
    failures = int(r["failures"]) if "failures" in r.index and not pd.isna(r["failures"]) else 0
    return Cell(f"{cell.text} ({failures} failed)", cell.value, cell.ci) if failures else cell


def _quality_table(frame: pd.DataFrame, styles: Strategies) -> Table:
    names = styles.ordered(frame["strategy"])
    rows = []
    for metric in dict.fromkeys(frame["metric"]):
        part = frame[frame["metric"] == metric].set_index("strategy")
        cells = _strategy_cells(part, names, lambda r: _quality_cell(r, _digits(metric)))
        rows.append([str(metric), *cells, "/".join(dict.fromkeys(str(int(v)) for v in part["n"]))])
    return Table(["metric", *[styles.display(n) for n in names], "n"], rows, "l" + "r" * (len(names) + 1))


def chunk_quality_section(inp: Inputs, styles: Strategies) -> Section:
    s = Section("chunk-quality", "Chunk quality and HOPE")
    cq = inp.chunk_quality
    if cq is None or not len(cq):
        s.blocks.append(Note("No chunk_quality.csv.", (_cmd("chunk-quality", inp.results_dir,
                                                             " --no-hope"),
                                                        _cmd("chunk-quality", inp.results_dir))))
        return s
    titles = {"intrinsic": "Intrinsic chunk statistics", "retrieval": "Retrieval from evidence, at each "
              "strategy's own k", "hope": "HOPE (failed = unparseable LLM output, left out of the mean)"}
    for group in dict.fromkeys(cq["group"]):
        s.blocks.append(Heading(titles.get(group, str(group))))
        s.blocks.append(_quality_table(cq[cq["group"] == group], styles))
    if not (cq["group"] == "hope").any():
        s.blocks.append(Note(_why_no_hope(inp.hope_run), (_cmd("chunk-quality", inp.results_dir),)))
        return s
    from Postprocessing.chunkeval.hope import LEAD, floor_sentences

    leads = [(str(r["strategy"]), str(r["metric"]), float(r["mean"]), float(r["ci_low"]), float(r["ci_high"]))
             for _, r in cq[cq["metric"].astype(str).str.endswith(LEAD)].iterrows()]
    sentences = floor_sentences(leads, styles.display)
    if sentences:
        s.blocks.append(Heading("HOPE against its floor"))
        s.blocks.append(Text("The floor of each measure is the same measure on chunks cut at random offsets of the "
                             "same documents with the strategy's own chunk lengths, scored the same way "
                             "(`<measure>_random`; the lead over it: `<measure>_over_random`)."))
        s.blocks.append(Bullets(sentences))
    elif inp.hope_run:
        s.blocks.append(Note("HOPE has no floor here (computed by a version without it): re-run chunk-quality to "
                             "see whether its differences beat random cuts of the same lengths.",
                             (_cmd("chunk-quality", inp.results_dir),)))
    return s


def _why_no_hope(record: dict | None) -> str:
    """Why the chunk-quality tables hold no HOPE rows, from chunk_quality_run.json's record."""
    if record is None:
        return "HOPE was not computed: chunk_quality_run.json is missing."
    if not record:
        return ("HOPE was not computed: chunk-quality ran with --no-hope (as `ragstudy study` does unless --hope). "
                "It runs offline with the profile's LLM (the lite profile's Qwen2.5-Coder-0.5B-Instruct included); "
                "see docs/metrics.md for its time.")
    return "HOPE was computed but every item failed to parse: see chunk_quality_hope.csv."


def survey_section(inp: Inputs, styles: Strategies) -> Section:
    s = Section("survey", "Human preference survey")
    overall, pairwise = inp.survey_overall, inp.survey_pairwise
    if overall is None:
        lead = ("interview_answers.xlsx is present; once the raters have filled it, analyse it."
                if inp.survey_answers_present else "No survey results: make the blinded review workbook, have "
                "raters fill interview_answers.xlsx, then analyse it.")
        cmds = (() if inp.survey_answers_present else (_cmd("review",
                                                            inp.results_dir),))
        s.blocks.append(Note(lead, (*cmds, _cmd("survey", inp.results_dir))))
        return s
    cats = [str(c) for c in overall["category"]]
    s.blocks.append(Figure(figures.bars([styles.display(c) for c in cats], overall["count"].tolist(),
                                        [styles.color(c) for c in cats], "choices"),
                           "How often raters preferred each strategy's answer."))
    rows = [[strategy_cell(str(r["category"]), styles), num(int(r["count"]), 0),
             num(r.get("share_all"), 3), num(r.get("share_without_none"), 3)] for _, r in overall.iterrows()]
    s.blocks.append(Table(["choice", "count", "share", "share excl. none"], rows, "lrrr"))
    if pairwise is not None and len(pairwise):
        rows = []
        for _, r in pairwise.iterrows():
            rows.append([strategy_cell(str(r["strategy_a"]), styles), strategy_cell(str(r["strategy_b"]), styles),
                         num(r.get("count_a"), 0), num(r.get("count_b"), 0), num(r.get("share_a"), 3),
                         pvalue(r.get("p_sign", math.nan)), pvalue(r.get("p_holm", math.nan))])
        s.blocks.append(Heading("Pairwise sign tests"))
        s.blocks.append(Table(["A", "B", "A chosen", "B chosen", "share A", "p (sign)", "p (Holm)"], rows,
                              "llrrrrr"))
    if inp.survey_summary:
        s.blocks.append(Details(results.SURVEY_SUMMARY_MD.name, inp.survey_summary))
    return s


def sweeps_section(inp: Inputs, styles: Strategies) -> Section:
    s = Section("sweeps", "Parameter sweeps")
    summary, best = inp.sweep_summary, inp.sweep_best
    if summary is None or not len(summary):
        s.blocks.append(Note("No sweep_summary.csv: no parameter sweep was run.",
                             (f"ragstudy sweep SWEEP.yaml --output-dir "
                              f"{inp.results_dir}",)))
        return s
    metric_cols = [c for c in summary.columns if "@" in str(c)]
    if best is not None and len(best):
        rows = [[str(r["metric"]), str(r["budget"]), strategy_cell(str(r["strategy"]), styles), str(r["config"]),
                 str(r["params"]), num(r["value"], 3)] for _, r in best.iterrows()]
        s.blocks.append(Heading("Best configuration per metric and budget"))
        s.blocks.append(Table(["metric", "budget", "strategy", "config", "params", "value"], rows, "lllllr"))
    if metric_cols:
        main = next((c for c in metric_cols if c.startswith("hit@")), metric_cols[0])
        s.blocks.append(Figure(figures.sweep_scatter(summary, main, styles, metric_cols),
                               f"Every swept configuration: mean chunk length against {main} (the menu switches "
                               "the metric and budget)."))
    order = {n: i for i, n in enumerate(styles.ordered(summary["strategy"]))}
    frame = summary.sort_values("strategy", key=lambda col: col.map(order), kind="stable")
    fixed = [c for c in ("chunks", "chars_mean", "chars_cv", "index_seconds") if c in frame.columns]
    rows = [[str(r["config"]), strategy_cell(str(r["strategy"]), styles), str(r["params"]),
             *(num(r[c], 0 if c == "chunks" else 3 if c == "chars_cv" else 1) for c in fixed),
             *(num(r[c], 3) for c in metric_cols)] for _, r in frame.iterrows()]
    s.blocks.append(Heading("All configurations"))
    s.blocks.append(Table(["config", "strategy", "params", *fixed, *metric_cols], rows,
                          "lll" + "r" * (len(fixed) + len(metric_cols)), table_id="sweep-table"))
    return s


# ------------------------------------------------------------------------------------- 6. per-question view

def _sources_text(sources: Any) -> str:
    parts = []
    for src in sources or []:
        if not isinstance(src, Mapping):
            continue
        name = Path(str(src.get("path", "?"))).name
        start, end = src.get("page_start"), src.get("page_end")
        pages = "" if start is None else f" p.{start}" + (f"–{end}" if end not in (None, start) else "")
        parts.append(name + pages)
    return "; ".join(parts) or "–"


def explorer_section(inp: Inputs, styles: Strategies) -> Section:
    s = Section("questions", "Per-question explorer")
    per_q = inp.metrics_per_question
    if not inp.datasets and per_q is None:
        s.blocks.append(Note("No answers in the results folder (Dataset*.json).",
                             (f"ragstudy answer --output-dir {inp.results_dir}",)))
        return s
    metric_cols: list[str] = []
    scores: dict[tuple[str, int], Mapping[str, Any]] = {}
    if per_q is not None and len(per_q):
        skip = {"strategy", "strategy_display", "question_index", "question", "answer", "oracle", "reference"}
        metric_cols = [c for c in per_q.columns if c not in skip and pd.api.types.is_numeric_dtype(per_q[c])]
        scores = {(str(r["strategy"]), int(r["question_index"])): r for _, r in per_q.iterrows()}
    else:
        s.blocks.append(Note("No per-question scores yet.", (_cmd("score-answers",
                                                                  inp.results_dir),)))
    answers = {(name, int(r["question_index"])): r for name, rows in inp.datasets.items() for r in rows
               if r.get("question_index") is not None}
    oracle = inp.oracle[0] if inp.oracle else []
    keys = sorted(set(answers) | set(scores), key=lambda k: (k[1], styles.order(k[0]), k[0]))
    rows = []
    for name, qi in keys:
        a, sc = answers.get((name, qi), {}), scores.get((name, qi), {})
        question = a.get("question") if a else sc.get("question", "")
        rows.append([num(qi, 0), str(question or ""), oracle[qi] if qi < len(oracle) else "–",
                     strategy_cell(name, styles), str(a.get("answer", "–")) if a else "–",
                     *(num(sc.get(c, math.nan), _digits(c)) for c in metric_cols),
                     _sources_text(a.get("sources") if a else None)])
    if inp.oracle:
        s.blocks.append(Text(f"Oracle answers from {inp.oracle[1]}. Click a column header to sort; type to filter."))
    s.blocks.append(Table(["#", "question", "oracle", "strategy", "answer", *metric_cols, "retrieved sources"], rows,
                          "rllll" + "r" * len(metric_cols) + "l", table_id="explorer-table", filterable=True,
                          filter_column=3))
    return s


SECTIONS = (verdict_section, setup_section, chunks_section, retrieval_section, answers_section, chunk_quality_section,
            survey_section, sweeps_section, explorer_section)


def build_sections(inp: Inputs, styles: Strategies) -> list[Section]:
    return [builder(inp, styles) for builder in SECTIONS]
