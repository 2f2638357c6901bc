"""Declared studies: what a figure or a claims section needs, run once through the one study pipeline.

A `StudySpec` names a sweep (kind, policy role, dataset, grid, budget, seeds, overrides, variants);
`study_configs` turns it into RunConfigs with `studies.sweeps.build_sweep`, `run_studies` runs the missing
ones through `studies.executors.run_sweep` into one `studies.store.ResultStore`, and `Tables` hands the
consumer the finished runs' tables, read through the store. Run ids are hashes of the config, so a run that
several studies need is computed once and never recomputed. Policy roles are looked up in a presets mapping,
one backend's table of studies.presets for every consumer, so one configuration has one run id in every
figure and report.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

import pandas as pd

from isocompute.contract.status import DONE
from studies.config import RunConfig, StudiesError
from studies.files import atomic_write_bytes
from studies.io import LeftOutRunsWarning
from studies.store import ResultStore
from studies.sweeps import build_sweep

Overrides = tuple[tuple[str, Any], ...]
DeclaredRuns = dict[str, list[tuple[str | None, RunConfig]]]
"""{study name: [(variant label or None, RunConfig), ...]}: the runs `run_studies` declared and ran. (A "plan"
in this project is the recommendation of `isocompute plan`, studies.fit.plan.make_plan.)"""

POW2 = tuple(2**k for k in range(1, 9))
"""n = 2 .. 256, the default n grid (the paper's 8 .. 2048 scaled to the simulator's budgets)."""

GRID_KEYS = ("n", "bp", "batch", "bmax", "budget")
"""Override keys that change a study's grid rather than the RunConfig."""


@dataclass(frozen=True)
class StudySpec:
    """One declared study. Variants run the same grid with RunConfig overrides and add a `variant` column."""

    name: str
    """Key of the study's tables."""
    kind: str = "n-vs-m"
    """Sweep kind of studies.sweeps: n-vs-m, fixed-batch, joint or allocators."""
    preset: str = "interference"
    """Policy role, looked up in the presets of the backend (studies.presets)."""
    dataset: str = "easy"
    n: tuple[int, ...] = POW2
    bp: tuple[int, ...] = (32,)
    batch: tuple[int, ...] = ()
    """fixed-batch only: values of bp * n."""
    bmax: int | None = None
    """joint only: the largest bp * n."""
    budget: int = 2**18
    """Compute cap in rollouts of every run."""
    seeds: int = 2
    seed0: int = 0
    """First seed: the runs use seeds seed0 .. seed0 + seeds - 1 (problem_seed likewise unless `base` fixes
    it), so a study can be repeated on a disjoint seed set (tuning seeds, a replication)."""
    base: Overrides = ()
    """Overrides shared by every run (e.g. (("kl_coef", 0.05),)): RunConfig fields or backend options."""
    variants: tuple[tuple[str, Overrides], ...] = ()
    """(label, overrides) pairs; each label becomes a value of the `variant` column."""
    allocators: tuple[str, ...] = ()
    """allocators only: the allocator specs run beside the fixed-n grid `n`, at group size `base_n`."""
    base_n: int | None = None

    def scaled(self, seeds: int | None = None, budget_factor: float = 1.0) -> StudySpec:
        """A resized copy (the `--size` of `isocompute figs`): more seeds or a larger budget."""
        return replace(self, seeds=seeds or self.seeds, budget=int(self.budget * budget_factor))


_FIELDS = frozenset(f.name for f in fields(RunConfig)) - {"options"}


def _split(over: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Overrides -> (RunConfig fields, backend options): a key that is not a RunConfig field is an option;
    an explicit "options" entry (tuple of pairs or dict) adds options."""
    flds: dict[str, Any] = {}
    opts: dict[str, Any] = {}
    for k, v in over.items():
        if k == "options":
            opts.update(dict(v))
        elif k in _FIELDS:
            flds[k] = v
        else:
            opts[k] = v
    return flds, opts


def study_configs(st: StudySpec, presets: Mapping[str, Mapping[str, Any]], backend: str = "sim"
                  ) -> list[tuple[str | None, RunConfig]]:
    """(variant label or None, RunConfig) for every run of one study spec, via studies.sweeps.build_sweep.

    Precedence: preset < the spec's `base` < the variant's overrides."""
    out: list[tuple[str | None, RunConfig]] = []
    for label, overrides in st.variants or ((None, ()),):
        ov = dict(st.base) | dict(overrides)
        role = ov.pop("preset", st.preset)
        if role not in presets:
            raise StudiesError(f"no {backend} preset for policy role {role!r} (have: {', '.join(presets)})")
        grid = {k: ov.pop(k) for k in GRID_KEYS if k in ov}
        ov.pop("options", None)
        pf, po = _split(presets[role])
        of, oo = _split(ov)
        opts = po | dict(dict(st.base).get("options", ())) | dict(dict(overrides).get("options", ())) | oo
        n = grid.get("n", st.n)
        n = [n] if isinstance(n, int) else list(n)
        bp = grid.get("bp", st.bp)
        bp = [bp] if isinstance(bp, int) else list(bp)
        batch = list(grid.get("batch", st.batch))
        # the base config is validated on its own: give it a first point of the grid (a small budget may not
        # pay for one step of the RunConfig defaults n = 8, bp = 32)
        first = {"n": n[0], "bp": max(1, batch[0] // n[0]) if st.kind == "fixed-batch" and batch else bp[0]}
        fixed = {"backend": backend, "dataset": st.dataset, "budget": grid.get("budget", st.budget)} | first
        base = RunConfig(**(fixed | pf | of | {"options": tuple(sorted(opts.items()))}))
        cfgs = build_sweep(
            st.kind,
            base,
            n=n,
            bp=bp if st.kind != "fixed-batch" else None,
            batch=batch or None,
            bmax=grid.get("bmax", st.bmax),
            seeds=st.seeds,
            budget=base.budget,
            allocators=list(st.allocators) or None,
            base_n=st.base_n,
        )
        if st.seed0:
            cfgs = [c.replace(seed=c.seed + st.seed0,
                              problem_seed=c.seed + st.seed0 if base.problem_seed is None else c.problem_seed)
                    for c in cfgs]
        out.extend((label, c) for c in cfgs)
    return out


def import_runs(configs: Iterable[RunConfig], results: Path, reuse: Iterable[Path]) -> int:
    """Copy finished ("done") runs of `configs` found in other results directories (e.g. `isocompute demo`'s)
    into `results`, so they are not recomputed. Tables first, status record last (the store's rule: a
    record's presence means the run is complete); the manifest is rebuilt from records on open."""
    dst = ResultStore(results)
    sources = [ResultStore(r) for r in reuse]
    copied = 0
    for cfg in configs:
        rid = cfg.run_id
        if dst.is_finished(rid):
            continue
        for src in sources:
            rec = src.record(rid)
            if rec is None or rec.get("status") != DONE:
                continue
            dst.runs_dir.mkdir(parents=True, exist_ok=True)
            for path in ("table_path", "pass1_path", "record_path"):
                s = getattr(src, path)(rid)
                if s.exists():
                    atomic_write_bytes(getattr(dst, path)(rid), s.read_bytes())
            copied += 1
            break
    return copied


def run_studies(
    studies: Mapping[str, StudySpec],
    results: Path,
    presets: Mapping[str, Mapping[str, Any]],
    backend: str = "sim",
    jobs: int | None = None,
    progress: bool = True,
    reuse: Iterable[Path] = (),
    study: str = "declared",
    desc: str = "runs",
) -> DeclaredRuns:
    """Run every missing run of the studies into one results directory; returns each study's runs.
    Failed runs are left out of the tables with a LeftOutRunsWarning naming them."""
    from studies.executors import run_sweep

    runs = {name: study_configs(st, presets, backend) for name, st in studies.items()}
    configs = [c for study_runs in runs.values() for _, c in study_runs]
    if reuse:
        import_runs(configs, results, reuse)
    with ResultStore(results, study=study) as store:
        summary = run_sweep(configs, store, jobs=jobs, progress=progress, desc=desc)
    if summary.failed:
        rid, why = next(iter(summary.failed.items()))
        warnings.warn(f"{len(summary.failed)} run(s) failed and are left out, e.g. {rid}: {why}",
                      LeftOutRunsWarning, stacklevel=2)
    return runs


class Tables(Mapping):
    """Lazy {study: learning-curve table, study + '.pass1': snapshots}, read through the ResultStore on first
    use, so consumers that do not need pass@1 snapshots never load them. Diverged or unfinished runs are
    left out with a `warning` (LeftOutRunsWarning by default) that names them (docs/DESIGN.md: divergence is
    data,
    shown, not silently dropped). `configs(study)` gives the runs; `extras(study, name)` measurements
    recorded beside the tables (ResultStore.write_extra)."""

    def __init__(self, results: Path, runs: DeclaredRuns, warning: type[Warning] = LeftOutRunsWarning):
        self.store = ResultStore(results)
        self.runs = runs
        self.warning = warning
        self._cache: dict[str, pd.DataFrame] = {}

    def __iter__(self) -> Iterator[str]:
        for name in self.runs:
            yield name
            yield name + ".pass1"

    def __len__(self) -> int:
        return 2 * len(self.runs)

    def configs(self, name: str) -> list[tuple[str | None, RunConfig]]:
        if name not in self.runs:
            raise KeyError(name)
        return self.runs[name]

    def done(self, name: str) -> list[tuple[str | None, RunConfig]]:
        """The runs of a study that finished without diverging."""
        out = []
        for label, cfg in self.configs(name):
            rec = self.store.record(cfg.run_id)
            if rec is not None and rec["status"] == DONE:
                out.append((label, cfg))
        return out

    def extras(self, name: str, kind: str) -> dict[str, Any]:
        """{run_id: measurement} of the study's runs that have one recorded under `kind`."""
        out = {}
        for _, cfg in self.configs(name):
            v = self.store.read_extra(cfg.run_id, kind)
            if v is not None:
                out[cfg.run_id] = v
        return out

    def __getitem__(self, key: str) -> pd.DataFrame:
        if key in self._cache:
            return self._cache[key]
        pass1 = key.endswith(".pass1")
        name = key[: -len(".pass1")] if pass1 else key
        if name not in self.runs:
            raise KeyError(key)
        done = {c.run_id for _, c in self.done(name)}
        frames, left_out = [], []
        for label, cfg in self.runs[name]:
            if cfg.run_id not in done:
                rec = self.store.record(cfg.run_id)
                left_out.append(f"{cfg.run_id} ({rec['status'] if rec else 'missing'})")
                continue
            df = self.store.read_run(cfg.run_id, "pass1" if pass1 else "table")
            if label is not None:
                df["variant"] = label
            frames.append(df)
        if left_out and not pass1:
            shown = ", ".join(left_out[:6]) + (" ..." if len(left_out) > 6 else "")
            warnings.warn(f"study {name}: left out {len(left_out)} run(s): {shown}", self.warning,
                          stacklevel=2)
        if not frames:
            raise StudiesError(f"study {name} has no finished runs in {self.store.root}")
        out = pd.concat(frames, ignore_index=True)
        self._cache[key] = out
        return out
