"""The paper's script path, kept for its users: `python evaluation_chain.py FLAGS` is `ragstudy answer FLAGS`, or
`ragstudy retrieve` with --retrieval-only, `ragstudy chunks` with --chunks-only, `ragstudy sweep` with --sweep FILE
(same flags; the code is ragstudy/answering/chain.py)."""

if __name__ == "__main__":
    from ragstudy_cli.app import run_chain_script

    run_chain_script()
