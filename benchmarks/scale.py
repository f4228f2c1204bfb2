"""How a cold retrieval-only comparison grows with the corpus and the questions (issue 28), and what a competing
load does to its CPU seconds per embedded window.

Corpus: the bundled sample (Documents/), ../shared/pdfs and ../shared/pdfs/more-it (about 660 pages), taken in
nested quarters: the first q/4 of every PDF's pages, so each size has the same mix of documents. Questions: the ../shared/qa questions
(else the sample's), each repeated with a numbered suffix up to the size asked (100 -> 1,000). Every point is one
`ragstudy retrieve` process (run through its script path) from an empty project cache and Chroma folder (the
exported ONNX
model is copied in, so a point measures chunking, embedding, indexing and ranking, not the one-off export), timed
by the parent: wall seconds, CPU seconds and peak resident memory of the process and its children (wait4).

Prints one Markdown table per axis and the growth exponent b of wall (and CPU) ~ size^b, fitted on log-log;
b near 1 is linear. `--competing-load N` repeats the largest corpus point with N busy processes running, and prints
CPU seconds per embedded child window, quiet and loaded (issue 28 asks for at most 1/3 more).

    nice python -m benchmarks.scale --max-pages 120 --questions 100,1000
    nice python -m benchmarks.scale --quarters 1,2,3,4 --strategies paragraph,fixed-size --competing-load 2
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"


@dataclass
class Point:
    axis: str  # "pages" or "questions"
    pdfs: int
    pages: int
    questions: int
    wall_s: float
    cpu_s: float
    peak_mib: float
    embedded: int
    load: int = 0  # competing busy processes

    @property
    def cpu_per_window_ms(self) -> float:
        return 1000 * self.cpu_s / self.embedded if self.embedded else math.nan


def corpus() -> list[tuple[Path, int]]:
    """(PDF, pages) of the three corpora, by name."""
    import pymupdf

    folders = [REPO / "Documents", SHARED / "pdfs", SHARED / "pdfs" / "more-it"]
    found = []
    for folder in folders:
        for pdf in sorted(folder.glob("*.pdf")):
            with pymupdf.open(pdf) as doc:
                found.append((pdf, doc.page_count))
    return sorted(found, key=lambda item: item[0].name)


def nested(pdfs: list[tuple[Path, int]], quarters: list[int], max_pages: int | None) -> list[list[tuple[Path, int]]]:
    """For each q, the first q/4 of the pages of every PDF (of its share of `max_pages` when given): nested sizes
    with the same mix of documents, so growth is not confounded with which PDFs a size holds."""
    total = sum(p for _, p in pdfs)
    scale = min(1.0, (max_pages or total) / total)
    return [[(pdf, max(1, math.ceil(pages * scale * q / 4))) for pdf, pages in pdfs] for q in quarters]


def write_subset(pdf: Path, pages: int, target: Path) -> None:
    """The first `pages` pages of `pdf`, as a PDF of their own."""
    import pymupdf

    with pymupdf.open(pdf) as source, pymupdf.open() as out:
        out.insert_pdf(source, from_page=0, to_page=pages - 1)
        out.save(target)


def questions_file(count: int, target: Path) -> Path:
    """`count` questions: the shared ones (else the sample's), repeated with a numbered suffix."""
    source = SHARED / "qa" / "Questions.csv"
    if not source.is_file():
        source = REPO / "Questions.csv"
    with open(source, encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        column = "question" if "question" in (reader.fieldnames or []) else "questions"
        base = [row[column] for row in reader if row.get(column)]
    rows = [base[i % len(base)] + ("" if i < len(base) else f" (variante {i // len(base)})") for i in range(count)]
    with open(target, "w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["questions"])
        writer.writerows([row] for row in rows)
    return target


def busy() -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", "while True: pass"])


def run_point(pdfs: list[tuple[Path, int]], questions: int, args: argparse.Namespace, axis: str,
              load: int = 0) -> Point:
    with tempfile.TemporaryDirectory(prefix="ragstudy-scale-") as tmp:
        root = Path(tmp)
        docs = root / "docs"
        docs.mkdir()
        for pdf, pages in pdfs:
            write_subset(pdf, pages, docs / pdf.name)
        cache = root / "cache"
        source_cache = Path(os.environ.get("RAGSTUDY_CACHE") or REPO / ".cache")
        for part in ("onnx", "models") if not args.export_too else ():
            if (source_cache / part).is_dir():
                shutil.copytree(source_cache / part, cache / part, symlinks=True)
        command = [sys.executable, str(REPO / "evaluation_chain.py"), "--profile", "lite", "--retrieval-only",
                   "--documents", str(docs), "--questions", str(questions_file(questions, root / "q.csv")),
                   "--strategies", args.strategies, "--retriever", args.retriever, "--output-dir", str(root / "out"),
                   "--db-dir", str(root / "db")]
        env = {**os.environ, "RAGSTUDY_CACHE": str(cache), "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1"}
        loaders = [busy() for _ in range(load)]
        try:
            started = time.perf_counter()
            with open(root / "stdout", "w") as out, open(root / "stderr", "w") as err:
                process = subprocess.Popen(command, stdout=out, stderr=err, env=env, cwd=REPO)
                _, status, usage = os.wait4(process.pid, 0)
            wall = time.perf_counter() - started
        finally:
            for loader in loaders:
                loader.kill()
                loader.wait()
        if os.waitstatus_to_exitcode(status) != 0:
            raise SystemExit(f"the run failed: {(root / 'stderr').read_text()[-2000:]}")
        embedded = sum(int(line.split("|")[4]) for line in (root / "stdout").read_text().splitlines()
                       if line.startswith("| ") and line.split("|")[4].strip().isdigit())
    point = Point(axis, len(pdfs), sum(p for _, p in pdfs), questions, wall, usage.ru_utime + usage.ru_stime,
                  usage.ru_maxrss / 1024, embedded, load)
    print(f"point: {json.dumps(asdict(point))}", file=sys.stderr, flush=True)  # a long benchmark keeps its points
    return point


def exponent(xs: list[float], ys: list[float]) -> float:
    """Least-squares slope of log y on log x (nan with fewer than two distinct sizes)."""
    pairs = [(math.log(x), math.log(y)) for x, y in zip(xs, ys) if x > 0 and y > 0]
    if len({x for x, _ in pairs}) < 2:
        return math.nan
    mx = sum(x for x, _ in pairs) / len(pairs)
    my = sum(y for _, y in pairs) / len(pairs)
    return sum((x - mx) * (y - my) for x, y in pairs) / sum((x - mx) ** 2 for x, _ in pairs)


def table(points: list[Point], size: str) -> str:
    lines = ["| PDFs | pages | questions | load | wall s | CPU s | peak MiB | windows embedded | CPU ms/window |",
             "|---|---|---|---|---|---|---|---|---|"]
    for p in points:
        lines.append(f"| {p.pdfs} | {p.pages} | {p.questions} | {p.load} | {p.wall_s:.1f} | {p.cpu_s:.1f} | "
                     f"{p.peak_mib:.0f} | {p.embedded} | {p.cpu_per_window_ms:.2f} |")
    quiet = [p for p in points if not p.load]
    xs = [float(getattr(p, size)) for p in quiet]
    lines.append(f"\ngrowth exponent over {size}: wall {exponent(xs, [p.wall_s for p in quiet]):.2f}, CPU "
                 f"{exponent(xs, [p.cpu_s for p in quiet]):.2f}, peak memory "
                 f"{exponent(xs, [p.peak_mib for p in quiet]):.2f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quarters", default="1,2,3,4", help="corpus sizes, in quarters of its pages")
    parser.add_argument("--max-pages", type=int, help="take the quarters of at most this many pages")
    parser.add_argument("--questions", default="100,1000", help="question counts (at the smallest corpus size)")
    parser.add_argument("--strategies", default="fixed-size")
    parser.add_argument("--retriever", default="dense")
    parser.add_argument("--competing-load", type=int, default=0, metavar="N",
                        help="also run the largest corpus point with N busy processes")
    parser.add_argument("--export-too", action="store_true", help="do not copy the ONNX exports in (cold export)")
    parser.add_argument("--json", help="write the points here")
    args = parser.parse_args(argv)
    sizes = nested(corpus(), [int(q) for q in args.quarters.split(",")], args.max_pages)
    counts = [int(n) for n in args.questions.split(",")]
    by_pages = [run_point(pdfs, counts[0], args, "pages") for pdfs in sizes]
    by_questions = [by_pages[0]] + [run_point(sizes[0], n, args, "questions") for n in counts[1:]]
    loaded = [run_point(sizes[-1], counts[0], args, "pages", args.competing_load)] if args.competing_load else []
    print(f"## corpus ({args.strategies}, {args.retriever}, {counts[0]} questions)\n")
    print(table(by_pages + loaded, "pages"))
    print(f"\n## questions ({by_pages[0].pages} pages)\n")
    print(table(by_questions, "questions"))
    if loaded:
        quiet, busy_ = by_pages[-1], loaded[0]
        print(f"\nCPU per embedded window: quiet {quiet.cpu_per_window_ms:.2f} ms, with {busy_.load} busy processes "
              f"{busy_.cpu_per_window_ms:.2f} ms (x{busy_.cpu_per_window_ms / quiet.cpu_per_window_ms:.2f})")
    if args.json:
        Path(args.json).write_text(json.dumps([asdict(p) for p in by_pages + by_questions[1:] + loaded], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
