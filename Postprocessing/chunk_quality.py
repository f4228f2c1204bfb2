"""The paper's script path, kept for its users: `python Postprocessing/chunk_quality.py FLAGS` is `ragstudy
chunk-quality FLAGS` (same flags; the code is Postprocessing/judge_chunks.py)."""

if __name__ == "__main__":
    from ragstudy_cli.app import run_as

    run_as("chunk-quality")
