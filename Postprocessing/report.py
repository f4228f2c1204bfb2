"""The paper's script path, kept for its users: `python Postprocessing/report.py FLAGS` is `ragstudy report FLAGS`
(same flags; the code is Postprocessing/write_report.py)."""

if __name__ == "__main__":
    from ragstudy_cli.app import run_as

    run_as("report")
