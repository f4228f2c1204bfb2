"""The decoding loop of the onnxruntime LLM engine, shared by the engine (answering in its own process) and its worker
processes (_onnx_worker): the same loop in both, so a worker's answer is the answer of one process."""

from __future__ import annotations

import json
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
