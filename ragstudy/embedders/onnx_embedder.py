"""onnx: the embedding model through ONNX Runtime, float32 (the lite profile's backend).

A sentence-transformers folder is exported once with `torch.onnx.export` (transformer, the folder's pooling and L2
normalisation in one graph), optionally quantized to int8 (ragstudy.embedders.onnx_int8_embedder), and run by ONNX
Runtime with texts sorted by token length so batches carry little padding. Exports are cached under
`<cache>/onnx/<hash of the model's files>/`. Same vectors as torch float32 (cosine 1.0000, same top-10), ~4x faster
on CPU.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import warnings
from pathlib import Path

import numpy as np

from ragstudy.embedders import Embedder, register_embedder
from ragstudy.errors import store_error
from ragstudy.io import build_lock, cache_dir, set_aside
from ragstudy.stores.cachefile import FOLDER_MANIFEST, manifest_of, record, recorded_files, set_aside_damaged, verify

logger = logging.getLogger(__name__)

# quantized -> the variant the vectors are cached and collected under (onnx, onnx-int8); bump the int8 suffix when
# the quantization recipe changes, or runs would reuse the old recipe's vectors from the cache and from Chroma
VARIANT_OF = {False: "onnx", True: "onnx-int8-r2"}
# part of the export's cache key: change it when the graph changes
EXPORT_RECIPE = "pooled-normalised-v1/int8-matmul-per-channel-ffn-out-fp32"
ONNX_OPSET = 17


def model_folder(model: str) -> Path:
    """A local folder for `model` (a folder, or a hub id already in the Hugging Face cache)."""
    if Path(model).is_dir():
        return Path(model)
    from huggingface_hub import snapshot_download

    try:
        return Path(snapshot_download(model, local_files_only=True))
    except Exception as exc:  # huggingface_hub raises several types for "not in the local cache"
        raise OSError(f"the ONNX backends need the model's files on disk; {model!r} is not a folder and not in "
                      f"the Hugging Face cache ({exc})") from exc


def files_hash(folder: Path) -> str:
    """sha256 over the relative paths and bytes of every file in a model folder (what the export depends on)."""
    digest = hashlib.sha256(EXPORT_RECIPE.encode())
    # the project cache's manifest of a rebuilt folder is not the model
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and ".onnx" not in p.name
                       and p.name != FOLDER_MANIFEST):
        digest.update(str(path.relative_to(folder)).encode() + b"\0")
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def pooling_of(folder: Path) -> tuple[str, str, int, bool]:
    """(transformer subfolder, pooling mode 'mean'|'cls', max_seq_length, do_lower_case) from the folder's
    modules.json, pooling and sentence_bert configs, as sentence-transformers reads them."""
    modules = json.loads((folder / "modules.json").read_text()) if (folder / "modules.json").is_file() else []
    transformer, mode = "", "mean"  # sentence-transformers' defaults for a plain transformers folder
    for module in modules:
        kind = module.get("type", "")
        if kind.endswith("models.Transformer"):
            transformer = module.get("path", "")
        elif kind.endswith("models.Pooling"):
            config = json.loads((folder / module["path"] / "config.json").read_text())
            modes = [name for name in ("cls_token", "mean_tokens", "max_tokens", "mean_sqrt_len_tokens",
                                       "weightedmean_tokens", "lasttoken") if config.get(f"pooling_mode_{name}")]
            if modes not in (["mean_tokens"], ["cls_token"]):
                raise OSError(f"{folder}: pooling {modes} is not supported by the ONNX backends (mean or cls only); "
                              "use --embedding-backend torch")
            mode = "mean" if modes == ["mean_tokens"] else "cls"
    st_config = folder / transformer / "sentence_bert_config.json"
    st_values = json.loads(st_config.read_text()) if st_config.is_file() else {}
    return transformer, mode, int(st_values.get("max_seq_length") or 512), bool(st_values.get("do_lower_case"))


def export_onnx(folder: Path, target: Path, quantize: bool) -> Path:
    """`model.onnx` (float32, pooled and normalised) in `target`, and `model-int8.onnx` when `quantize`; each is
    built once, atomically (a temporary folder renamed into place)."""
    name = "model-int8.onnx" if quantize else "model.onnx"
    with build_lock(target / name):  # concurrent workers export once: the others wait, then find it built
        if (target / name).is_file() and _usable_export(target / name, quantize):
            return target / name
        fp32 = export_onnx(folder, target, quantize=False) if quantize else None
        tmp = target.with_name(f"{target.name}.{os.getpid()}.partial")
        shutil.rmtree(tmp, ignore_errors=True)
        try:
            tmp.mkdir(parents=True)
            _build_onnx(folder, tmp, target, name, fp32, quantize)
        except OSError as exc:  # a full, read-only or blocked cache folder: one line naming it (nothing half-written)
            raise store_error("ONNX model cache", target, "writing the exported model failed", exc,
                              "the model is exported again") from None
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return target / name


def _build_onnx(folder: Path, tmp: Path, target: Path, name: str, fp32: Path | None, quantize: bool) -> None:
    """Export (or quantize) into `tmp`, then move the files into `target` (external data first, graph last)."""
    if quantize:
        from onnxruntime.quantization import QuantType, quantize_dynamic

        logger.info("quantizing %s to int8 (once)", fp32)
        quantize_dynamic(str(fp32), str(tmp / name), weight_type=QuantType.QInt8, per_channel=True,
                         op_types_to_quantize=["MatMul"], nodes_to_exclude=ffn_outputs(fp32))
    else:
        logger.info("exporting %s to ONNX in %s (once)", folder, target)
        _export_fp32(folder, tmp)
    record(manifest_of(tmp / name), list(tmp.iterdir()), recipe=EXPORT_RECIPE, quantized=quantize)
    target.mkdir(parents=True, exist_ok=True)
    for path in sorted(tmp.iterdir(), key=lambda p: (p.suffix == ".onnx", p.suffix == ".json")):
        path.replace(target / path.name)  # external data first, then the graph, its manifest last


QUANTIZED_OPS = {"MatMulInteger", "DynamicQuantizeLinear", "QLinearMatMul", "DynamicQuantizeMatMul"}


def _usable_export(path: Path, quantize: bool) -> bool:
    """True when the export `path` matches the manifest recorded when it was built. One without a manifest (built
    before manifests were recorded) is adopted when its graph parses and is of the right precision. Anything else
    (truncated, another model copied over it) is set aside with a warning, to be exported again."""
    manifest = manifest_of(path)
    problem = verify(manifest) if manifest.is_file() else _graph_problem(path, quantize)
    if problem is None:
        if not manifest.is_file():
            record(manifest, _graph_files(path), recipe=EXPORT_RECIPE, quantized=quantize)
        return True
    others = [f for f in recorded_files(manifest) if f.exists() and f != path]
    set_aside_damaged(path, "ONNX model cache", problem)
    for file in [*others, manifest]:
        if file.exists():
            set_aside(file)
    return False


def _graph_problem(path: Path, quantize: bool) -> str | None:
    """Why the graph `path` cannot be the export it is named as (None if it can): unreadable, or its precision."""
    import onnx
    from google.protobuf.message import DecodeError

    try:
        graph = onnx.load(str(path), load_external_data=False).graph
    except (OSError, ValueError, DecodeError) as exc:  # a truncated or foreign file
        return f"not a readable ONNX graph ({type(exc).__name__})"
    quantized = any(node.op_type in QUANTIZED_OPS for node in graph.node)
    if quantized != quantize:
        return "an int8 (quantized) graph where the float32 export belongs" if quantized else \
            "a float32 graph where the int8 export belongs"
    return None


def _graph_files(path: Path) -> list[Path]:
    """The graph and the external data files it names."""
    import onnx

    model = onnx.load(str(path), load_external_data=False)
    names = {entry.value for tensor in onnx.external_data_helper._get_all_tensors(model)
             for entry in tensor.external_data if entry.key == "location"}
    return [path, *(path.parent / name for name in sorted(names) if (path.parent / name).is_file())]


def ffn_outputs(path: Path) -> list[str]:
    """The feed-forward output projections (`layer.N/output/dense`), kept in float32 when quantizing.

    Their inputs carry the activation outliers that int8 rounds worst. Measured on MiniLM over 1,500 child windows
    of the shared Italian PDFs and the 36 ../shared/qa questions: quantizing every MatMul weight per channel gave a
    mean cosine of .991 to the float32 vectors and a top-10 agreement of .858 at 1.4x ONNX float32's speed; keeping
    these six in float32, .996 and .897 at 1.2x (the library's defaults, per tensor: .923 mean, .68 lowest cosine).
    """
    import onnx

    graph = onnx.load(str(path), load_external_data=False).graph
    return [node.name for node in graph.node if node.op_type == "MatMul"
            and "/output/dense/" in node.name and "attention" not in node.name]


def _export_fp32(folder: Path, out: Path) -> None:
    import torch
    from transformers import AutoModel, AutoTokenizer

    transformer, mode, _, _ = pooling_of(folder)
    tokenizer = AutoTokenizer.from_pretrained(folder / transformer)
    model = AutoModel.from_pretrained(folder / transformer, dtype=torch.float32).eval()
    names = [n for n in ("input_ids", "attention_mask", "token_type_ids") if n in tokenizer.model_input_names]

    class Pooled(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
            kwargs = dict(zip(names, inputs))
            hidden = self.model(**kwargs).last_hidden_state
            if mode == "cls":
                pooled = hidden[:, 0]
            else:  # sentence-transformers' mean: sum over real tokens / max(count, 1e-9)
                mask = kwargs["attention_mask"].unsqueeze(-1).to(hidden.dtype)
                pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            return torch.nn.functional.normalize(pooled, p=2, dim=1)

    sample = tokenizer(["una frase di prova", "e un'altra frase un po' più lunga della prima"], padding=True,
                       return_tensors="pt")
    axes = {n: {0: "batch", 1: "tokens"} for n in names}
    # the tracer's warnings (Python booleans of traced shapes, advanced indexing in opset 17) concern graphs with
    # inputs of other shapes than the dynamic axes cover; the export is checked against torch by the tests
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore", category=torch.jit.TracerWarning)
        warnings.filterwarnings("ignore", message="Exporting aten::index operator")
        torch.onnx.export(Pooled(), tuple(sample[n] for n in names), str(out / "model.onnx"), input_names=names,
                          output_names=["sentence_embedding"], opset_version=ONNX_OPSET, dynamo=False,
                          dynamic_axes={**axes, "sentence_embedding": {0: "batch"}})


class OnnxEncoder:
    """A sentence-transformers model through ONNX Runtime (float32 or dynamic int8), length-sorted batches."""

    def __init__(self, model: str, cache_root: str | Path, quantize: bool = False, threads: int = 1,
                 batch_size: int = 32) -> None:
        import onnxruntime as ort
        from transformers import AutoTokenizer

        folder = model_folder(model)
        transformer, _, self.max_length, self.lower = pooling_of(folder)
        self.variant = VARIANT_OF[quantize]
        self.batch_size = batch_size
        self.device = "cpu"
        self.path = export_onnx(folder, Path(cache_root) / files_hash(folder)[:32], quantize)
        self.tokenizer = AutoTokenizer.from_pretrained(folder / transformer)
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")  # shared cores: sleep, not spin
        self.session = ort.InferenceSession(str(self.path), options, providers=["CPUExecutionProvider"])
        self.input_names = [i.name for i in self.session.get_inputs()]
        logger.info("ONNX encoder %s (%d threads, batch %d)", self.path, threads, batch_size)

    def encode(self, texts: list[str]) -> np.ndarray:
        if self.lower:
            texts = [text.lower() for text in texts]
        ids = self.tokenizer(texts, truncation=True, max_length=self.max_length)["input_ids"]
        out = np.empty((len(texts), 0), dtype=np.float32)
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))  # similar lengths together: little padding
        pad = self.tokenizer.pad_token_id or 0
        for start in range(0, len(order), self.batch_size):
            batch = order[start:start + self.batch_size]
            width = max(len(ids[i]) for i in batch)
            input_ids = np.full((len(batch), width), pad, dtype=np.int64)
            mask = np.zeros((len(batch), width), dtype=np.int64)
            for row, i in enumerate(batch):
                input_ids[row, :len(ids[i])] = ids[i]
                mask[row, :len(ids[i])] = 1
            feeds = {"input_ids": input_ids, "attention_mask": mask, "token_type_ids": np.zeros_like(mask)}
            vectors = self.session.run(None, {name: feeds[name] for name in self.input_names})[0]
            if out.shape[1] == 0:
                out = np.empty((len(texts), vectors.shape[1]), dtype=np.float32)
            out[batch] = vectors
        return out


@register_embedder
class OnnxEmbedder(Embedder):
    name = "onnx"
    description = "ONNX Runtime, float32, CPU (the model exported once)"
    order = 1
    thread_per_core = True
    quantize = False  # onnx-int8 (onnx_int8_embedder) is this backend with the export quantized

    def variant(self) -> str:
        return VARIANT_OF[self.quantize]

    def make_encoder(self, path: str) -> OnnxEncoder:
        return OnnxEncoder(path, cache_dir() / "onnx", quantize=self.quantize, threads=self.threads(),
                           batch_size=self.config.embedding_batch_size)
