"""The report's building blocks and their two renderings: one self-contained HTML page (plotly.js embedded once,
styles and a few lines of vanilla JS inline) and a Markdown file with the same tables.

Numeric table cells carry their unrounded value in ``data-value`` (and CIs in ``data-ci-low``/``data-ci-high``):
the page sorts by them, and the tests compare them with the source files.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Union


@dataclass(frozen=True)
class Cell:
    """A table cell: its text, and for numbers the exact value (and CI) behind the text."""

    text: str
    value: float | None = None
    ci: tuple[float, float] | None = None
    color: str | None = None  # a strategy's colour swatch before the text
    bold: bool = False  # stands out (the best of a verdict matrix's column)


@dataclass(frozen=True)
class Text:
    text: str


@dataclass(frozen=True)
class Heading:
    text: str


@dataclass(frozen=True)
class Note:
    """Why something is not shown, and the command that would produce it."""

    text: str
    commands: tuple[str, ...] = ()


@dataclass(frozen=True)
class Table:
    headers: Sequence[str]
    rows: Sequence[Sequence[Cell | str]]
    align: str | None = None  # one of 'l'/'r' per column
    table_id: str | None = None
    filterable: bool = False  # a text filter and a column filter above the table
    filter_column: int | None = None  # column offered as a drop-down filter (e.g. strategy)
    markdown: bool = True  # also written to report.md


@dataclass(frozen=True)
class Bullets:
    items: Sequence[str]


@dataclass(frozen=True)
class Figure:
    fig: Any  # plotly.graph_objects.Figure
    caption: str = ""


@dataclass(frozen=True)
class Details:
    summary: str
    text: str  # shown preformatted


@dataclass(frozen=True)
class Lead:
    """A section's opening: one plain sentence in large type with a compact figure beside it (the verdict box)."""

    text: str
    fig: Any = None  # plotly.graph_objects.Figure, or None
    caption: str = ""


@dataclass(frozen=True)
class Tiles:
    """Small captioned tables side by side, wrapping to the page's width (one verdict matrix per group)."""

    tiles: Sequence[tuple[str, Table]]  # (caption, table); an empty caption shows none


@dataclass(frozen=True)
class Fold:
    """Blocks behind a toggle: a closed <details> in HTML, a heading and the blocks in Markdown."""

    summary: str
    blocks: Sequence[Any]  # Block


Block = Union[Text, Heading, Note, Table, Bullets, Figure, Details, Lead, Tiles, Fold]


@dataclass
class Section:
    section_id: str
    title: str
    blocks: list[Block] = field(default_factory=list)


# ------------------------------------------------------------------------------------------------- formatting

def fmt(value: Any, digits: int = 3) -> str:
    """A number for a table: '–' for missing, thousands separators for large values."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if isinstance(value, (int,)) and not isinstance(value, bool):
        return f"{value:,}"
    value = float(value)
    if value.is_integer() and abs(value) >= 1000:
        return f"{int(value):,}"
    return f"{value:,.{digits}f}"


def num(value: Any, digits: int = 3) -> Cell:
    v = None if value is None or (isinstance(value, float) and math.isnan(value)) else float(value)
    return Cell(fmt(value, digits), v)


def estimate(mean: float, low: float, high: float, digits: int = 3, signed: bool = False) -> Cell:
    """``0.345 [0.301, 0.390]`` with the exact values attached (no CI part when the CI is missing)."""
    if mean is None or math.isnan(mean):
        return Cell("–")
    sign = "+" if signed else ""
    text = f"{mean:{sign}.{digits}f}"
    ci = None
    if not (low is None or high is None or math.isnan(low) or math.isnan(high)):
        text += f" [{low:.{digits}f}, {high:.{digits}f}]"
        ci = (float(low), float(high))
    return Cell(text.replace("-", "−"), float(mean), ci)


def pvalue(p: float) -> Cell:
    if p is None or math.isnan(p):
        return Cell("–")
    return Cell("<0.001" if p < 0.001 else f"{p:.3f}", float(p))


# ------------------------------------------------------------------------------------------------------ HTML

def _esc(text: Any) -> str:
    return html.escape(str(text), quote=True)


def _cell_html(cell: Cell | str, tag: str = "td") -> str:
    if not isinstance(cell, Cell):
        cell = Cell(str(cell))
    attrs = ""
    if cell.value is not None:
        attrs += f' data-value="{cell.value!r}"'
    if cell.ci is not None:
        attrs += f' data-ci-low="{cell.ci[0]!r}" data-ci-high="{cell.ci[1]!r}"'
    text = f"<strong>{_esc(cell.text)}</strong>" if cell.bold else _esc(cell.text)
    if cell.color:
        attrs += ' class="swc"'
        return f'<{tag}{attrs}><span class="sw" style="background:{_esc(cell.color)}"></span>{text}</{tag}>'
    return f"<{tag}{attrs}>{text}</{tag}>"


def table_html(table: Table) -> str:
    align = table.align or "l" * len(table.headers)
    tid = f' id="{_esc(table.table_id)}"' if table.table_id else ""
    parts = []
    if table.filterable and table.table_id:
        parts.append(f'<div class="filters"><input type="search" placeholder="Filter rows (any text)…" '
                     f'data-filter-for="{_esc(table.table_id)}" aria-label="filter rows">')
        if table.filter_column is not None:
            values = sorted({(r[table.filter_column].text if isinstance(r[table.filter_column], Cell)
                              else str(r[table.filter_column])) for r in table.rows})
            options = "".join(f'<option value="{_esc(v)}">{_esc(v)}</option>' for v in values)
            parts.append(f'<select data-filter-col="{table.filter_column}" data-filter-for="{_esc(table.table_id)}"'
                         f' aria-label="{_esc(table.headers[table.filter_column])}">'
                     f'<option value="">all</option>{options}</select>')
        parts.append(f'<span class="count" data-count-for="{_esc(table.table_id)}"></span></div>')
    head = "".join(f'<th class="{"num" if a == "r" else ""}" title="click to sort">{_esc(h)}</th>'
                   for h, a in zip(table.headers, align, strict=True))
    body = []
    for row in table.rows:
        cells = "".join(_cell_html(c).replace("<td", '<td class="num"', 1) if a == "r" else _cell_html(c)
                        for c, a in zip(row, align, strict=True))
        body.append(f"<tr>{cells}</tr>")
    parts.append(f'<div class="tablewrap"><table class="sortable"{tid}><thead><tr>{head}</tr></thead><tbody>'
                 + "".join(body) + "</tbody></table></div>")
    return "".join(parts)


class HtmlRenderer:
    """Renders blocks; plotly.js goes into the first figure only (``include_plotlyjs=True`` once)."""

    def __init__(self) -> None:
        self.plotly_included = False
        self.n_figures = 0

    def block(self, block: Block) -> str:
        if isinstance(block, Text):
            return f"<p>{_esc(block.text)}</p>"
        if isinstance(block, Heading):
            return f"<h3>{_esc(block.text)}</h3>"
        if isinstance(block, Note):
            cmds = "".join(f"<pre class=\"cmd\"><code>{_esc(c)}</code></pre>" for c in block.commands)
            return f'<div class="note"><p>{_esc(block.text)}</p>{cmds}</div>'
        if isinstance(block, Bullets):
            return "<ul>" + "".join(f"<li>{_esc(i)}</li>" for i in block.items) + "</ul>"
        if isinstance(block, Table):
            return table_html(block)
        if isinstance(block, Details):
            return f"<details><summary>{_esc(block.summary)}</summary><pre>{_esc(block.text)}</pre></details>"
        if isinstance(block, Tiles):
            return '<div class="tiles">' + "".join(
                '<div class="tile">' + (f'<p class="tilecap">{_esc(caption)}</p>' if caption else "")
                + table_html(table) + "</div>" for caption, table in block.tiles) + "</div>"
        if isinstance(block, Fold):
            return (f'<details class="fold"><summary>{_esc(block.summary)}</summary>'
                    + "".join(self.block(b) for b in block.blocks) + "</details>")
        if isinstance(block, Lead):
            figure = self.block(Figure(block.fig, block.caption)) if block.fig is not None else ""
            return f'<div class="lead"><p class="headline">{_esc(block.text)}</p>{figure}</div>'
        if isinstance(block, Figure):
            self.n_figures += 1
            div = block.fig.to_html(full_html=False, include_plotlyjs=not self.plotly_included,
                                    include_mathjax=False, div_id=f"fig{self.n_figures}",
                                    config={"displaylogo": False, "responsive": True})
            self.plotly_included = True
            cap = f"<figcaption>{_esc(block.caption)}</figcaption>" if block.caption else ""
            return f'<figure class="plot">{div}{cap}</figure>'
        raise TypeError(f"unknown block {block!r}")


CSS = """
body{font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#1d2430;margin:0;background:#f6f7f9}
header{background:#1d2430;color:#fff;padding:18px 32px}header h1{margin:0;font-size:22px}
header p{margin:4px 0 0;color:#c9d1dc}nav{padding:8px 32px;background:#e9edf2;position:sticky;top:0;z-index:5}
nav a{margin-right:14px;color:#1f4e8c;text-decoration:none;font-size:14px}
main{padding:8px 32px 40px;max-width:1400px}section{background:#fff;border:1px solid #dde2e8;border-radius:6px;
padding:4px 20px 16px;margin:16px 0}h2{font-size:19px;border-bottom:1px solid #e3e7ec;padding-bottom:6px}
h3{font-size:16px;margin:18px 0 6px}section#verdict{border:2px solid #1f4e8c;background:#f4f8fd}.tablewrap{overflow-x:auto;max-width:100%}
table{border-collapse:collapse;font-size:13px;margin:6px 0 10px}th,td{border:1px solid #dde2e8;padding:3px 7px;
vertical-align:top;text-align:left}th{background:#f0f3f6;cursor:pointer;white-space:nowrap}
th[aria-sort=ascending]::after{content:" ▲"}th[aria-sort=descending]::after{content:" ▼"}
td.num,th.num{text-align:right;white-space:nowrap}.swc{white-space:nowrap}.sw{display:inline-block;width:10px;height:10px;
border-radius:2px;margin-right:5px}.note{background:#fff8e5;border-left:4px solid #e6a700;padding:4px 12px;
margin:8px 0}pre{background:#f4f5f7;padding:8px;overflow-x:auto;white-space:pre-wrap;font-size:12.5px}
pre.cmd{margin:4px 0}code{font-family:ui-monospace,Menlo,Consolas,monospace}figure.plot{margin:6px 0}
figcaption{font-size:13px;color:#556}.filters{margin:6px 0}.filters input{width:320px;padding:4px}
.filters select{padding:4px;margin-left:8px}.count{margin-left:10px;color:#556;font-size:13px}
#explorer-table td{max-width:380px}#explorer-table td:nth-child(2),#explorer-table td:nth-child(3),#explorer-table td:nth-child(5){min-width:220px}footer{color:#667;font-size:12px;padding:0 32px 24px}
.lead{display:flex;flex-wrap:wrap;gap:18px;align-items:center}.lead p.headline{flex:1 1 380px;font-size:18px;
line-height:1.5;font-weight:600;margin:10px 0}.lead figure.plot{flex:0 1 520px;min-width:320px;margin:0}
.tiles{display:flex;flex-wrap:wrap;gap:4px 24px}.tile .tablewrap{max-width:100%}p.tilecap{margin:8px 0 0;font-weight:600}
details.fold{margin:10px 0}details.fold>summary{cursor:pointer;color:#1f4e8c;font-weight:600}
details.fold td.num,details.fold th{white-space:normal}
"""

# Sorting (numbers by data-value, else text) and filtering; no library, no network.
JS = """
(function(){
function key(td){var v=td.getAttribute('data-value');return v===null?[1,td.textContent.trim().toLowerCase()]:[0,parseFloat(v)];}
function cmp(a,b){if(a[0]!==b[0])return a[0]-b[0];return a[1]<b[1]?-1:a[1]>b[1]?1:0;}
document.querySelectorAll('table.sortable').forEach(function(t){
 Array.prototype.forEach.call(t.tHead.rows[0].cells,function(th,i){th.addEventListener('click',function(){
  var dir=th.getAttribute('aria-sort')==='ascending'?-1:1;
  Array.prototype.forEach.call(t.tHead.rows[0].cells,function(h){h.removeAttribute('aria-sort');});
  th.setAttribute('aria-sort',dir===1?'ascending':'descending');
  var rows=Array.prototype.slice.call(t.tBodies[0].rows);
  rows.sort(function(r1,r2){return dir*cmp(key(r1.cells[i]),key(r2.cells[i]));});
  rows.forEach(function(r){t.tBodies[0].appendChild(r);});});});});
function applyFilter(id){var t=document.getElementById(id);if(!t)return;
 var q=(document.querySelector('input[data-filter-for="'+id+'"]')||{value:''}).value.toLowerCase();
 var sel=document.querySelector('select[data-filter-for="'+id+'"]');var col=sel?parseInt(sel.getAttribute('data-filter-col'),10):-1;
 var shown=0;Array.prototype.forEach.call(t.tBodies[0].rows,function(r){
  var ok=(!q||r.textContent.toLowerCase().indexOf(q)>=0)&&(!sel||!sel.value||r.cells[col].textContent.trim()===sel.value);
  r.hidden=!ok;if(ok)shown++;});
 var c=document.querySelector('[data-count-for="'+id+'"]');if(c)c.textContent=shown+' of '+t.tBodies[0].rows.length+' rows';}
document.querySelectorAll('[data-filter-for]').forEach(function(el){var id=el.getAttribute('data-filter-for');
 el.addEventListener('input',function(){applyFilter(id);});el.addEventListener('change',function(){applyFilter(id);});applyFilter(id);});
})();
"""


def page_html(title: str, subtitle: str, sections: Sequence[Section], footer: str) -> str:
    renderer = HtmlRenderer()
    nav = "".join(f'<a href="#{_esc(s.section_id)}">{_esc(s.title)}</a>' for s in sections)
    body = []
    for s in sections:
        inner = "".join(renderer.block(b) for b in s.blocks)
        body.append(f'<section id="{_esc(s.section_id)}"><h2>{_esc(s.title)}</h2>{inner}</section>')
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>{_esc(title)}</title><style>{CSS}</style></head><body>"
            f"<header><h1>{_esc(title)}</h1><p>{_esc(subtitle)}</p></header><nav>{nav}</nav><main>"
            + "".join(body) + f"</main><footer>{_esc(footer)}</footer><script>{JS}</script></body></html>\n")


# -------------------------------------------------------------------------------------------------- Markdown

MD_CELL_MAX_CHARS = 1000  # a report.md table cell longer than this is cut with an ellipsis (report.html has it whole)
_MD_ESCAPES = str.maketrans({"\\": "\\\\", "|": "\\|"})


def _md_cell(cell: Cell | str) -> str:
    """A table cell as Markdown that renders as the text it holds, on one line: HTML in it (`<script>`, an
    autolink `<javascript:...>`) is escaped, and `](` becomes `]\\(`, so no inline link or image
    (`[x](javascript:...)`) forms; a cell over MD_CELL_MAX_CHARS is cut with an ellipsis and its length (questions
    and answers come from users' files and LLMs: an 18,000-character question is one)."""
    text = " ".join((cell.text if isinstance(cell, Cell) else str(cell)).split())
    if len(text) > MD_CELL_MAX_CHARS:
        text = f"{text[:MD_CELL_MAX_CHARS].rstrip()}… ({len(text):,} characters; whole in report.html)"
    text = html.escape(text, quote=False).translate(_MD_ESCAPES).replace("](", "]\\(")
    return f"**{text}**" if isinstance(cell, Cell) and cell.bold and text else text


def table_md(table: Table) -> str:
    align = table.align or "l" * len(table.headers)
    lines = ["| " + " | ".join(_md_cell(h) for h in table.headers) + " |",
             "| " + " | ".join("---:" if a == "r" else "---" for a in align) + " |"]
    lines += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in table.rows]
    return "\n".join(lines) + "\n"


def page_md(title: str, subtitle: str, sections: Sequence[Section], footer: str) -> str:
    out = [f"# {title}\n", f"{subtitle}\n"]
    for s in sections:
        out.append(f"## {s.title}\n")
        out += _blocks_md(s.blocks)
    out.append(f"---\n{footer}\n")
    return "\n".join(out)


def _blocks_md(blocks: Sequence[Block]) -> list[str]:
    """The Markdown of a section's blocks (a Fold's blocks follow its heading)."""
    out: list[str] = []
    for b in blocks:
        if isinstance(b, Tiles):
            out += [(f"**{caption}**\n\n" if caption else "") + table_md(table) for caption, table in b.tiles]
        elif isinstance(b, Fold):
            out.append(f"### {b.summary}\n")
            out += _blocks_md(b.blocks)
        elif isinstance(b, Lead):
            out.append(f"**{b.text}**\n" + (f"\n*Figure in report.html: {b.caption or 'plot'}*\n" if b.fig else ""))
        elif isinstance(b, Text):
            out.append(b.text + "\n")
        elif isinstance(b, Heading):
            out.append(f"### {b.text}\n")
        elif isinstance(b, Note):
            out.append(f"> {b.text}\n" + "".join(f">\n> `{c}`\n" for c in b.commands))
        elif isinstance(b, Bullets):
            out.append("".join(f"- {i}\n" for i in b.items))
        elif isinstance(b, Table) and b.markdown:
            out.append(table_md(b))
        elif isinstance(b, Table):
            out.append(f"({len(b.rows)} rows: see report.html)\n")
        elif isinstance(b, Figure):
            out.append(f"*Figure in report.html: {b.caption or 'plot'}*\n")
        elif isinstance(b, Details):
            out.append(f"<details><summary>{b.summary}</summary>\n\n```\n{b.text.rstrip()}\n```\n</details>\n")
    return out
