"""The paper's script path, kept for its users: `python Postprocessing/preprocessing_files.py FLAGS` is `ragstudy
review FLAGS` (same flags; the code is Postprocessing/build_review.py)."""

if __name__ == "__main__":
    from ragstudy_cli.app import run_as

    run_as("review")
