"""The verdict box of the bundled sample's report as a reader sees it (issue 35 item 4), in headless Chromium at
1280 px: one sentence first, then a strategy × budget matrix per group (retriever) with the best in bold, every table
of the box inside the page (it was 1,700 px wide), the long prose behind a closed toggle (the box was about 1,400
words in four bullet lists). A real retrieval-only run of the bundled sample: every strategy, the default budgets,
ranked with bm25 and bm25-parents (lexical: nothing to embed, so the run takes seconds, not minutes; the box's
layout does not depend on the retriever)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from Postprocessing.reportkit import browser
from ragstudy import registry, results
from ragstudy.scoring.verdict import budget_label
from ragstudy_cli import app

NO_CHROMIUM = "no Chromium on this machine (Debian package 'chromium'; tools/setup.sh installs it)"
PAGE_WIDTH = 1280

BOX = r"""(() => {
  const box = document.getElementById('verdict');
  const words = t => t.split(/\s+/).filter(w => /\w/.test(w)).length;
  const first = box.querySelector('h2').nextElementSibling;
  const widths = () => [...box.querySelectorAll('table')].map(t => {
    const r = t.getBoundingClientRect(); return {id: t.id, width: r.width, right: r.right}; });
  const matrices = [...box.querySelectorAll('table[id^="verdict-matrix"]')].filter(t => !t.closest('details')).map(t =>
    ({headers: [...t.tHead.rows[0].cells].map(c => c.textContent),
      rows: [...t.tBodies[0].rows].map(r => [...r.cells].map(c => ({text: c.textContent, bold: !!c.querySelector('strong')})))}));
  const closed = {words: words(box.innerText), widths: widths(), toggles: box.querySelectorAll('details:not([open])').length,
                  lists: [...box.querySelectorAll('ul')].filter(u => !u.closest('details')).length};
  box.querySelectorAll('details').forEach(d => d.open = true);
  return {first: first.className, headline: first.querySelector('p.headline').textContent, matrices, closed,
          open: {words: words(box.innerText), widths: widths()}, pageWidth: document.documentElement.scrollWidth,
          innerWidth: window.innerWidth};
})()"""


@pytest.fixture(scope="module")
def sample_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bundled sample ranked by every strategy with bm25 and bm25-parents, scored, and its report."""

    root = tmp_path_factory.mktemp("verdict-box")
    out = root / "run"
    assert app.main(app.chain_subcommand(["--retrieval-only", "--profile", "lite", "--retriever", "bm25,bm25-parents",
                                  "--db-dir", str(root / "db"), "--output-dir", str(out)])) == 0
    assert app.main(["score-retrieval", "--results-dir", str(out), "--no-plot", "--n-resamples", "200"]) == 0
    assert app.main(["report", "--results-dir", str(out)]) == 0
    return out


@pytest.mark.slow
@pytest.mark.skipif(browser.find_chromium() is None, reason=NO_CHROMIUM)
def test_the_verdict_box_is_one_sentence_then_a_matrix_per_group_within_1280_px(sample_report: Path,
                                                                                 tmp_path: Path) -> None:
    from Postprocessing.reportkit.inputs import ranked_folders
    from ragstudy.scoring.verdict import all_verdicts

    result = browser.render(sample_report / "report.html", tmp_path / "box.png", width=PAGE_WIDTH, height=1200,
                            probe=BOX)
    assert result.errors == [], result.errors
    box = result.probe
    assert box["first"] == "lead"  # the box opens with the sentence (and its chart)
    assert len(re.split(r"(?<=[.!?])\s+(?=[A-Z])", box["headline"].strip())) == 1  # one sentence
    folders = ranked_folders(sample_report)[1]
    assert list(folders) == ["bm25", "bm25-parents"] and len(box["matrices"]) == 2  # one matrix per group
    strategies = [registry.get(name).display_name for name in registry.available()]
    for matrix, folder in zip(box["matrices"], folders.values(), strict=True):
        v = all_verdicts(results.read_table(folder, results.RETRIEVAL_VERDICT))[0]
        assert matrix["headers"] == ["strategy", *(budget_label(b.budget, v.unit) for b in v.budgets)]
        assert [row[0]["text"] for row in matrix["rows"]] == strategies  # one row per strategy
        for column, b in enumerate(v.budgets, start=1):  # the best of each budget, and only it, in bold
            bold = {row[0]["text"] for row in matrix["rows"] if row[column]["bold"]}
            assert bold == {s.display for s in b.best}
    for state in ("closed", "open"):  # every table of the box inside the page, with the details shut and open
        for table in box[state]["widths"]:
            assert table["width"] <= PAGE_WIDTH and table["right"] <= box["innerWidth"], (state, table)
    assert box["pageWidth"] <= PAGE_WIDTH
    assert box["closed"]["toggles"] == 1 and box["closed"]["lists"] == 0  # the prose behind one toggle
    assert box["closed"]["words"] <= 500 < box["open"]["words"]


@pytest.mark.slow
def test_report_md_gives_the_sentence_then_the_matrices_then_the_details(sample_report: Path) -> None:
    from Postprocessing.reportkit.inputs import main_group_source, ranked_folders
    from ragstudy.scoring.verdict import all_verdicts, verdict_setting
    from ragstudy.scoring.verdict_across import CrossVerdict

    md = (sample_report / "report.md").read_text(encoding="utf-8")
    box = md[md.index("## Verdict\n"):md.index("## Setup\n")]
    folders = ranked_folders(sample_report)[1]
    main = all_verdicts(results.read_table(folders["bm25"], results.RETRIEVAL_VERDICT))[0]
    sentence = main.headline(**verdict_setting(results.read_config(main_group_source(sample_report)[0]).raw))
    assert box.startswith(f"## Verdict\n\n**{sentence}**\n")  # the sentence first
    cross = CrossVerdict.read(folders)
    details = box.index("### Details: ")
    assert box.index(sentence) < box.index(cross.headline()) < box.index("**Under bm25**") < \
        box.index("**Under bm25-parents**") < box.index(main.legend()) < details  # then the matrices, the legend
    header, *lines = main.lines()
    assert details < box.index(header) and all(line in box[details:] for line in lines)  # the prose after them
    assert all(sentence in box[details:] for sentence in cross.sentences())
