"""Registry of backend adapters: RunConfig -> engine config -> the common learning-curve table
(docs/DESIGN.md).

This is the only module of studies/ that imports sandbox/ or llm_backend/, and it does so lazily inside the
adapters, so `studies` works without torch and `import studies` never compiles Numba kernels.
Adding a backend is one entry in BACKENDS (the LLM issue adds "llm").
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any, Protocol

import numpy as np
import pandas as pd

from isocompute.contract import allocspec
from isocompute.contract.status import DONE
from studies.config import RunConfig, StudiesError

PASS1_COLUMNS = ("run_id", "compute", "split", "problem", "pass1")


@dataclass
class RunOutput:
    """What an adapter returns for one run."""

    table: pd.DataFrame
    """Learning-curve table (docs/DESIGN.md columns), one row per evaluation point, `run_id` first."""
    pass1: pd.DataFrame
    """Per-problem pass@1 snapshots, tidy: run_id, compute, split ("train" | "val"), problem, pass1."""
    status: str = DONE
    """DONE, or DIVERGED (isocompute.contract.status) when parameters or metrics became NaN/inf (the curve
    stops there)."""
    info: dict[str, Any] = field(default_factory=dict)
    """Extra facts for the status record: diverged_step, reason, wall_s, engine details."""
    final: dict[str, bytes] | None = None
    """The run's final state as named files (llm `keep_final`: weights, optimizer state, state.json), kept
    by the store under final/RUN_ID/ so that a later run can continue it; None: nothing kept."""


class Adapter(Protocol):
    """What studies needs of a backend."""

    name: str

    def validate(self, cfg: RunConfig) -> None:
        """Raise StudiesError (one line) if the backend cannot run `cfg` (unknown preset, bad option...)."""

    def run(self, cfg: RunConfig, progress: bool = False) -> RunOutput:
        """Run `cfg` to its budget and return its tables."""

    def needs_gpu(self, cfg: RunConfig) -> bool:
        """Whether a Ray task for `cfg` must reserve a GPU."""

    # Optional: `cpus(cfg) -> int | None`, the CPUs a Ray task for `cfg` reserves (None: all of a node's);
    # one where an adapter lacks it (studies.executors.ray_task_options). `step_bytes(cfg) -> int`: about
    # the memory one step holds (checked against the machine's before a run, studies.cli_kit.checks).
    # `run_many(cfgs, threads, on_result)`: many runs in this process, each output to on_result(i, output,
    # seconds) as it ends (studies.executors).


def engine_kwargs(cfg: RunConfig, engine_fields: dict[str, Any], backend: str,
                  rename: dict[str, str] | None = None, skip: tuple[str, ...] = ()) -> dict[str, Any]:
    """The RunConfig fields an engine config shares by name (docs/DESIGN.md vocabulary), plus its options.

    A field the engine lacks must keep RunConfig's default, else StudiesError names it: a setting is never
    silently ignored. None means "the engine's own default" and is not passed. `rename` maps RunConfig names
    to engine names (the llm backend's `lm` is its `model`); `skip` lists fields the adapter checked itself.
    """
    rename = rename or {}
    defaults = {f.name: f.default for f in fields(RunConfig) if f.name not in ("backend", "options")}
    out: dict[str, Any] = {}
    for name, default in defaults.items():
        value, target = getattr(cfg, name), rename.get(name, name)
        if name in skip:
            continue
        if target in engine_fields:
            if value is not None:
                out[target] = value
        elif value != default:
            raise StudiesError(f"the {backend} backend has no setting {name} (got {value!r})")
    reserved = set(defaults) | set(rename.values())
    for key, value in cfg.options:
        if key in reserved or key not in engine_fields:
            allowed = ", ".join(sorted(set(engine_fields) - reserved))
            listing = "; `isocompute llm options` documents them" if backend == "llm" else ""
            raise StudiesError(f"unknown {backend} option {key!r}; choose from {allowed}{listing}")
        default = engine_fields[key].default
        out[key] = value if default is None else _coerce(key, value, type(default))
    return out


class SimAdapter:
    """The Numba simulator (sandbox/). Backend options: any other SimConfig field (K, dim, share...)."""

    name = "sim"

    def sim_config(self, cfg: RunConfig):
        from sandbox.config import ConfigError, SimConfig

        if cfg.device != "cpu":
            raise StudiesError(f"the simulator runs on the cpu only, got device {cfg.device!r}")
        kwargs = engine_kwargs(cfg, {f.name: f for f in fields(SimConfig)}, "sim", skip=("device",))
        try:
            return SimConfig(**kwargs)
        except ConfigError as e:
            raise StudiesError(str(e)) from None

    def validate(self, cfg: RunConfig) -> None:
        self.sim_config(cfg)

    def needs_gpu(self, cfg: RunConfig) -> bool:
        return False

    def run(self, cfg: RunConfig, progress: bool = False) -> RunOutput:
        import sandbox

        return self._output(cfg, sandbox.run(self.sim_config(cfg), progress=progress))

    def run_many(self, cfgs: list[RunConfig], threads: int | None = None,
                 on_result: Callable[[int, RunOutput, float], None] | None = None) -> list[RunOutput]:
        """Many configs in this process on `threads` threads, handed out one at a time (sandbox.run_many);
        each output equals `run(cfg)`'s and goes to `on_result(index, output, wall seconds)` as soon as its
        run ends."""
        import sandbox

        sims = [self.sim_config(c) for c in cfgs]
        outs: list[RunOutput | None] = [None] * len(cfgs)

        def done(i: int, res) -> None:
            outs[i] = self._output(cfgs[i], res)
            if on_result is not None:
                on_result(i, outs[i], float(res.info["seconds"]))

        sandbox.run_many(sims, threads=threads, on_result=done)
        return outs

    def _output(self, cfg: RunConfig, res) -> RunOutput:
        run_id = cfg.run_id
        table = pd.DataFrame({k: np.asarray(v) for k, v in res.table.items()})
        table.insert(0, "run_id", run_id)
        # the allocator as a curve label (fixed runs: fixed-n8 ...), for `fit --by allocator`
        table["allocator"] = allocspec.label(cfg.allocator, cfg.n)
        pass1 = tidy_pass1(run_id, res.pass1.get("compute"), {s: res.pass1.get(s) for s in ("train", "val")})
        info = {"diverged_step": res.diverged_step, "reason": res.reason}
        return RunOutput(table=table, pass1=pass1, status=res.status, info=info)


def _coerce(key: str, value: Any, kind: type) -> Any:
    """Cast an option parsed from the command line to the type of the engine's field."""
    if kind is bool:
        if isinstance(value, bool):
            return value
        raise StudiesError(f"option {key} must be true or false, got {value!r}")
    if kind is int:
        if isinstance(value, bool) or not isinstance(value, int | float) or value != int(value):
            raise StudiesError(f"option {key} must be an integer, got {value!r}")
        return int(value)
    if kind is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise StudiesError(f"option {key} must be a number, got {value!r}")
        return float(value)
    return value


def tidy_pass1(run_id: str, compute, splits: dict[str, np.ndarray | None]) -> pd.DataFrame:
    """(E,) compute and (E, d) pass@1 arrays per split -> tidy (run_id, compute, split, problem, pass1)."""
    parts = []
    for split, arr in splits.items():
        if arr is None or compute is None:
            continue
        arr = np.asarray(arr, dtype=np.float32)
        e, d = arr.shape
        parts.append(pd.DataFrame({
            "run_id": run_id,
            "compute": np.repeat(np.asarray(compute, dtype=np.int64), d),
            "split": split,
            "problem": np.tile(np.arange(d, dtype=np.int32), e),
            "pass1": arr.reshape(-1),
        }))
    if not parts:
        return pd.DataFrame({c: pd.Series(dtype=t) for c, t in zip(
            PASS1_COLUMNS, ("str", "int64", "str", "int32", "float32"), strict=True)})
    return pd.concat(parts, ignore_index=True)


class LLMAdapter:
    """GRPO on a real causal LM (llm_backend/). `lm`: a local HF folder, "tiny" / "small" for the shipped tiny
    LMs, or None / "smollm2" for the prepared SmolLM2. Backend options: other LLMConfig fields (engine,
    max_new_tokens, train_dtype...)."""

    name = "llm"

    def llm_config(self, cfg: RunConfig):
        from llm_backend.config import ConfigError, LLMConfig, config_for

        if cfg.model is not None:
            raise StudiesError(f"model is a simulator policy preset ({cfg.model!r}); the llm backend takes "
                               "--lm (tiny, small, smollm2 or a local HF folder)")
        # problem_seed pairs runs by their problem set and initial policy; on the llm backend both are fixed
        # (the calibrated split, the LM), so every run is paired whatever its value (sweeps set it)
        kwargs = engine_kwargs(cfg, {f.name: f for f in fields(LLMConfig)}, "llm", rename={"lm": "model"},
                               skip=("model", "problem_seed"))
        if kwargs.get("model") in ("smollm2", "default"):
            kwargs["model"] = None
        try:
            return config_for(**kwargs)  # a tiny LM's defaults (engine kv, lr...) where nothing was set
        except ConfigError as e:
            raise StudiesError(str(e)) from None

    def validate(self, cfg: RunConfig) -> None:
        """Config, model folder and problem files, so a sweep fails before its first run, in one line."""
        from llm_backend.config import ConfigError
        from llm_backend.model import ModelError, resolve_model
        from llm_backend.problems import load_problems

        c = self.llm_config(cfg)
        try:
            resolve_model(c.model, c.cache_dir)
            load_problems(c)
        except (ConfigError, ModelError, ValueError, OSError) as e:
            raise StudiesError(str(e).splitlines()[0]) from None

    def needs_gpu(self, cfg: RunConfig) -> bool:
        return cfg.device.startswith("cuda")

    def step_bytes(self, cfg: RunConfig) -> int:
        """About the memory one step of `cfg` holds (llm_backend.loop.step_bytes), for the checks made
        before a run starts (studies.cli_kit.checks.check_memory)."""
        from llm_backend.loop import step_bytes

        return step_bytes(self.llm_config(cfg))

    def cpus(self, cfg: RunConfig) -> int | None:
        """On cpu a run's torch and vLLM threads use the whole machine, as they do under the local executor
        (None: a Ray task takes all of a node's CPUs); beside a GPU one CPU drives it."""
        return 1 if self.needs_gpu(cfg) else None

    def run(self, cfg: RunConfig, progress: bool = False) -> RunOutput:
        from llm_backend.config import ConfigError
        from llm_backend.loop import run
        from llm_backend.model import ModelError

        try:
            res = run(self.llm_config(cfg), progress=progress)
        except (ConfigError, ModelError) as e:
            raise StudiesError(str(e)) from None
        run_id = cfg.run_id
        table = pd.DataFrame({k: np.asarray(v) for k, v in res.table.items()})
        table.insert(0, "run_id", run_id)
        table["allocator"] = allocspec.label(cfg.allocator, cfg.n)  # as the sim table (fit --by allocator)
        pass1 = tidy_pass1(run_id, res.pass1["compute"], {s: res.pass1.get(s) for s in ("train", "val")})
        info = {"diverged_step": res.diverged_step, "reason": res.reason, "steps": len(res.steps),
                "wall_s": float(sum(s["t_step"] for s in res.steps)),
                "rollouts": int(res.steps[-1]["compute"]) if res.steps else 0}
        return RunOutput(table=table, pass1=pass1, status=res.status, info=info, final=res.final)


def engine_defaults(name: str) -> str:
    """How the engines fill the RunConfig field `name` when it is left None, as one phrase for --help
    ("sim 32, llm 4"), read from their config dataclasses (and the tiny LMs' TINY_DEFAULTS where they
    differ), so the help cannot drift from the code that applies it. The llm's 0 for d / d_val is "the
    whole split". Imports both engines' configs (about a second): call it when help is shown."""
    from llm_backend.config import TINY_DEFAULTS, LLMConfig
    from sandbox.config import SimConfig

    def said(v: Any) -> str:
        return "the whole split" if name in ("d", "d_val") and v == 0 else str(v)

    sim = {f.name: f.default for f in fields(SimConfig)}
    llm = {f.name: f.default for f in fields(LLMConfig)}
    parts = [f"sim {said(sim[name])}"] if name in sim else []
    if name in llm:
        parts.append(f"llm {said(llm[name])}")
        if name in TINY_DEFAULTS and TINY_DEFAULTS[name] != llm[name]:
            parts.append(f"tiny LMs {said(TINY_DEFAULTS[name])}")
    return ", ".join(parts)


def sim_default(name: str) -> Any:
    """The simulator's default of its config field `name`: what a RunConfig field left None becomes on the
    simulator (studies.presets.preset_lr reads the lr a preset leaves unwritten)."""
    from sandbox.config import SimConfig

    return {f.name: f.default for f in fields(SimConfig)}[name]


def field_docs(cls: type) -> dict[str, str]:
    """{field: its attribute docstring} of a dataclass, read from its source (the string literal that
    follows each annotated field), joined to one line."""
    import ast
    import inspect
    import textwrap

    tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
    docs: dict[str, str] = {}
    for node, nxt in zip(body, [*body[1:], None], strict=True):
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            if isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Constant) and isinstance(
                    nxt.value.value, str):
                docs[node.target.id] = " ".join(nxt.value.value.split())
            else:
                docs[node.target.id] = ""
    return docs


def backend_options(backend: str) -> list[dict[str, Any]]:
    """The `--option KEY=VALUE` keys of a backend: every field of its engine config that no RunConfig field
    (a run flag) sets, with default, type and documentation; generated from the config dataclass, so the
    list cannot drift from what `engine_kwargs` accepts."""
    if backend == "llm":
        from llm_backend.config import LLMConfig as engine_cls

        reserved = {"model"}
    elif backend == "sim":
        from sandbox.config import SimConfig as engine_cls

        reserved = set()
    else:
        raise StudiesError(f"unknown backend {backend!r}; choose one of {', '.join(BACKENDS)}")
    reserved |= {f.name for f in fields(RunConfig)}
    docs = field_docs(engine_cls)
    out = []
    for f in fields(engine_cls):
        if f.name in reserved:
            continue
        default = f.default if not callable(getattr(f, "default_factory", None)) else f.default_factory()
        out.append({"key": f.name, "default": default, "type": type(default).__name__ if default is not None
                    else str(f.type), "doc": docs.get(f.name, "")})
    return out


def llm_cpu_dtype() -> str:
    """The llm backend's default precision on this CPU (llm_backend.config.cpu_dtype; float32 when the
    backend cannot load)."""
    try:
        from llm_backend.config import CPU_DTYPE
    except ImportError:
        return "float32"
    return CPU_DTYPE


BACKENDS: dict[str, Adapter] = {"sim": SimAdapter(), "llm": LLMAdapter()}
"""Registered adapters by name."""


def get_backend(name: str) -> Adapter:
    """The adapter called `name`; StudiesError (one line) for unknown backends."""
    if name in BACKENDS:
        return BACKENDS[name]
    raise StudiesError(f"unknown backend {name!r}; choose one of {', '.join(sorted(BACKENDS))}")


def register_backend(name: str, adapter: Adapter) -> None:
    """Add or replace an adapter (plugins and tests)."""
    BACKENDS[name] = adapter


# ------------------------------------------------- measurements from inside simulator runs (claims probes)
def sim_val_sources(cfg: RunConfig) -> list[str]:
    """The difficulty preset of each validation problem of the simulator run `cfg` (mixes such as `dual`):
    the claims report reads it here, since only this module may import an engine."""
    from sandbox.problems import make_problems

    sc = get_backend("sim").sim_config(cfg)
    return [str(s) for s in make_problems(sc).source[sc.d :]]


def sim_gradient_pieces(cfg: RunConfig, quarters: int, problems: int) -> list[tuple[int, int, np.ndarray]]:
    """(step m, compute spent by then, per-problem GRPO gradients) of the simulator run `cfg` at steps
    m / 4^k (k = quarters..0): parameters from sandbox.train_snapshots, gradients from sandbox.gradient_pieces
    (one piece = one problem with its n rollouts) on at most `problems` training problems."""
    from sandbox import gradient_pieces, train_snapshots

    sc = get_backend("sim").sim_config(cfg)
    stops = sorted({max(1, sc.steps // 4**k) for k in range(quarters, -1, -1)})
    out = []
    for m, theta in zip(stops, train_snapshots(sc, stops), strict=True):
        pieces = gradient_pieces(sc, theta, problems=min(problems, sc.d), seed=0)
        out.append((int(m), int(m * sc.bp * (sc.n + sc.n_est)), pieces))
    return out
