"""Measure the paragraph segmenter on PDFs: speed against raw extraction, sizes, furniture leakage, and
boundary precision/recall against ground truth where it exists.

For each PDF and each mode (layout, paper) in the same run:
  * pages/s, and the ratio of segmenting time to raw `page.get_text("dict")` time on the same pages (raw is
    timed both with MuPDF's default dict flags, as the paper called it, and with the segmenter's flags);
  * paragraphs, median / p95 / max length in characters;
  * share of chunks containing a running string (a line that repeats, digits ignored, on >= 30 % of pages and
    sits mostly in the top/bottom 15 % of the page), share of chunks with dotted-leader lines;
  * share of chunks carrying a numbered running head: text that shares the top row of a page with the printed
    page number (a number that tracks the page on >= 3 pages), found here independently of the segmenter; this
    catches heads that change with the chapter, which the repetition count misses;
  * accented letters kept in the chunks vs in the raw text (LaTeX's separate accent glyphs composed);
  * with ground truth (Docling `*.docling-gt.json` or the sample's `<stem>.json`): paragraph-boundary
    precision/recall/F1 and the share of header/footer/TOC blocks whose text leaked into chunks.

Example:
    python benchmarks/segmentation.py ../shared/pdfs --groundtruth ../shared/pdfs/groundtruth --json results/seg.json
"""

from __future__ import annotations

import argparse
import difflib
import json
import logging
import os
import re
import statistics
import tempfile
import time
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path

import pymupdf

from ragstudy.text.cleaning.furniture import LEADER, furniture_key
from ragstudy.text.cleaning.lines import EXTRACT_FLAGS, extract_lines
from RAGParagraph.segmenter import SegmenterConfig, segment_pdf
from ragstudy.text.textnorm import compose_latex_accents

logger = logging.getLogger("benchmarks.segmentation")

ACCENTED = re.compile(r"[àèéìíòóùúÀÈÉÌÍÒÓÙÚçÇäöüÄÖÜâêîôûñ]")
_WORD = re.compile(r"\w+")
_DOCLING_KIND = {
    "text": "paragraph", "paragraph": "paragraph", "caption": "paragraph", "footnote": "paragraph",
    "code": "paragraph", "formula": "paragraph", "reference": "paragraph", "checkbox_selected": "paragraph",
    "checkbox_unselected": "paragraph", "section_header": "title", "title": "title", "list_item": "list_item",
    "page_header": "header", "page_footer": "footer", "table": "table", "document_index": "toc",
}
FURNITURE_KINDS = ("header", "footer", "toc")


@dataclass(frozen=True)
class Row:
    """One line of the result table."""

    pdf: str
    mode: str
    pages: int
    seconds: float
    pages_per_s: float
    raw_default_s: float
    raw_flags_s: float
    ratio_default: float
    ratio_flags: float
    paragraphs: int
    median_chars: float
    p95_chars: float
    max_chars: int
    running_share: float
    head_share: float
    leader_share: float
    accents_kept: int
    accents_raw: int
    boundary_p: float | None = None
    boundary_r: float | None = None
    boundary_f1: float | None = None
    furniture_leak: float | None = None


# ----------------------------------------------------------------------------- timing


def _time_raw_once(path: Path, flags: int | None) -> float:
    start = time.perf_counter()
    with pymupdf.open(path) as doc:
        for page in doc:
            page.get_text("dict") if flags is None else page.get_text("dict", flags=flags)
    return time.perf_counter() - start


def _time_segment_once(path: Path, config: SegmenterConfig) -> tuple[float, list]:
    start = time.perf_counter()
    with pymupdf.open(path) as doc:
        paragraphs = segment_pdf(doc, config)
    return time.perf_counter() - start, paragraphs


def time_all(path: Path, modes: list[str], repeat: int) -> tuple[dict[str, float], dict[str, list]]:
    """Best-of-`repeat` seconds (open + work) for raw extraction and each mode, measured interleaved so that
    load from other processes hits all of them alike. Keys: 'raw_default', 'raw_flags', and the modes."""
    best: dict[str, float] = {}
    paragraphs: dict[str, list] = {}
    for _ in range(repeat):
        for key, flags in (("raw_default", None), ("raw_flags", EXTRACT_FLAGS)):
            best[key] = min(best.get(key, float("inf")), _time_raw_once(path, flags))
        for mode in modes:
            seconds, paragraphs[mode] = _time_segment_once(path, SegmenterConfig(mode=mode))
            best[mode] = min(best.get(mode, float("inf")), seconds)
    return best, paragraphs


# ----------------------------------------------------------------------------- document-only metrics


def _norm(text: str) -> str:
    return furniture_key(text)


def running_strings(path: Path, min_frac: float = 0.3, band: float = 0.15) -> set[str]:
    """Lines (digits ignored, >= 8 chars) that repeat on >= min_frac of pages, mostly in the top/bottom band."""
    with pymupdf.open(path) as doc:
        pages = extract_lines(doc)
    if len(pages) < 2:
        return set()
    on_pages: Counter = Counter()
    in_band: Counter = Counter()
    total: Counter = Counter()
    for page in pages:
        seen = set()
        for line in page.lines:
            key = _norm(line.text)
            if len(key) < 8 or not any(c.isalpha() for c in key):
                continue
            seen.add(key)
            total[key] += 1
            centre = (line.y0 + line.y1) / 2
            if centre < band * page.height or centre > (1 - band) * page.height:
                in_band[key] += 1
        on_pages.update(seen)
    need = max(2, min_frac * len(pages))
    return {k for k, n in on_pages.items() if n >= need and in_band[k] >= 0.5 * total[k]}


_NUMBER = re.compile(r"^(?:\d{1,4}|[ivxlc]{1,7})$", re.IGNORECASE)
_ROMAN = {"i": 1, "v": 5, "x": 10, "l": 50, "c": 100}


def _number_value(text: str) -> int:
    if text.isdigit():
        return int(text)
    values = [_ROMAN[c] for c in text.lower()]
    return sum(-v if i + 1 < len(values) and values[i + 1] > v else v for i, v in enumerate(values))


def numbered_heads(path: Path, band: float = 0.15) -> dict[int, set[str]]:
    """Per page (1-based), the texts that share a top-band row with the printed page number, where the
    document's page numbers are the numbers whose offset to the physical page recurs on >= 3 pages and >= 15 % of
    them (section numbers of sections that each open a page can coincide on a few). Texts that also appear in
    that page's body (a section title repeated by its head) are left out."""
    with pymupdf.open(path) as doc:
        pages = extract_lines(doc)
    rows: list[tuple[int, list, list]] = []  # (page, numbers in the row, texts in the row)
    offsets: Counter = Counter()
    for page in pages:
        band_lines = sorted((ln for ln in page.lines if (ln.y0 + ln.y1) / 2 < band * page.height), key=lambda ln: ln.y0)
        used: set[int] = set()
        for i, line in enumerate(band_lines):
            if i in used:
                continue
            centre = (line.y0 + line.y1) / 2
            row = [j for j, other in enumerate(band_lines) if j not in used and abs((other.y0 + other.y1) / 2 - centre) <= 3.0]
            used.update(row)
            numbers = [_number_value(band_lines[j].text) for j in row if _NUMBER.match(band_lines[j].text)]
            texts = [band_lines[j].text for j in row if not _NUMBER.match(band_lines[j].text)]
            if numbers and texts:
                rows.append((page.index, numbers, texts))
                offsets.update({n - page.index - 1 for n in numbers})
    good = {off for off, n in offsets.items() if n >= max(3, 0.15 * len(pages))}
    heads: dict[int, set[str]] = {}
    for index, numbers, texts in rows:
        if any(n - index - 1 in good for n in numbers):
            body = " ".join(ln.text for ln in pages[index].lines if ln.text not in texts)
            keep = {t for t in texts if sum(c.isalpha() for c in t) >= 4 and t not in body}
            if keep:
                heads.setdefault(index + 1, set()).update(keep)
    return heads


def head_share(paragraphs: list, heads: dict[int, set[str]]) -> float:
    """Share of paragraphs holding a numbered running head of a page they span."""
    leaked = 0
    for p in paragraphs:
        texts = {t for page in range(p.page_start, p.page_end + 1) for t in heads.get(page, ())}
        leaked += any(t in p.text for t in texts)
    return leaked / max(1, len(paragraphs))


def raw_accents(path: Path) -> int:
    """Accented letters in the PDF's plain text, LaTeX's separate accent glyphs composed ('`e' is one)."""
    with pymupdf.open(path) as doc:
        return sum(len(ACCENTED.findall(compose_latex_accents(page.get_text()))) for page in doc)


# ----------------------------------------------------------------------------- ground truth


def _docling_blocks(data: dict) -> list[dict]:
    """Docling document -> [{kind, pages, text}] in body reading order, furniture appended."""
    by_ref: dict[str, dict] = {}
    for key in ("texts", "tables", "groups", "pictures"):
        for item in data.get(key, []):
            by_ref[item["self_ref"]] = item

    def table_text(item: dict) -> str:
        return " ".join(cell.get("text", "") for cell in item.get("data", {}).get("table_cells", []))

    def to_block(item: dict) -> dict | None:
        label = item.get("label", "")
        kind = _DOCLING_KIND.get(label)
        if kind is None:
            return None
        text = table_text(item) if label == "table" else item.get("text", "")
        if kind == "table" and LEADER.search(text):
            kind = "toc"
        pages = [p["page_no"] for p in item.get("prov", [])] or [0]
        return {"kind": kind, "pages": [min(pages), max(pages)], "text": text}

    blocks: list[dict] = []

    def walk(ref: str) -> None:
        item = by_ref.get(ref)
        if item is None:
            return
        if ref.startswith("#/groups/"):
            for child in item.get("children", []):
                walk(child["$ref"])
            return
        block = to_block(item)
        if block is not None:
            blocks.append(block)

    for child in data.get("body", {}).get("children", []):
        walk(child["$ref"])
    for child in data.get("furniture", {}).get("children", []):
        walk(child["$ref"])
    return blocks


def load_groundtruth(folders: list[Path], pdf: Path) -> list[dict] | None:
    """Ground-truth blocks for a PDF from the first folder holding `<stem>.json` or `<stem>.docling-gt.json`."""
    for folder in folders:
        for name, docling in ((f"{pdf.stem}.json", False), (f"{pdf.stem}.docling-gt.json", True)):
            path = folder / name
            if path.is_file():
                data = json.loads(path.read_text(encoding="utf-8"))
                if docling or "schema_name" in data:
                    return _docling_blocks(data)
                if "blocks" not in data:
                    raise ValueError(f"{path}: ground truth needs a 'blocks' list (kind, pages, text)")
                return data["blocks"]
    return None


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def gt_units(blocks: list[dict]) -> list[str]:
    """Body blocks grouped by the segmenter's convention: a title heads the next block, list items join the
    list (and a lead-in ending in ':'), so boundaries are compared at paragraph level."""
    units: list[str] = []
    held_title = False
    prev_kind = ""
    for block in blocks:
        kind = block["kind"]
        text = block["text"].strip()
        if kind in FURNITURE_KINDS or not text:
            continue
        joins_list = kind == "list_item" and (prev_kind == "list_item" or (units and units[-1].endswith(":")))
        if held_title or joins_list:
            units[-1] += "\n" + text
        else:
            units.append(text)
        held_title = kind == "title"
        prev_kind = kind
    return units


def boundary_scores(gt: list[str], pred: list[str]) -> tuple[float, float, float]:
    """Precision/recall/F1 of paragraph starts, after aligning the two word sequences."""

    def flatten(units: list[str]) -> tuple[list[str], set[int]]:
        words: list[str] = []
        starts: set[int] = set()
        for unit in units:
            w = _words(unit)
            if w:
                starts.add(len(words))
                words.extend(w)
        return words, starts

    gw, gs = flatten(gt)
    pw, ps = flatten(pred)
    matcher = difflib.SequenceMatcher(None, gw, pw, autojunk=False)
    p2g: dict[int, int] = {}
    for a, b, n in matcher.get_matching_blocks():
        for k in range(n):
            p2g[b + k] = a + k
    g2p = {g: p for p, g in p2g.items()}
    pred_mapped = [p for p in ps if p in p2g]
    gt_mapped = [g for g in gs if g in g2p]
    tp_p = sum(p2g[p] in gs for p in pred_mapped)
    tp_g = sum(g2p[g] in ps for g in gt_mapped)
    precision = tp_p / len(pred_mapped) if pred_mapped else 0.0
    recall = tp_g / len(gt_mapped) if gt_mapped else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return precision, recall, f1


def furniture_leak(blocks: list[dict], chunks: list[str]) -> float:
    """Share of header/footer/TOC blocks whose text occurs in the chunks more often than in the GT body."""
    chunk_text = " ".join(" ".join(_words(c)) for c in chunks)
    body_text = " ".join(" ".join(_words(b["text"])) for b in blocks if b["kind"] not in FURNITURE_KINDS)
    furniture = [" ".join(_words(b["text"])) for b in blocks if b["kind"] in FURNITURE_KINDS]
    furniture = [f for f in furniture if len(f) >= 5]
    if not furniture:
        return 0.0
    leaked = 0
    for text in Counter(furniture):
        expected = body_text.count(text)
        if chunk_text.count(text) > expected:
            leaked += furniture.count(text)
    return leaked / len(furniture)


# ----------------------------------------------------------------------------- driver


def measure(path: Path, modes: list[str], gt_folders: list[Path], repeat: int) -> list[Row]:
    """All rows (one per mode) for one PDF."""
    with pymupdf.open(path) as doc:
        n_pages = doc.page_count
    best, segmented = time_all(path, modes, repeat)
    raw_default, raw_flags = best["raw_default"], best["raw_flags"]
    running = running_strings(path)
    heads = numbered_heads(path)
    accents_raw = raw_accents(path)
    blocks = load_groundtruth(gt_folders, path)
    rows = []
    for mode in modes:
        seconds, texts = best[mode], [p.text for p in segmented[mode]]
        lengths = sorted(len(t) for t in texts) or [0]
        normed = [_norm(t) for t in texts]
        gt_scores: tuple = (None, None, None, None)
        if blocks is not None:
            gt_scores = (*boundary_scores(gt_units(blocks), texts), furniture_leak(blocks, texts))
        rows.append(
            Row(
                pdf=path.name,
                mode=mode,
                pages=n_pages,
                seconds=seconds,
                pages_per_s=n_pages / seconds if seconds else float("inf"),
                raw_default_s=raw_default,
                raw_flags_s=raw_flags,
                ratio_default=seconds / raw_default if raw_default else float("inf"),
                ratio_flags=seconds / raw_flags if raw_flags else float("inf"),
                paragraphs=len(texts),
                median_chars=statistics.median(lengths),
                p95_chars=lengths[min(len(lengths) - 1, int(0.95 * len(lengths)))],
                max_chars=lengths[-1],
                running_share=sum(any(r in n for r in running) for n in normed) / max(1, len(texts)),
                head_share=head_share(segmented[mode], heads),
                leader_share=sum(LEADER.search(t) is not None for t in texts) / max(1, len(texts)),
                accents_kept=sum(len(ACCENTED.findall(t)) for t in texts),
                accents_raw=accents_raw,
                boundary_p=gt_scores[0],
                boundary_r=gt_scores[1],
                boundary_f1=gt_scores[2],
                furniture_leak=gt_scores[3],
            )
        )
    return rows


def _fmt(value: float | None, digits: int = 2) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def markdown(rows: list[Row]) -> str:
    """The result table in Markdown."""
    head = (
        "| pdf | mode | pages | pages/s | × raw dict (default flags) | × raw dict (seg. flags) | paragraphs | "
        "median | p95 | max | running-text share | numbered-head share | leader share | accents kept/raw | "
        "boundary P/R/F1 | furniture leak |"
    )
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        prf = "–" if r.boundary_f1 is None else f"{r.boundary_p:.2f}/{r.boundary_r:.2f}/{r.boundary_f1:.2f}"
        lines.append(
            f"| {r.pdf} | {r.mode} | {r.pages} | {r.pages_per_s:.0f} | {r.ratio_default:.2f} | {r.ratio_flags:.2f} | "
            f"{r.paragraphs} | {r.median_chars:.0f} | {r.p95_chars} | {r.max_chars} | {r.running_share:.3f} | "
            f"{r.head_share:.3f} | {r.leader_share:.3f} | {r.accents_kept}/{r.accents_raw} | {prf} | {_fmt(r.furniture_leak)} |"
        )
    return "\n".join(lines)


def write_json_atomic(path: Path, payload: object) -> None:
    """Write JSON through a temporary file and os.replace, so a crash never leaves half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(payload, handle, indent=2, ensure_ascii=False)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def collect_pdfs(inputs: list[Path]) -> list[Path]:
    """PDF files named directly or found (non-recursively) in the folders given."""
    pdfs: list[Path] = []
    for item in inputs:
        if item.is_dir():
            pdfs.extend(sorted(item.glob("*.pdf")))
        elif item.is_file():
            pdfs.append(item)
        else:
            raise SystemExit(f"error: {item} is neither a PDF nor a folder; pass PDF files or folders of PDFs")
    if not pdfs:
        raise SystemExit(f"error: no PDF found in {', '.join(map(str, inputs))}")
    return pdfs


def main(argv: list[str] | None = None) -> int:
    root = Path(__file__).resolve().parents[1]
    default_gt = [p for p in (root.parent / "shared" / "pdfs" / "groundtruth", root / "sample" / "groundtruth") if p.is_dir()]
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("pdfs", nargs="*", type=Path, default=[root.parent / "shared" / "pdfs"],
                        help="PDF files or folders of PDFs (default: ../shared/pdfs)")
    parser.add_argument("--groundtruth", type=Path, action="append", default=None,
                        help="folder of ground truth (<stem>.json sample format or <stem>.docling-gt.json); "
                             "repeatable (default: ../shared/pdfs/groundtruth and sample/groundtruth if present)")
    parser.add_argument("--modes", default="layout,paper", help="comma-separated modes (default: layout,paper)")
    parser.add_argument("--repeat", type=int, default=5, help="timing repetitions, best kept (default: 5)")
    parser.add_argument("--json", type=Path, default=None, help="also write the rows as JSON to this file")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    for mode in modes:
        SegmenterConfig(mode=mode)  # validates the name
    if args.repeat < 1:
        parser.error("--repeat must be >= 1")
    gt_folders = args.groundtruth if args.groundtruth is not None else default_gt
    rows: list[Row] = []
    for pdf in collect_pdfs(args.pdfs):
        rows.extend(measure(pdf, modes, gt_folders, args.repeat))
    print(markdown(rows))
    for mode in modes:
        sub = [r for r in rows if r.mode == mode]
        pages = sum(r.pages for r in sub)
        seconds = sum(r.seconds for r in sub)
        raw_d = sum(r.raw_default_s for r in sub)
        raw_f = sum(r.raw_flags_s for r in sub)
        print(f"\n{mode}: {pages} pages in {seconds:.2f} s = {pages / seconds:.0f} pages/s; "
              f"× raw dict: {seconds / raw_d:.2f} (default flags), {seconds / raw_f:.2f} (segmenter's flags)")
        chunks = sum(r.paragraphs for r in sub) or 1
        print(f"{mode}: of {chunks} chunks, {sum(r.running_share * r.paragraphs for r in sub) / chunks:.2%} hold a "
              f"running string, {sum(r.head_share * r.paragraphs for r in sub) / chunks:.2%} a numbered running head; "
              f"accents kept {sum(r.accents_kept for r in sub)}/{sum(r.accents_raw for r in sub)}")
        scored = [r for r in sub if r.boundary_f1 is not None]
        if scored:
            print(f"{mode}: {len(scored)} PDFs with ground truth: mean boundary F1 "
                  f"{statistics.mean(r.boundary_f1 for r in scored):.3f}, mean furniture leak "
                  f"{statistics.mean(r.furniture_leak for r in scored):.3f}")
    if args.json is not None:
        write_json_atomic(args.json, {"rows": [asdict(r) for r in rows], "config": asdict(SegmenterConfig())})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
