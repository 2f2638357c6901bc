"""Which family of language model a run trains, decided once from its `--lm` value (`LLMConfig.model`).

Two families share the trainer, the loop, the evaluation and the allocators, and differ in a handful of
places: how the model and tokenizer load, which rollout engines can sample it, which problems it is given and
where its calibrated splits live, and the defaults of a run or a calibration on it.

- "tiny": a tiny LM by name (`tiny` ships in llm_backend/models/; `small` once `isocompute llm pretrain` made
  it, in the cache) or a folder saved by
  llm_backend/tiny/model.py (our own torch module, the character tokenizer, the tiny task family);
- "hf": any other causal LM, through transformers: the prepared SmolLM2-135M-Instruct (`--lm smollm2` or
  none) or a local Hugging Face folder.

Why one value object: the question "is this a tiny LM?" used to be asked again at each place that needed the
answer (from the name, from the folder's tokenizer, from its weights file). `family_of` asks it once;
`LLMConfig.family` holds the answer for the config's lifetime, and every place that differs between the
families reads it there.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

TINY_NAMES = ("tiny", "small")
"""--lm names of the shipped tiny LMs (llm_backend/tiny/model.py SIZES)."""
HF_DEFAULT_NAMES = (None, "", "smollm2", "default")
"""--lm values that mean the prepared SmolLM2-135M-Instruct (`isocompute llm prepare`)."""


@dataclass(frozen=True)
class ModelFamily:
    """The family of one `--lm` value and what follows from it (module docstring). Built by `family_of`."""

    name: str
    """"tiny" or "hf"."""
    shipped: str | None
    """The shipped tiny LM this names ("tiny", "small"), else None."""
    folder: Path | None
    """The local folder `--lm` names (a pretrained tiny LM or an HF model), else None (a shipped tiny LM, or
    the prepared SmolLM2). Not checked here: resolving it (`model.resolve_model`) says when it is missing."""
    engine: str
    """Default rollout engine: kv (batched KV-cache sampling, llm_backend/tiny/sampler.py) for a tiny LM,
    vllm otherwise."""
    engines: tuple[str, ...]
    """Engines that sample this family: a tiny LM kv or vllm (transformers generate is slow on it and lives in
    benchmarks/tiny_lm.py only), an HF LM vllm or hf (kv runs our own module only)."""
    calibrate_tokens: int
    """Default completion cap of `isocompute llm calibrate`: 10 for a tiny LM (answers of at most 9
    characters + EOS), 24 otherwise."""
    calibrate_temperature: float
    """Default sampling temperature of `isocompute llm calibrate`: the temperature runs sample at (1.0 for a
    tiny LM: the distribution it learned; 0.7 otherwise)."""

    @property
    def is_tiny(self) -> bool:
        return self.name == "tiny"

    @property
    def splits_sub(self) -> str:
        """Subfolder of a splits root holding this family's calibrated splits: a tiny LM's are calibrated on
        it (<root>/<name>; "tiny" for a pretrained folder), SmolLM2's sit at the root."""
        return (self.shipped or "tiny") if self.is_tiny else ""

    @property
    def own_splits(self) -> Path | None:
        """A pretrained tiny LM folder keeps the splits calibrated on it: <folder>/splits; else None."""
        return self.folder / "splits" if self.is_tiny and self.folder is not None else None

    def engine_error(self, engine: str) -> str | None:
        """Why `engine` cannot sample this family (a one-line message), or None when it can."""
        if engine in self.engines:
            return None
        if self.is_tiny:
            return ("the tiny LMs sample with engine kv (or vllm); transformers generate is in "
                    "benchmarks/tiny_lm.py only")
        return f"engine {engine!r} samples the tiny LMs (--lm tiny or small); use vllm or hf here"


def _tiny(shipped: str | None, folder: Path | None) -> ModelFamily:
    return ModelFamily("tiny", shipped, folder, engine="kv", engines=("kv", "vllm"), calibrate_tokens=10,
                       calibrate_temperature=1.0)


def _hf(folder: Path | None) -> ModelFamily:
    return ModelFamily("hf", None, folder, engine="vllm", engines=("vllm", "hf"), calibrate_tokens=24,
                       calibrate_temperature=0.7)


def family_of(model: str | Path | None) -> ModelFamily:
    """The family of `--lm` value `model`: a shipped tiny LM by name, a folder saved by
    llm_backend/tiny/model.py (config.json, model.safetensors and the character tokenizer), or else an HF LM
    (the prepared SmolLM2 for None / "smollm2" / "default")."""
    if model is not None and str(model) in TINY_NAMES:
        return _tiny(str(model), None)
    if model in HF_DEFAULT_NAMES:
        return _hf(None)
    return folder_family(model)


def folder_family(folder: str | Path) -> ModelFamily:
    """The family of a model folder (no names: a folder called "tiny" is a folder): tiny when
    llm_backend/tiny/model.py saved it, else hf. For callers that hold a resolved folder and no config."""
    from llm_backend.tiny.model import is_tiny_folder

    folder = Path(folder).expanduser()
    return _tiny(None, folder) if is_tiny_folder(folder) else _hf(folder)
