"""verl metric logs as learning-curve tables: the JSONL file logger and the console logger.

Formats as written by verl (verl-project/verl, read at these commits):
- verl/utils/tracking.py @ 497e17659695922355bb5bcf8a2880947edb7a2d, `FileLogger.log`: one line
  `{"step": step, "data": {metric: value, ...}}` per `Tracking.log` call (trainer.logger=[..., "file"], path
  VERL_FILE_LOGGER_PATH or <VERL_FILE_LOGGER_ROOT>/<project>/<experiment>.jsonl).
- verl/utils/logger/aggregate_logger.py @ b017a83320fdbc6c4e76efe499dc5f3f4aec76af, `concat_dict_to_str`:
  `step:{step} - {key}:{pprint.pformat(value)} - ...` (numeric values only); printed inside Ray's TaskRunner,
  so lines usually carry a `(TaskRunner pid=...)` prefix.
- verl/trainer/main_ppo.py @ addf8056956991e76db9367706108e426be7bc2f prints the resolved config with
  `pprint(OmegaConf.to_container(config, resolve=True))` first: data.train_batch_size (prompts per step, bp)
  and actor_rollout_ref.rollout.n (n) are read from there, or from Hydra's .hydra/config.yaml beside the log.
- Metric names (verl/trainer/ppo/metric_utils.py @ 12cd10637654369d87b987c83b6df016df635ab8 and
  ray_trainer.py `_validate`): critic/score/mean (mean sequence score of the step's rollouts),
  response_length/mean, prompt_length/mean, perf/total_num_tokens (prompt + response tokens of the batch),
  training/global_step, training/epoch, actor/entropy, actor/grad_norm, actor/lr, and
  val-core/<data_source>/<var>/mean@N, best@N/mean (val-core) and worst@N/mean (val-aux).
Without a config, bp x n = perf/total_num_tokens / (prompt_length/mean + response_length/mean) per step, so
one of --n / --bp is enough.
"""

from __future__ import annotations

import ast
import json
import math
import re
from pathlib import Path

import numpy as np
import pandas as pd

from studies.config import StudiesError
from studies.readers.common import (
    build_table,
    files_under,
    merge_geometry,
    need_geometry,
    parse_scalar,
)

KEYMAP = {
    "critic/score/mean": "batch_reward",
    "response_length/mean": "response_len",
    "actor/entropy": "entropy",
    "actor/kl_loss": "kl",
    "actor/grad_norm": "grad_norm",
    "actor/lr": "lr",
    "training/epoch": "epoch",
}
N_HINT = "actor_rollout_ref.rollout.n"
BP_HINT = "data.train_batch_size"

_PREFIX = re.compile(r"^\s*(?:\([^)]*pid=\d+[^)]*\)\s*)?")  # Ray's "(TaskRunner pid=123, ip=...) "
_CONSOLE = re.compile(r"step:(\d+) - (.*)$")
_VAL = re.compile(r"^val-(?:core|aux)/(.+)/([^/]+)/(mean@(\d+)|best@(\d+)/mean|worst@(\d+)/mean)$")
LOG_SUFFIXES = (".log", ".txt", ".out", ".err", "")


def _strip(line: str) -> str:
    return _PREFIX.sub("", line, count=1).rstrip("\n")


def _is_file_logger(path: Path) -> bool:
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            if line.strip():
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError:
                    return False
                return isinstance(rec, dict) and set(rec) == {"step", "data"}
    return False


def _is_console(path: Path) -> bool:
    with open(path, encoding="utf-8", errors="replace") as f:
        for i, line in enumerate(f):
            if _CONSOLE.match(_strip(line)):
                return True
            if i > 20000:
                return False
    return False


def _log_kind(path: Path) -> str | None:
    suffix = path.suffix.lower()
    if suffix == ".jsonl" and _is_file_logger(path):
        return "jsonl"
    if suffix in LOG_SUFFIXES and _is_console(path):
        return "console"
    return None


def sniff(path: Path) -> bool:
    """A verl JSONL file-logger file or console log, or a folder holding some."""
    if path.is_dir():
        return any(_log_kind(p) for p in _candidates(path))
    return _log_kind(path) is not None


def _candidates(root: Path) -> list[Path]:
    return files_under(root, "*.jsonl", 2) + [p for s in (".log", ".txt", ".out") for p in
                                               files_under(root, f"*{s}", 2)]


def parse_console(text: str) -> tuple[dict[int, dict], dict | None]:
    """{step: metrics} from console lines (later lines of a step update earlier ones) and the printed
    config dict, if the log starts with one."""
    steps: dict[int, dict] = {}
    config = None
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = _strip(lines[i])
        if config is None and line.startswith("{'"):
            block, depth, j = [], 0, i
            while j < len(lines) and j < i + 5000:
                part = _strip(lines[j])
                block.append(part)
                depth += part.count("{") - part.count("}")
                j += 1
                if depth <= 0:
                    break
            try:
                parsed = ast.literal_eval("\n".join(block))
                if isinstance(parsed, dict) and "data" in parsed:
                    config = parsed
                    i = j
                    continue
            except (ValueError, SyntaxError, MemoryError, RecursionError):
                pass
        m = _CONSOLE.match(line)
        if m:
            rec = steps.setdefault(int(m.group(1)), {})
            for item in m.group(2).split(" - "):
                key, sep, val = item.rpartition(":")
                if sep and key:
                    rec[key.strip()] = parse_scalar(val)
        i += 1
    return steps, config


def parse_jsonl(path: Path) -> dict[int, dict]:
    steps: dict[int, dict] = {}
    with open(path, encoding="utf-8") as f:
        for k, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
                steps.setdefault(int(rec["step"]), {}).update(rec["data"])
            except (json.JSONDecodeError, KeyError, TypeError, ValueError):
                raise StudiesError(f"{path}:{k} is not a verl file-logger line (step, data)") from None
    return steps


def _hydra_config(path: Path) -> dict | None:
    for cand in (path.parent / ".hydra" / "config.yaml", path.parent / "config.yaml"):
        if cand.is_file():
            try:
                import yaml
            except ImportError:
                return None
            try:
                cfg = yaml.safe_load(cand.read_text())
            except Exception:  # a malformed file is no config, not a crash
                return None
            return cfg if isinstance(cfg, dict) else None
    return None


def _geometry_from_config(cfg: dict | None) -> dict[str, int | None]:
    def get(*keys):
        v = cfg
        for k in keys:
            if not isinstance(v, dict) or k not in v:
                return None
            v = v[k]
        return int(v) if isinstance(v, int | float) and not isinstance(v, bool) else None

    if not cfg:
        return {"n": None, "bp": None}
    return {"n": get("actor_rollout_ref", "rollout", "n"), "bp": get("data", "train_batch_size")}


def _batch_from_tokens(steps: dict[int, dict]) -> int | None:
    """bp x n of the run: sequences per step = total tokens / (mean prompt + mean response length)."""
    vals = []
    for rec in steps.values():
        keys = ("perf/total_num_tokens", "prompt_length/mean", "response_length/mean")
        tot, pl, rl = (rec.get(k) for k in keys)
        try:
            tot, pl, rl = float(tot), float(pl), float(rl)
        except (TypeError, ValueError):
            continue
        if math.isfinite(tot) and pl + rl > 0:
            vals.append(tot / (pl + rl))
    return int(round(float(np.median(vals)))) if vals else None


def _validation(steps: dict[int, dict]) -> tuple[dict[int, dict], float]:
    """Adds val_mean / val_best_k / val_worst_k (averaged over data sources) to each step; returns k."""
    k = math.nan
    for rec in steps.values():
        acc: dict[str, list[float]] = {"val_mean": [], "val_best_k": [], "val_worst_k": []}
        for key, v in rec.items():
            m = _VAL.match(key)
            if not m:
                continue
            col = "val_mean" if m.group(4) else "val_best_k" if m.group(5) else "val_worst_k"
            if col == "val_mean":
                k = float(m.group(4))
            acc[col].append(float(v))
        for col, vs in acc.items():
            if vs:
                rec[col] = float(np.mean(vs))
    return steps, k


def read(path: Path, n: int | None = None, bp: int | None = None) -> pd.DataFrame:
    """Learning-curve table of one verl log, or of every verl log in a folder (one run per file)."""
    files = [path] if path.is_file() else [p for p in _candidates(path) if _log_kind(p)]
    if not files:
        raise StudiesError(f"no verl log under {path}")
    tables = []
    for f in files:
        kind = _log_kind(f)
        if kind == "jsonl":
            steps, cfg = parse_jsonl(f), None
        elif kind == "console":
            steps, cfg = parse_console(f.read_text(encoding="utf-8", errors="replace"))
        else:
            raise StudiesError(f"{f} is not a verl console log or file-logger JSONL")
        if not steps:
            raise StudiesError(f"{f} has no logged steps")
        cfg = cfg or _hydra_config(f)
        g = merge_geometry(_geometry_from_config(cfg), {"n": n, "bp": bp}, str(f))
        batch = _batch_from_tokens(steps)
        if batch is not None:
            if g["n"] is not None and g["bp"] is None and batch % g["n"] == 0:
                g["bp"] = batch // g["n"]
            elif g["bp"] is not None and g["n"] is None and batch % g["bp"] == 0:
                g["n"] = batch // g["bp"]
        nn, bb = need_geometry(g["n"], g["bp"], str(f), N_HINT, BP_HINT)
        steps, k = _validation(steps)
        keymap = dict(KEYMAP, val_mean="val_mean", val_best_k="val_best_k", val_worst_k="val_worst_k")
        tables.append(build_table(steps, keymap, run_id=f.stem if path.is_file() else
                                  str(f.relative_to(path).with_suffix("")), backend="verl", n=nn, bp=bb, k=k))
    return pd.concat(tables, ignore_index=True)
