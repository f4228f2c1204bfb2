"""A worker process of the onnxruntime LLM engine (`python -m ragstudy.llms._onnx_worker FOLDER THREADS`, started by
onnxruntime_engine.OnnxChatModel.generate_each): it loads the exported model once and answers token ids sent as
JSON lines on stdin with the answer's token ids, greedily, one prompt at a time, until stdin closes. The decoding
loop is the one the engine runs in-process, so a worker's answer is the answer of one process."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path


def load_genai_model(folder: Path, threads: int):
    """The exported model, run by `threads` intra-op threads."""
    import onnxruntime_genai as og

    config = og.Config(str(folder))
    config.overlay(json.dumps({"model": {"decoder": {"session_options": {"intra_op_num_threads": threads}}}}))
    return og.Model(config)


def greedy_tokens(model, ids: Sequence[int], max_new_tokens: int) -> list[int]:
    """The answer's token ids after the prompt's `ids`, decoded greedily by `model` (an og.Model)."""
    import onnxruntime_genai as og

    search = og.GeneratorParams(model)
    search.set_search_options(max_length=len(ids) + max_new_tokens, do_sample=False)
    generator = og.Generator(model, search)
    generator.append_tokens(list(ids))
    tokens: list[int] = []
    while not generator.is_done():  # stops at the EOS token or at max_length
        generator.generate_next_token()
        tokens.append(int(generator.get_next_tokens()[0]))
    return tokens


def _serve(folder: str, threads: int) -> None:
    """A worker process: answer {"ids", "max_new_tokens"} lines from stdin with {"tokens"} lines (or one {"error"}
    line, then exit) until stdin closes."""
    try:
        model = load_genai_model(Path(folder), threads)
    except Exception as exc:  # reported by the answering process, which stops
        print(json.dumps({"error": f"loading {folder}: {type(exc).__name__}: {exc}"}), flush=True)
        return
    for line in sys.stdin:
        task = json.loads(line)
        try:
            tokens = greedy_tokens(model, task["ids"], task["max_new_tokens"])
        except Exception as exc:
            print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}), flush=True)
            return
        print(json.dumps({"tokens": tokens}), flush=True)


if __name__ == "__main__":
    _serve(sys.argv[1], int(sys.argv[2]))
