#!/usr/bin/env python3
"""Generate the bundled sample study: Italian technical PDFs in Documents/, their ground truth in
sample/groundtruth/, sample/evidence.json, Questions.csv and Oracle.csv.

The output is deterministic: running it again gives byte-identical files (fixed PDF dates, no random ids).
Content lives in tools/sample_corpus/doc_*.py (documents) and tools/sample_corpus/questions.py (questions).

Examples:
  python tools/make_sample_corpus.py                 # rebuild the committed files in place
  python tools/make_sample_corpus.py --out /tmp/s    # build into another folder (used by the tests)
  python tools/make_sample_corpus.py --check         # rebuild into a temp folder and compare with the repo
  python tools/make_sample_corpus.py --png /tmp/png --pages 1,2,5   # also render pages to PNG to look at
"""

from __future__ import annotations

import argparse
import hashlib
import logging
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]  # run as a script: tools/ is on sys.path, the repository is installed

OUTPUTS = ("Documents", "sample/groundtruth", "sample/evidence.json", "Questions.csv", "Oracle.csv")


def output_files(root: Path) -> dict[str, str]:
    """sha256 of every generated file under root, keyed by its path relative to root."""
    files: dict[str, str] = {}
    for rel in OUTPUTS:
        p = root / rel
        paths = sorted(p.iterdir()) if p.is_dir() else [p] if p.exists() else []
        for f in paths:
            if f.is_file() and f.suffix in {".pdf", ".json", ".csv"}:
                files[str(f.relative_to(root))] = hashlib.sha256(f.read_bytes()).hexdigest()
    return files


def render_pngs(root: Path, png_dir: Path, pages: list[int] | None, zoom: float) -> None:
    import pymupdf

    png_dir.mkdir(parents=True, exist_ok=True)
    for pdf in sorted((root / "Documents").glob("*.pdf")):
        with pymupdf.open(pdf) as doc:
            for n in pages or range(1, doc.page_count + 1):
                if 1 <= n <= doc.page_count:
                    pix = doc[n - 1].get_pixmap(matrix=pymupdf.Matrix(zoom, zoom))
                    pix.save(png_dir / f"{pdf.stem}_p{n:02d}.png")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=REPO, help="root folder to write into (default: the repo)")
    parser.add_argument("--check", action="store_true",
                        help="build into a temporary folder and compare sha256 with the files in --out")
    parser.add_argument("--png", type=Path, help="also render pages of every PDF to PNG files in this folder")
    parser.add_argument("--pages", help="comma-separated 1-based pages to render with --png (default: all)")
    parser.add_argument("--zoom", type=float, default=1.0, help="PNG zoom factor (1.0 = 72 dpi)")
    parser.add_argument("-v", "--verbose", action="store_true", help="log one line per document")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(message)s")

    from sample_corpus.build import build_all

    if args.check:
        with tempfile.TemporaryDirectory() as tmp:
            build_all(Path(tmp))
            fresh, committed = output_files(Path(tmp)), output_files(args.out)
        differ = sorted(k for k in fresh.keys() | committed.keys() if fresh.get(k) != committed.get(k))
        for k in differ:
            print(f"differs: {k}")
        print(f"{len(fresh)} files generated, {len(differ)} differ from {args.out}")
        return 1 if differ else 0

    docs = build_all(args.out)
    total = sum(len(d.layout.pages) for d in docs.values())
    for name, d in docs.items():
        print(f"{name}: {len(d.layout.pages)} pages, {len(d.layout.blocks)} blocks")
    print(f"{len(docs)} documents, {total} pages written under {args.out}")
    if args.png:
        pages = [int(p) for p in args.pages.split(",")] if args.pages else None
        render_pngs(args.out, args.png, pages, args.zoom)
    return 0


if __name__ == "__main__":
    sys.exit(main())
