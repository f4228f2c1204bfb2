"""One page that answers the study's question: ``report.html`` (self-contained: plotly.js, styles and script
inline; opens offline from a mail attachment) and ``report.md`` (the same tables, for a terminal or a paper draft),
built from whatever the results folder holds.

    ragstudy report                                  # results/ -> results/report.html + .md
    ragstudy report --results-dir /tmp/run --out /tmp/run/report.html
    ragstudy report --screenshot docs/report.png     # also a PNG of the page (headless Chromium)

Sections: the verdict (retrieval_verdict.csv: the box ragstudy score-retrieval printed), setup (config.json), chunks per
strategy (chunks_<strategy>.csv), retrieval (retrieval_summary.csv / retrieval_paired.csv, else chunk_quality.csv's
retrieval rows from the chain's own contexts), answers (metrics_summary.csv, metrics_paired.csv), chunk quality and
HOPE (chunk_quality.csv), the survey (survey_*.csv), sweeps (sweep_summary.csv, sweep_best.csv) and a per-question
explorer (Dataset*.json, metrics_per_question.csv, --oracle or the Oracle.csv beside the run's questions
file, with one row per question). Every file is read through ragstudy.results; the
numbers shown (means, CIs, p-values) are the ones the scripts wrote. A section whose inputs are missing says which
command produces them. Strategy names, colours and order come from the registry.
"""

from __future__ import annotations

import argparse
import logging
import subprocess
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path

from Postprocessing import cli, common
from ragstudy import results
from ragstudy.io import PROJECT_ROOT, tell
from ragstudy.settings import Setting, record

logger = logging.getLogger(__name__)

TITLE = "Paragraph-based chunking: study report"


def code_version() -> str | None:
    """The repository's commit that *this report* was made with (not necessarily the run's)."""
    try:
        out = subprocess.run(["git", "-C", str(PROJECT_ROOT), "rev-parse", "--short", "HEAD"],
                             capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None


def build(results_dir: Path, generated: str | None = None, oracle: str | None = None,
          retrieval_dir: Path | None = None) -> tuple[str, str, list]:
    """The report as (html, markdown, sections) for the results folder ``results_dir`` (``oracle``: the oracle
    file; default: Oracle.csv beside the run's questions file; ``retrieval_dir``: the retrieval-only run's folder,
    default ``results_dir``)."""
    from Postprocessing.reportkit import blocks, inputs, report_sections

    inp = inputs.load(results_dir, oracle, retrieval_dir)
    styles = inputs.Strategies.from_registry()
    built = report_sections.build_sections(inp, styles)
    profile = (inp.config or {}).get("profile")
    subtitle = f"Results folder {results_dir}" + (f" · profile {profile}" if profile else "")
    if generated is None:
        version = code_version()
        generated = (f"Generated {datetime.now(timezone.utc):%Y-%m-%d %H:%M UTC} by ragstudy report"
                     + (f" at commit {version}" if version else ""))
    return (blocks.page_html(TITLE, subtitle, built, generated), blocks.page_md(TITLE, subtitle, built, generated),
            built)


# sections that show scores; a page with none of them is refused (an empty page would replace a real report)
SCORED_SECTIONS = ("verdict", "retrieval", "answers", "chunk-quality", "survey", "sweeps")
LEDGER = results.STUDY_LEDGER.name  # what `ragstudy study` writes at the top of its folder


def study_folders(results_dir: Path, retrieval_dir: str | None) -> tuple[Path, str | None, Path]:
    """(results folder, retrieval folder, default page) for --results-dir: a `ragstudy study` folder (study.json
    beside answers/ and retrieval/) is reported as the study's report stage does (answers/ with retrieval/, the
    page at its top), never as one bare folder; any other folder as it is."""
    if (retrieval_dir is None and (results_dir / LEDGER).is_file() and (results_dir / "answers").is_dir()
            and (results_dir / "retrieval").is_dir()):
        logger.warning("%s is a study folder (%s): reporting its answers/ and retrieval/ runs, as `ragstudy study` "
                       "does", results_dir, LEDGER)
        return results_dir / "answers", str(results_dir / "retrieval"), results.REPORT_HTML.path(results_dir)
    return results_dir, retrieval_dir, results.REPORT_HTML.path(results_dir)


def check_out(out: str | None) -> None:
    """--out names the HTML file to write; a folder (an existing one, or a path ending in /) is refused."""
    if out is not None and (out.endswith(("/", "\\")) or Path(out).is_dir()):
        raise common.DataError(f"--out {out}: a folder, not a file; give the HTML file to write, e.g. --out "
                               f"{results.REPORT_HTML.path(out)} (report.md goes beside it)")


def check_scored(results_dir: Path, built: list) -> None:
    """Refuse a page without any score (an empty or unscored folder), before anything is written."""
    from Postprocessing.reportkit.blocks import Note

    if all(all(isinstance(b, Note) for b in s.blocks) for s in built if s.section_id in SCORED_SECTIONS):
        raise common.DataError(f"{results_dir}: nothing scored to report (no retrieval verdict, answer scores, "
                               "chunk quality, survey or sweep in it); score the run first (ragstudy "
                               "score-retrieval, score-answers or chunk-quality --results-dir "
                               f"{results_dir}), or pass the folder that holds the scores. Nothing was written")


def write_report(args: ReportSettings) -> results.Written:
    """`ragstudy report`: the page (report.html and report.md beside it, a screenshot when asked) from the results
    folder; the files it wrote, with exit code 3 when the screenshot could not be taken, 1 on a JavaScript error."""
    check_out(args.out)
    results_dir, retrieval_dir, default_out = study_folders(Path(args.results_dir), args.retrieval_dir)
    out = Path(args.out) if args.out else default_out
    from ragstudy import results
    from ragstudy.grid import runidentity

    from Postprocessing.reportkit.inputs import ranked_folders

    if not results_dir.is_dir():
        raise common.DataError(f"--results-dir {results_dir}: folder not found; pass the folder a run or "
                               "`ragstudy study` wrote")
    from ragstudy.grid.variants import run_groups

    ranked, every = ranked_folders(Path(retrieval_dir) if retrieval_dir else results_dir)  # the rankings
    runs = run_groups(results.open_run(Path(retrieval_dir) if retrieval_dir else results_dir))
    main = runs[0]
    variant_folders = [folder for group in runs for folder in group.members.values()]
    for folder in dict.fromkeys([*every.values(), *variant_folders, results_dir]):  # config.json as the runs
        runidentity.check_config(folder)  # recorded it, or refused
    runidentity.check_compared(ranked, list(main.members), main.ranking,  # one configuration per page (its main
                               args.allow_mixed_configurations, main.unshared())  # group's)
    html_text, md_text, built = build(results_dir, oracle=args.oracle, retrieval_dir=retrieval_dir)
    check_scored(results_dir, built)
    out.parent.mkdir(parents=True, exist_ok=True)
    common.atomic_write_text(out, html_text)
    md_path = out.with_suffix(".md")
    common.atomic_write_text(md_path, md_text)
    from Postprocessing.reportkit.blocks import Note

    empty = [s.title for s in built if all(isinstance(b, Note) for b in s.blocks)]
    tell(f"Wrote {out} ({len(html_text.encode()) / 1e6:.1f} MB) and {md_path}; "
         + (f"no inputs for: {', '.join(empty)}" if empty else "every section has its inputs"))
    if args.screenshot:
        from Postprocessing.reportkit import browser

        try:
            result = browser.render(out, Path(args.screenshot), width=args.width, height=args.height)
        except browser.BrowserError as exc:  # the report itself is written; only the screenshot is missing
            logger.error("Screenshot not written: %s", exc)
            return results.Written(out.parent, (out, md_path), 3)
        for message in result.errors:
            logger.error("JavaScript error in %s: %s", out, message)
        tell(f"Wrote {args.screenshot}")
        return results.Written(out.parent, (out, md_path, Path(args.screenshot)), 1 if result.errors else 0)
    return results.Written(out.parent, (out, md_path))


def settings() -> tuple[Setting, ...]:
    """This script's flags (shared ones from Postprocessing.cli)."""
    return (
        cli.RESULTS_DIR.but(help="results folder written by `ragstudy answer|retrieve|chunks` and the scoring "
                                 "subcommands"),
        Setting("retrieval_dir", "folder of a retrieval-only run scored by ragstudy score-retrieval, for the verdict "
                "and the retrieval section (`ragstudy study` uses <study>/retrieval)", default_doc="--results-dir"),
        cli.ORACLE.but(default_doc="Oracle.csv beside the questions file the run used"),
        Setting("out", "HTML file to write; report.md goes beside it", default_doc="<results-dir>/report.html"),
        Setting("screenshot", "also render the page in headless Chromium and save a screenshot (fails on a "
                "JavaScript error)", metavar="PNG", default_doc="no screenshot"),
        Setting("width", "screenshot width in pixels", type=int, default=1280),
        Setting("height", "screenshot height in pixels", type=int, default_doc="the whole page"),
        cli.ALLOW_MIXED,
    )


def build_parser() -> argparse.ArgumentParser:
    return cli.script_parser(__doc__.split("\n\nSections:")[0], settings())


ReportSettings = record("ReportSettings", settings())  # the job's typed settings (docs/python.md)

