"""The executors of ragstudy.grid.executors on the same N CPU-bound tasks: in this process, `--workers 2` and Ray.

Each task hashes a buffer over and over (pure CPU, deterministic, about `--seconds` of one core) and writes its
digest into its variant folder. Prints, per executor: wall time, the tasks' own CPU time (measured inside each
task, so it is the same quantity wherever the task runs), the driver's CPU, and the wall speed-up against the
in-process run of the same invocation. Ray is timed twice: with a local Ray started by run_tasks (start-up and
shutdown included, as `--ray` pays them) and on a Ray already running; its start-up and shutdown are timed alone
too. Every executor's digests must equal the in-process ones.

    python -m benchmarks.executors                      # 8 tasks of ~1 s: in-process vs --workers 2 vs Ray
    python -m benchmarks.executors --tasks 8 --seconds 3 --workers 2
    python -m benchmarks.executors --retrieval            # 8 real retrieval-only variants on the bundled sample
    python -m benchmarks.executors --retrieval --limit 2 --no-ray   # a quick check of the same
    python -m benchmarks.executors --retrieval --documents ../shared/pdfs --questions ../shared/qa/Questions.csv

`--retrieval`: the grid of `ragstudy retrieve --strategies paragraph,fixed-size,newline,sentence --retriever
dense,bm25` (ranking.run_retrieval with each Executor: 8 variants, lite profile, Documents/ and Questions.csv),
each executor from its own cold project cache (the built models copied in, no vectors, chunks or rankings) and its
own Chroma root; prints wall, CPU (the driver's, the worker processes', and the variants' own stages measured
inside them), the wall speed-up, the child windows run through the model in all (by the grid's embed-ahead phase,
ragstudy.grid.embedahead, and by the variants themselves: a window embedded twice counts twice) beside the distinct
windows, the embed-ahead phase's wall seconds, and whether every variant's rankings equal the in-process ones;
under the table, the most any executor on this machine's cores could gain (speed_up_bound: the cores over the
cores the in-process run kept busy).
`--documents DIR --questions CSV` run the same grid on another corpus (a Questions.csv with one `questions` column,
as ../shared/qa/Questions.csv); `--limit N` ranks its first N questions only.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from benchmarks.clock import cpu_seconds
from ragstudy.grid.executors import Executor, Task, run_tasks
from ragstudy.io import cpu_cores


@dataclass(frozen=True)
class Work:
    name: str
    rounds: int


def hash_rounds(work: Work, output_dir: Path, inputs: dict[str, Path]) -> None:
    """`rounds` chained sha256 of a 64 KiB buffer seeded by the task's name; records the digest and its CPU time."""
    began = time.process_time()
    block = (work.name.encode() * 65536)[:65536]
    digest = b""
    for _ in range(work.rounds):
        digest = hashlib.sha256(digest + block).digest()
    output_dir.mkdir(parents=True, exist_ok=True)
    (output_dir / "digest.txt").write_text(digest.hex() + "\n")
    (output_dir / "cpu.txt").write_text(f"{time.process_time() - began}\n")  # differs run to run: not compared


STRATEGIES, RETRIEVERS = "paragraph,fixed-size,newline,sentence", "dense,bm25"  # the 8 variants of --retrieval


def rankings_of(path: Path) -> tuple[list[tuple], list[float]]:
    """(each ranked row: question, rank, parent, path, pages, in_k; the scores): a vector the cache kept from another
    strategy's batch differs in the 7th decimal (ONNX batches pad to their longest text), so cold runs in another
    order, in-process too, differ in the scores' last digits."""
    import csv

    with open(path, encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    return ([(r["question_index"], r["rank"], r["doc_id"], r["path"], r["page_start"], r["page_end"], r["in_k"])
             for r in rows], [float(r["score"]) for r in rows])


def compare(row: dict, base: dict) -> tuple[bool, float]:
    """(the same parents in the same ranks everywhere, the largest score difference)."""
    same, largest = True, 0.0
    for mine, theirs in zip(row["digests"], base["digests"]):
        for (ranks, scores), (ranks0, scores0) in zip(mine, theirs):
            same = same and ranks == ranks0
            largest = max([largest, *(abs(a - b) for a, b in zip(scores, scores0))])
    return same, largest


def grid_config(args: argparse.Namespace, folder: Path):
    """The StudyConfig of `ragstudy retrieve` over the 8 variants (lite profile) on --documents and --questions (the
    bundled sample by default), into `folder`/out with its own Chroma root; --limit N ranks the first N questions
    only."""
    from ragstudy.config import add_study_arguments, config_from_args
    from ragstudy.io import PROJECT_ROOT

    parser = argparse.ArgumentParser()
    add_study_arguments(parser)
    flags = ["--retrieval-only", "--profile", "lite", "--documents", args.documents or str(PROJECT_ROOT / "Documents"),
             "--questions", args.questions or str(PROJECT_ROOT / "Questions.csv"), "--output-dir", str(folder / "out"),
             "--db-dir", str(folder / "db"), "--strategies", STRATEGIES, "--retriever", RETRIEVERS]
    return config_from_args(parser.parse_args(flags + (["--limit", str(args.limit)] if args.limit else [])), False)


def measure_retrieval(args: argparse.Namespace, root: Path) -> int:
    """The grid of `ragstudy retrieve` (ranking.run_retrieval) with each executor, each from a cold project cache."""
    import os
    import resource
    import shutil

    from ragstudy.io import cache_dir
    from ragstudy.ranking import run_retrieval

    models = cache_dir()
    kinds = [("in-process", Executor()), (f"--workers {args.workers}", Executor("workers", args.workers))]
    if not args.no_ray:
        kinds.append((f"--ray (a local Ray, {args.workers} CPUs, start-up included)", Executor("ray", args.workers)))
    rows, base = [], None
    for label, executor in kinds:
        folder = root / executor.kind
        cache = folder / "cache"
        for name in ("models", "onnx"):  # the built models; no vectors, chunks or rankings
            if (models / name).is_dir():
                shutil.copytree(models / name, cache / name, ignore=shutil.ignore_patterns("*.lock", "*.partial"))
        os.environ["RAGSTUDY_CACHE"] = str(cache)  # the workers (and a local Ray) start with it
        config = grid_config(args, folder)
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        began, cpu = time.perf_counter(), cpu_seconds()
        grid = run_retrieval(config, executor=executor)
        wall, driver = time.perf_counter() - began, cpu_seconds() - cpu
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        workers_cpu = (after.ru_utime + after.ru_stime) - (children.ru_utime + children.ru_stime)
        files = [grid.folders[v.id] / f"retrieval_{v.strategy}.csv" for v in grid.variants]
        rows.append({"executor": label, "wall_s": wall, "driver_cpu_s": driver,
                     "workers_cpu_s": workers_cpu if executor.kind == "workers" else None,
                     "variants_cpu_s": sum(cpu for run in grid.runs.values() for _, cpu in run.stages.values()),
                     "embedded": grid.windows_embedded(), "distinct": grid.ahead.passages,
                     "ahead_s": grid.ahead.seconds, "variants_embedded": sum(r.embedded for r in grid.runs.values()),
                     "variants": len(grid.variants),
                     "digests": [[rankings_of(f)] for f in files], "exact": [f.read_bytes() for f in files]})
        base = base or rows[-1]
    corpus = f"{args.documents} with {args.questions}" if args.documents else "the bundled sample"
    print(f"{base['variants']} retrieval-only variants ({STRATEGIES} x {RETRIEVERS}) on {corpus} (lite "
          f"profile{f', first {args.limit} questions' if args.limit else ''}) through the grid of `ragstudy retrieve` "
          "(ranking.run_retrieval), each executor from a cold project cache\n")
    print("| executor | wall s | embed-ahead s | driver CPU s | worker processes' CPU s | variants' stages CPU s | "
          "wall speed-up | windows embedded / distinct (by the variants) | same parents, same ranks | "
          "largest score difference | rankings identical to the byte |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---|")
    for row in rows:
        workers = f"{row['workers_cpu_s']:.1f}" if row["workers_cpu_s"] is not None else "n/a"
        same, largest = compare(row, base)
        print(f"| {row['executor']} | {row['wall_s']:.1f} | {row['ahead_s']:.1f} | {row['driver_cpu_s']:.1f} | "
              f"{workers} | {row['variants_cpu_s']:.1f} | {base['wall_s'] / row['wall_s']:.2f}x | "
              f"{row['embedded']:,} / {row['distinct']:,} ({row['variants_embedded']:,}) | "
              f"{'yes' if same else 'NO'} | {largest:.1e} | "
              f"{sum(a == b for a, b in zip(row['exact'], base['exact']))} of {len(row['exact'])} |")
    print("\nThe variants' stages CPU is measured inside each variant (chunk, index, rank: its process and its "
          "reaped children), the same quantity wherever it runs; a Ray worker's CPU outside them is not counted.")
    print(f"\n{speed_up_bound(base['driver_cpu_s'], base['wall_s'], cpu_cores())}")
    return 0 if all(compare(r, base)[0] for r in rows) else 1


def speed_up_bound(cpu_s: float, wall_s: float, cores: int) -> str:
    """The most any executor on `cores` cores can gain over an in-process run that used `cpu_s` CPU seconds in
    `wall_s`: the same work cannot take less than cpu_s / cores of wall (parallel processes add work, never remove
    it)."""
    if cpu_s <= 0 or wall_s <= 0:
        return "The in-process run measured no CPU time: no bound on the speed-up can be given."
    busy, bound = cpu_s / wall_s, cores * wall_s / cpu_s
    return (f"The in-process run kept {busy:.2f} of this machine's {cores} cores busy ({cpu_s:.1f} CPU-s in "
            f"{wall_s:.1f} s): no executor on {cores} cores can run the same work more than {bound:.2f}x as fast.")


def rounds_for(seconds: float) -> int:
    """Rounds that take about `seconds` of one core here."""
    probe = Work("probe", 2000)
    with tempfile.TemporaryDirectory() as tmp:
        began = time.process_time()
        hash_rounds(probe, Path(tmp) / "probe", {})
        spent = time.process_time() - began
    return max(1, int(probe.rounds * seconds / max(spent, 1e-6)))


def measure(name: str, tasks: list[Task], executor: Executor) -> dict:
    began, cpu = time.perf_counter(), cpu_seconds()
    outcomes = run_tasks(tasks, executor, label=name)
    wall, driver = time.perf_counter() - began, cpu_seconds() - cpu
    failed = [o.error for o in outcomes if o.error]
    if failed:
        raise SystemExit(f"{name}: {failed}")
    task_cpu = sum(float((t.output_dir / "cpu.txt").read_text()) for t in tasks)
    digests = [(t.output_dir / "digest.txt").read_text() for t in tasks]
    return {"executor": name, "wall_s": wall, "task_cpu_s": task_cpu, "driver_cpu_s": driver, "digests": digests}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=8, help="tasks (variants) per executor (default 8)")
    parser.add_argument("--seconds", type=float, default=1.0, help="one core's seconds per task (default 1)")
    parser.add_argument("--workers", type=int, default=2, help="worker processes and Ray CPUs (default 2)")
    parser.add_argument("--no-ray", action="store_true", help="leave Ray out")
    parser.add_argument("--retrieval", action="store_true", help="8 real retrieval-only variants instead")
    parser.add_argument("--limit", type=int, help="--retrieval: rank the first N questions only (a quick check)")
    parser.add_argument("--documents", help="--retrieval: a PDF folder instead of the bundled Documents/ (e.g. "
                                            "../shared/pdfs, a larger corpus)")
    parser.add_argument("--questions", help="--retrieval: the questions of --documents (e.g. ../shared/qa/Questions.csv)")
    args = parser.parse_args()
    if args.retrieval:
        with tempfile.TemporaryDirectory() as tmp:
            return measure_retrieval(args, Path(tmp))
    rounds = rounds_for(args.seconds)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        def tasks(label: str) -> list[Task]:
            return [Task(f"v{i}", hash_rounds, Work(f"v{i}", rounds), Path(tmp) / label / f"v{i}", {})
                    for i in range(args.tasks)]

        rows.append(measure("in-process", tasks("inprocess"), Executor()))
        rows.append(measure(f"--workers {args.workers}", tasks("workers"), Executor("workers", args.workers)))
        if not args.no_ray:
            import ray

            rows.append(measure("--ray (local Ray started and stopped)", tasks("ray-cold"),
                                Executor("ray", args.workers)))
            began = time.perf_counter()
            ray.init(num_cpus=args.workers, include_dashboard=False, logging_level="WARNING")
            start = time.perf_counter() - began
            try:
                rows.append(measure("--ray (Ray already running)", tasks("ray-warm"), Executor("ray")))
            finally:
                began = time.perf_counter()
                ray.shutdown()
                stop = time.perf_counter() - began
    base = rows[0]
    print(f"{args.tasks} tasks of ~{args.seconds:g} s of one core ({rounds} sha256 rounds each)\n")
    print("| executor | wall s | tasks' CPU s | driver CPU s | wall speed-up | same digests |")
    print("|---|---:|---:|---:|---:|---|")
    for row in rows:
        same = "yes" if row["digests"] == base["digests"] else "NO"
        print(f"| {row['executor']} | {row['wall_s']:.2f} | {row['task_cpu_s']:.2f} | {row['driver_cpu_s']:.2f} | "
              f"{base['wall_s'] / row['wall_s']:.2f}x | {same} |")
    if not args.no_ray:
        print(f"\nRay start-up (ray.init, {args.workers} CPUs): {start:.2f} s; shutdown: {stop:.2f} s")
    print(json.dumps([{k: v for k, v in r.items() if k != "digests"} for r in rows]))
    return 0 if all(r["digests"] == base["digests"] for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
