"""A worker process of the onnxruntime LLM engine (`python -m ragstudy.llms._onnx_worker FOLDER THREADS`, started by
onnxruntime_engine.OnnxChatModel.generate_each), decoding with the engine's own loop (_genai)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from ragstudy.llms._genai import greedy_tokens, load_genai_model


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
