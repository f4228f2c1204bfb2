"""torch: the LLM run in-process by transformers `generate` (greedy), one prompt at a time or batches of prompts of
similar length (left padding; --llm-batch-size)."""

from __future__ import annotations

from collections.abc import Sequence

from ragstudy.llms import register_engine
from ragstudy.llms.cache import GenerationParams, clean_answer
from ragstudy.llms.in_process import ChatTemplate


class ChatModel(ChatTemplate):
    """A causal LM answering one user message through its chat template, greedily."""

    def __init__(self, model_path: str, device: str, dtype: str) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.device = device
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(model_path)
            self.model = AutoModelForCausalLM.from_pretrained(model_path, dtype=getattr(torch, dtype))
        except OSError as exc:
            raise OSError(f"LLM {model_path!r} could not be loaded ({exc}). Pass a local model folder (--llm PATH) "
                          "or make the model available in the Hugging Face cache.") from exc
        self.model.to(device).eval()

    def generate(self, prompt: str, params: GenerationParams) -> str:
        import torch

        messages = [{"role": "user", "content": prompt}]
        inputs = self.tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt",
                                                    return_dict=True).to(self.device)
        with torch.inference_mode():
            output = self.model.generate(**inputs, max_new_tokens=params.max_new_tokens, do_sample=params.do_sample,
                                         temperature=None, top_p=None, top_k=None, pad_token_id=self.pad_token_id)
        new_tokens = output[0, inputs["input_ids"].shape[1]:]
        return clean_answer(self.tokenizer.decode(new_tokens, skip_special_tokens=True))

    def generate_batch(self, prompts: Sequence[str], params: GenerationParams) -> list[str]:
        """Answer several prompts in one `generate` call: left-padded to the longest, greedy, same template."""
        import torch

        if not prompts:
            return []
        ids = [self.prompt_ids(prompt) for prompt in prompts]
        width = max(len(row) for row in ids)
        input_ids = torch.tensor([[self.pad_token_id] * (width - len(row)) + row for row in ids])
        attention_mask = torch.tensor([[0] * (width - len(row)) + [1] * len(row) for row in ids])
        with torch.inference_mode():
            output = self.model.generate(input_ids=input_ids.to(self.device),
                                         attention_mask=attention_mask.to(self.device),
                                         max_new_tokens=params.max_new_tokens, do_sample=params.do_sample,
                                         temperature=None, top_p=None, top_k=None, pad_token_id=self.pad_token_id)
        eos = self.model.generation_config.eos_token_id
        eos = self.tokenizer.eos_token_id if eos is None else eos
        stops = set(eos if isinstance(eos, (list, tuple)) else [eos]) - {None}
        rows = output[:, width:].tolist()
        # a row that finished early is filled with padding: cut at its first stop token, as generate() does
        cuts = [next((i + 1 for i, token in enumerate(row) if token in stops), len(row)) for row in rows]
        return [clean_answer(self.tokenizer.decode(r[:c], skip_special_tokens=True)) for r, c in zip(rows, cuts)]


SPEC = register_engine("torch", lambda path, device, dtype, threads: ChatModel(path, device, dtype), batches=True,
                       order=0, description="transformers generate in torch (the paper's)")
