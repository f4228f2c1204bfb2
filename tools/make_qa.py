"""The paper's script path, kept for its users: `python tools/make_qa.py FLAGS` is `ragstudy make-qa FLAGS` (same
flags; the code is ragstudy/qagen/command.py)."""

if __name__ == "__main__":
    from ragstudy_cli.app import run_as

    run_as("make-qa")
