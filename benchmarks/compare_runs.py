"""Did a refactor change a result? Compare two `ragstudy study` folders of the same settings, written before and
after, file by file:

    python benchmarks/compare_runs.py /tmp/study-old /tmp/study-new            # Markdown table on stdout
    python benchmarks/compare_runs.py --tolerance 1e-9 /tmp/study-old /tmp/study-new

The answering run (`answers/`) keeps its layout, so its files are compared at the same path: chunk exports
(`chunks_<s>.csv`, `sources_<s>.jsonl`), the Dataset files (`Dataset*.csv/.json`), the answer metric tables
(`metrics_*.csv`) and the chunk-quality tables. The retrieval-only run (`retrieval/`) moved: before, one folder per
retriever (`retrieval/<retriever>/retrieval_<s>.csv` and its score tables); after, one folder per variant of the
grid (`retrieval/variants/<id>/`, listed in `retrieval/variants.csv`) and the score tables of each group of
variants in `retrieval/groups/<group>/` (in `retrieval/` itself when the run has one group). A ranking or chunk
export of the old folder is paired with the variant that `variants.csv` gives for its strategy and retriever;
score tables with the group folder whose name holds the retriever. The verdict across retrievers
(`retrieval_verdict_across.csv`, formerly `retrieval_verdict_by_retriever.csv`) stays in `retrieval/`.

Each pair is compared byte for byte; a table or JSON file that is not byte-identical is compared as data: same
columns, same rows in the same order, numbers equal within the tolerance (absolute or relative), other cells
equal as text. When it is not equal as data the notes say what differs (columns added or dropped, rows only in
one file, the first cells that differ and the largest numeric difference), and whether the old rows are all in
the new file (a table that gained rows or columns but kept every old number). Reads files only (from ragstudy it
takes the declared file names, nothing that reads a run), so it runs on folders written by any version.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragstudy import results

csv.field_size_limit(sys.maxsize)  # a ranking's contents cell holds a whole parent chunk

TOLERANCE = 1e-9
# the names are the declarations' (ragstudy.results); reading a name reads no folder of any version
SCORE_TABLES = tuple(t.name for t in (results.RETRIEVAL_PER_QUESTION, results.RETRIEVAL_SUMMARY,
                                      results.RETRIEVAL_PAIRED, results.RETRIEVAL_VERDICT,
                                      results.RETRIEVAL_DECOMPOSITION))
# the cross-group table, and its name before groups (retrieval_verdict_by_retriever.csv)
ACROSS_TABLES = (results.RETRIEVAL_VERDICT_ACROSS.name, results.RETRIEVAL_VERDICT_ACROSS.formerly[0])
ANSWER_PATTERNS = (("Dataset", "Dataset*.csv"), ("Dataset", "Dataset*.json"), ("chunk export", "chunks_*.csv"),
                   ("chunk export", "sources_*.jsonl"), ("answer metrics", "metrics_*.csv"),
                   ("chunk quality", "chunk_quality*.csv"))
NOT_APPLICABLE = "n/a"


@dataclass(frozen=True)
class Pair:
    """One old file and the new file that holds the same result (None when the new run has none)."""

    kind: str
    old: Path
    new: Path | None
    note: str = ""


@dataclass(frozen=True)
class Comparison:
    pair: Pair
    byte_identical: bool
    data_equal: bool | None  # None: not compared as data (byte-identical, or missing)
    notes: str


# ------------------------------------------------------------------------------------------------ the mapping

def _read_csv(path: Path) -> tuple[list[str], list[list[str]]]:
    with path.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.reader(handle))
    return (rows[0], rows[1:]) if rows else ([], [])


def _old_retriever_folders(old_retrieval: Path) -> dict[str, Path]:
    """Retriever -> the old run's folder of its rankings, from the run's config.json (`retriever`, a comma list):
    `<retrieval>/<retriever>/` for each of several, the folder itself for one."""
    recorded: Any = "dense"
    config = old_retrieval / "config.json"
    if config.is_file():
        recorded = json.loads(config.read_text(encoding="utf-8")).get("retriever") or "dense"
    names = recorded if isinstance(recorded, list) else str(recorded).split(",")
    names = [name.strip() for name in names if name.strip()]
    if len(names) == 1:
        return {names[0]: old_retrieval}
    return {name: old_retrieval / name for name in names}


def read_variants(new_retrieval: Path) -> list[dict[str, str]]:
    """The rows of the new run's variants.csv (id, strategy, params, retriever, text_layer, embedding)."""
    path = new_retrieval / results.VARIANTS.name
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no variants.csv; is {new_retrieval} a retrieval run of the grid layout?")
    header, rows = _read_csv(path)
    return [dict(zip(header, row)) for row in rows]


def variant_for(variants: Sequence[dict[str, str]], strategy: str, retriever: str,
                text_layer: str = "raw") -> tuple[dict[str, str] | None, str]:
    """The variant of `variants.csv` that ran `strategy` with `retriever` (and `text_layer`, n/a matching any),
    and a note when there is none or more than one."""
    found = [v for v in variants if v.get("strategy") == strategy and v.get("retriever") == retriever]
    if len(found) > 1:
        found = [v for v in found if v.get("text_layer", NOT_APPLICABLE) in (text_layer, NOT_APPLICABLE)]
    if len(found) == 1:
        return found[0], ""
    if not found:
        return None, f"variants.csv has no variant of {strategy} with {retriever}"
    return None, f"variants.csv has {len(found)} variants of {strategy} with {retriever}: " + ", ".join(
        v["id"] for v in found)


def group_folder(new_retrieval: Path, retriever: str) -> tuple[Path | None, str]:
    """The new run's folder of the scores of the group ranked with `retriever`: `groups/<group>/` whose name
    (its context's values joined by `__`) holds the retriever, or the run's folder when it has one group."""
    groups = new_retrieval / "groups"
    if not groups.is_dir():
        return new_retrieval, ""
    found = sorted(d for d in groups.iterdir() if d.is_dir() and retriever in d.name.split("__"))
    if len(found) == 1:
        return found[0], ""
    return None, f"{len(found)} group folders under {groups} name {retriever}"


def _old_layer(folder: Path) -> str:
    config = folder / "config.json"
    if config.is_file():
        return str(json.loads(config.read_text(encoding="utf-8")).get("text_layer") or "raw")
    return "raw"


def map_pairs(old_root: Path, new_root: Path) -> list[Pair]:
    """Every result file of the old study folder with the new folder's file that holds the same result."""
    pairs: list[Pair] = []
    old_answers, new_answers = old_root / "answers", new_root / "answers"
    for kind, pattern in ANSWER_PATTERNS:
        for old in sorted(old_answers.glob(pattern)):
            new = new_answers / old.name
            pairs.append(Pair(kind, old, new if new.is_file() else None, "" if new.is_file() else "not in new run"))
    old_retrieval, new_retrieval = old_root / "retrieval", new_root / "retrieval"
    if not old_retrieval.is_dir():
        return pairs
    variants = read_variants(new_retrieval)
    for retriever, folder in _old_retriever_folders(old_retrieval).items():
        layer = _old_layer(folder)
        for old in sorted(folder.glob("retrieval_*.csv")):
            if old.name in SCORE_TABLES or old.name in ACROSS_TABLES:
                continue
            strategy = old.name[len("retrieval_"):-len(".csv")]
            for kind, name in (("ranking", old.name), ("chunk export", f"chunks_{strategy}.csv"),
                               ("chunk export", f"sources_{strategy}.jsonl")):
                source = folder / name
                if not source.is_file():
                    continue
                variant, note = variant_for(variants, strategy, retriever, layer)
                target = new_retrieval / "variants" / variant["id"] / name if variant else None
                if target is not None and not target.is_file():
                    target, note = None, f"variant {variant['id']} has no {name}"
                pairs.append(Pair(kind, source, target, note))
        scores, note = group_folder(new_retrieval, retriever)
        for name in SCORE_TABLES:
            old = folder / name
            if old.is_file():
                new = scores / name if scores is not None and (scores / name).is_file() else None
                pairs.append(Pair("verdict" if name == results.RETRIEVAL_VERDICT.name else "retrieval scores", old, new,
                                  note or ("" if new else f"no {name} in the group folder")))
    old = next((old_retrieval / name for name in ACROSS_TABLES if (old_retrieval / name).is_file()), None)
    if old is not None:
        new = next((new_retrieval / name for name in ACROSS_TABLES if (new_retrieval / name).is_file()), None)
        pairs.append(Pair("verdict", old, new, "" if new else "not in new"))
    return pairs


# ------------------------------------------------------------------------------------------------ comparing

def _number(cell: Any) -> float | None:
    if isinstance(cell, bool) or cell is None:
        return None
    if isinstance(cell, (int, float)):
        return float(cell)
    try:
        return float(cell)
    except (TypeError, ValueError):
        return None


def cells_equal(a: Any, b: Any, tolerance: float = TOLERANCE) -> bool:
    """Equal as data: numbers within `tolerance` (absolute or relative; NaN equals NaN), anything else exactly."""
    x, y = _number(a), _number(b)
    if x is not None and y is not None:
        if math.isnan(x) or math.isnan(y):
            return math.isnan(x) and math.isnan(y)
        return math.isclose(x, y, rel_tol=tolerance, abs_tol=tolerance)
    return a == b


def _row_key(row: Iterable[Any]) -> tuple[str, ...]:
    """A row as text with numbers to 12 significant digits: for finding rows present in one file only."""
    out = []
    for cell in row:
        x = _number(cell)
        out.append(f"{x:.12g}" if x is not None else str(cell))
    return tuple(out)


def compare_tables(old_header: Sequence[str], old_rows: Sequence[Sequence[Any]], new_header: Sequence[str],
                   new_rows: Sequence[Sequence[Any]], tolerance: float = TOLERANCE,
                   shown: int = 3) -> tuple[bool, str]:
    """(equal as data, what differs) for two tables; compared on their common columns when the columns differ."""
    notes = []
    added = [c for c in new_header if c not in old_header]
    dropped = [c for c in old_header if c not in new_header]
    if added:
        notes.append("columns only in new: " + ", ".join(added))
    if dropped:
        notes.append("columns only in old: " + ", ".join(dropped))
    common = [c for c in old_header if c in new_header]
    if list(old_header) != list(new_header) and not added and not dropped:
        notes.append("same columns in another order")
    oi, ni = [list(old_header).index(c) for c in common], [list(new_header).index(c) for c in common]
    old_c = [[row[i] if i < len(row) else None for i in oi] for row in old_rows]
    new_c = [[row[i] if i < len(row) else None for i in ni] for row in new_rows]
    same_rows = len(old_c) == len(new_c)
    diffs, largest = [], 0.0
    if same_rows:
        for r, (a, b) in enumerate(zip(old_c, new_c)):
            for c, (x, y) in enumerate(zip(a, b)):
                if not cells_equal(x, y, tolerance):
                    diffs.append((r, common[c], x, y))
                    fx, fy = _number(x), _number(y)
                    if fx is not None and fy is not None and not (math.isnan(fx) or math.isnan(fy)):
                        largest = max(largest, abs(fx - fy))
    else:
        notes.append(f"{len(old_c)} rows in old, {len(new_c)} in new")
    equal = same_rows and not diffs and not added and not dropped and list(old_header) == list(new_header)
    if same_rows and not diffs and (added or dropped):
        notes.append(f"the {len(common)} common columns are equal")
    if diffs:
        notes.append(f"{len(diffs)} cells differ, largest numeric difference {largest:.3g}; first: " + "; ".join(
            f"row {r} {col}: {_short(x)} -> {_short(y)}" for r, col, x, y in diffs[:shown]))
    if not same_rows or diffs:
        old_keys, new_keys = [_row_key(r) for r in old_c], [_row_key(r) for r in new_c]
        new_set, old_set = set(new_keys), set(old_keys)
        only_old = sum(1 for k in old_keys if k not in new_set)
        only_new = sum(1 for k in new_keys if k not in old_set)
        notes.append(f"rows only in old: {only_old}, only in new: {only_new}"
                     + (" (every old row is in new)" if only_old == 0 else ""))
    return equal, "; ".join(notes)


def _short(value: Any, width: int = 40) -> str:
    text = str(value)
    return text if len(text) <= width else text[:width - 1] + "…"


def _flatten(value: Any, prefix: str = "") -> list[tuple[str, Any]]:
    """A JSON value as (path, leaf) pairs in order, for comparing nested records cell by cell."""
    if isinstance(value, dict):
        return [item for key in value for item in _flatten(value[key], f"{prefix}.{key}")]
    if isinstance(value, list):
        return [item for n, v in enumerate(value) for item in _flatten(v, f"{prefix}[{n}]")]
    return [(prefix, value)]


def compare_json(old_value: Any, new_value: Any, tolerance: float = TOLERANCE, shown: int = 3) -> tuple[bool, str]:
    """(equal as data, what differs) for two JSON values: same structure, leaves equal (numbers within tolerance)."""
    a, b = _flatten(old_value), _flatten(new_value)
    if [p for p, _ in a] != [p for p, _ in b]:
        only_old = sorted({p for p, _ in a} - {p for p, _ in b})
        only_new = sorted({p for p, _ in b} - {p for p, _ in a})
        note = f"structure differs ({len(a)} leaves in old, {len(b)} in new"
        note += f"; only in old: {', '.join(only_old[:shown])}" if only_old else ""
        note += f"; only in new: {', '.join(only_new[:shown])}" if only_new else ""
        return False, note + ")"
    diffs = [(p, x, y) for (p, x), (_, y) in zip(a, b) if not cells_equal(x, y, tolerance)]
    if not diffs:
        return True, ""
    return False, f"{len(diffs)} values differ; first: " + "; ".join(
        f"{p}: {_short(x)} -> {_short(y)}" for p, x, y in diffs[:shown])


def _load_json(path: Path) -> Any:
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".jsonl":
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    return json.loads(text)


def compare_pair(pair: Pair, tolerance: float = TOLERANCE) -> Comparison:
    if pair.new is None:
        return Comparison(pair, False, None, pair.note or "no counterpart in the new run")
    if pair.old.read_bytes() == pair.new.read_bytes():
        return Comparison(pair, True, None, pair.note)
    if pair.old.suffix == ".csv":
        oh, orows = _read_csv(pair.old)
        nh, nrows = _read_csv(pair.new)
        equal, notes = compare_tables(oh, orows, nh, nrows, tolerance)
    elif pair.old.suffix in (".json", ".jsonl"):
        equal, notes = compare_json(_load_json(pair.old), _load_json(pair.new), tolerance)
    else:
        equal, notes = False, "not a table: compared byte for byte only"
    return Comparison(pair, False, equal, "; ".join(n for n in (pair.note, notes) if n))


def markdown(comparisons: Sequence[Comparison], old_root: Path, new_root: Path) -> str:
    """The comparisons as a Markdown table: file (old -> new), byte-identical, equal as data, notes."""
    def rel(path: Path | None, root: Path) -> str:
        return "—" if path is None else str(path.relative_to(root))

    def word(value: bool | None, identical: bool) -> str:
        return "yes" if identical or value else ("—" if value is None else "no")

    lines = ["| kind | file (old -> new) | byte-identical | equal as data | notes |", "|---|---|---|---|---|"]
    for c in comparisons:
        old, new = rel(c.pair.old, old_root), rel(c.pair.new, new_root)
        name = f"`{old}`" if old == new else f"`{old}` -> `{new}`"
        lines.append(f"| {c.pair.kind} | {name} | {'yes' if c.byte_identical else 'no'} | "
                     f"{word(c.data_equal, c.byte_identical)} | {c.notes.replace('|', '/')} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("old", type=Path, help="the study folder written before (its answers/ and retrieval/)")
    parser.add_argument("new", type=Path, help="the study folder written after, with the same settings")
    parser.add_argument("--tolerance", type=float, default=TOLERANCE,
                        help="numbers closer than this (absolute or relative) are equal (default: %(default)s)")
    args = parser.parse_args(argv)
    comparisons = [compare_pair(pair, args.tolerance) for pair in map_pairs(args.old, args.new)]
    print(markdown(comparisons, args.old, args.new))
    identical = sum(c.byte_identical for c in comparisons)
    as_data = sum(bool(c.data_equal) for c in comparisons)
    print(f"\n{len(comparisons)} files: {identical} byte-identical, {as_data} more equal as data, "
          f"{len(comparisons) - identical - as_data} different or missing")
    return 0 if identical + as_data == len(comparisons) else 1


if __name__ == "__main__":
    sys.exit(main())
