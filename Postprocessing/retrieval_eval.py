"""The paper's script path, kept for its users: `python Postprocessing/retrieval_eval.py FLAGS` is `ragstudy
score-retrieval FLAGS` (same flags; the code is Postprocessing/score_retrieval.py)."""

if __name__ == "__main__":
    from ragstudy_cli.app import run_as

    run_as("score-retrieval")
