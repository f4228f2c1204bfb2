"""The paper's script path, kept for its users: `python Postprocessing/evaluation_metrics.py FLAGS` is `ragstudy
score-answers FLAGS` (same flags; the code is Postprocessing/score_answers.py)."""

if __name__ == "__main__":
    from ragstudy_cli.app import run_as

    run_as("score-answers")
