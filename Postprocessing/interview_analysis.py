"""The paper's script path, kept for its users: `python Postprocessing/interview_analysis.py FLAGS` is `ragstudy
survey FLAGS` (same flags; the code is Postprocessing/analyse_survey.py)."""

if __name__ == "__main__":
    from ragstudy_cli.app import run_as

    run_as("survey")
