"""Run or reuse the studies figures need, load their tables, draw and save figures, write the gallery.

All studies share one results directory (a `studies.store.ResultStore`): run ids are deterministic hashes of
the config, so a run needed by several figures is computed once, and a finished run is never recomputed
(`isocompute figs` twice costs only the drawing). Runs go through `studies.executors.run_sweep`.
"""

from __future__ import annotations

import json
import math
import os
import re
import time
import warnings
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from paper_figs.specs import LLM_PRESETS, PRESETS, FigureSpec, StudySpec
from studies.config import RunConfig, StudiesError
from studies.sweeps import build_sweep

GRID_KEYS = ("n", "bp", "batch", "bmax", "budget")
"""Override keys that change a study's grid rather than the RunConfig."""

SIZES: dict[str, dict[str, Any]] = {
    "quick": {},
    "full": {"seeds": 8, "budget_factor": 4.0},
}
"""`--size`: quick is the catalog as declared (make figs <= 20 min on 2 cores); full is 8 seeds, 4x budget."""


class FigureDataWarning(UserWarning):
    """Runs left out of a figure (diverged or failed); the message names them."""


def _merge_options(*parts: Iterable[tuple[str, Any]]) -> tuple[tuple[str, Any], ...]:
    out: dict[str, Any] = {}
    for p in parts:
        out.update(dict(p))
    return tuple(sorted(out.items()))


def study_configs(st: StudySpec, backend: str = "sim") -> list[tuple[str | None, RunConfig]]:
    """(variant label or None, RunConfig) for every run of one study spec, via studies.sweeps.build_sweep."""
    presets = PRESETS if backend == "sim" else LLM_PRESETS
    out: list[tuple[str | None, RunConfig]] = []
    for label, overrides in st.variants or ((None, ()),):
        ov = dict(st.base) | dict(overrides)
        role = ov.pop("preset", st.preset)
        if role not in presets:
            where = "PRESETS" if backend == "sim" else "LLM_PRESETS"
            raise StudiesError(f"no {backend} preset for policy role {role!r} (paper_figs/specs.py {where})")
        preset = dict(presets[role])
        grid = {k: ov.pop(k) for k in GRID_KEYS if k in ov}
        options = _merge_options(
            preset.pop("options", ()), dict(st.base).get("options", ()), dict(overrides).get("options", ())
        )
        ov.pop("options", None)
        fields = {"backend": backend, "dataset": st.dataset, "budget": grid.get("budget", st.budget)}
        fields |= preset | ov | {"options": options}
        base = RunConfig(**fields)
        n = grid.get("n", st.n)
        n = [n] if isinstance(n, int) else list(n)
        bp = grid.get("bp", st.bp)
        bp = [bp] if isinstance(bp, int) else list(bp)
        cfgs = build_sweep(
            st.kind,
            base,
            n=n,
            bp=bp if st.kind != "fixed-batch" else None,
            batch=list(grid.get("batch", st.batch)) or None,
            bmax=grid.get("bmax", st.bmax),
            seeds=st.seeds,
            budget=base.budget,
        )
        out.extend((label, c) for c in cfgs)
    return out


def sized(st: StudySpec, size: str) -> StudySpec:
    if size not in SIZES:
        raise StudiesError(f"unknown size {size!r}; choose one of {', '.join(SIZES)}")
    return st.scaled(**SIZES[size]) if SIZES[size] else st


def needed_studies(specs: Iterable[FigureSpec], size: str = "quick") -> dict[str, StudySpec]:
    """Unique studies of the given figures (by name); two figures naming one study must declare it equally."""
    out: dict[str, StudySpec] = {}
    for spec in specs:
        for st in spec.studies:
            st = sized(st, size)
            if st.name in out and out[st.name] != st:
                raise RuntimeError(f"study {st.name!r} is declared differently by two figures")
            out[st.name] = st
    return out


def import_runs(configs: Iterable[RunConfig], results: Path, reuse: Iterable[Path]) -> int:
    """Copy finished runs of `configs` found in other results directories (e.g. `isocompute demo`'s) into
    `results`, so they are not recomputed. Files are copied table first, status record last (the store's
    rule: a record's presence means the run is complete); the manifest is rebuilt from records on open."""
    import shutil

    runs = Path(results) / "runs"
    copied = 0
    for cfg in configs:
        if (runs / f"{cfg.run_id}.json").exists():
            continue
        for src_root in reuse:
            src = Path(src_root) / "runs"
            rec = src / f"{cfg.run_id}.json"
            if not rec.exists():
                continue
            try:
                status = json.loads(rec.read_text()).get("status")
            except json.JSONDecodeError:
                continue
            if status != "done":
                continue
            runs.mkdir(parents=True, exist_ok=True)
            for suffix in (".parquet", ".pass1.parquet", ".json"):
                if (src / f"{cfg.run_id}{suffix}").exists():
                    tmp = runs / f"{cfg.run_id}{suffix}.tmp"
                    shutil.copyfile(src / f"{cfg.run_id}{suffix}", tmp)
                    os.replace(tmp, runs / f"{cfg.run_id}{suffix}")
            copied += 1
            break
    return copied


def run_studies(
    studies: Mapping[str, StudySpec],
    results: Path,
    backend: str = "sim",
    jobs: int | None = None,
    progress: bool = True,
    reuse: Iterable[Path] = (),
) -> dict[str, list[tuple[str | None, RunConfig]]]:
    """Run every missing run of the studies into one results directory; returns each study's runs."""
    from studies.executors import run_sweep
    from studies.store import ResultStore

    plan = {name: study_configs(st, backend) for name, st in studies.items()}
    configs = [c for runs in plan.values() for _, c in runs]
    if reuse:
        import_runs(configs, results, reuse)
    with ResultStore(results, study="paper_figs") as store:
        summary = run_sweep(configs, store, jobs=jobs, progress=progress, desc="figure runs")
    if summary.failed:
        names = ", ".join(list(summary.failed)[:5])
        warnings.warn(
            f"{len(summary.failed)} run(s) failed and are left out: {names}", FigureDataWarning, stacklevel=2
        )
    return plan


class Tables(Mapping):
    """Lazy {study: learning-curve table, study + '.pass1': snapshots}: Parquet files are read on first use,
    so figures that do not need pass@1 snapshots never load them. Diverged or unfinished runs are left out
    with a FigureDataWarning that names them (DESIGN.md: divergence is data, shown, not silently dropped)."""

    def __init__(self, results: Path, plan: dict[str, list[tuple[str | None, RunConfig]]]):
        self.results = Path(results)
        self.plan = plan
        self._cache: dict[str, pd.DataFrame] = {}

    def __iter__(self):
        for name in self.plan:
            yield name
            yield name + ".pass1"

    def __len__(self) -> int:
        return 2 * len(self.plan)

    def _status(self, run_id: str) -> str | None:
        p = self.results / "runs" / f"{run_id}.json"
        if not p.exists():
            return None
        try:
            return json.loads(p.read_text()).get("status")
        except json.JSONDecodeError:
            return None

    def __getitem__(self, key: str) -> pd.DataFrame:
        if key in self._cache:
            return self._cache[key]
        pass1 = key.endswith(".pass1")
        name = key[: -len(".pass1")] if pass1 else key
        if name not in self.plan:
            raise KeyError(key)
        frames, left_out = [], []
        for label, cfg in self.plan[name]:
            status = self._status(cfg.run_id)
            if status != "done":
                left_out.append(f"{cfg.run_id} ({status or 'missing'})")
                continue
            suffix = ".pass1.parquet" if pass1 else ".parquet"
            df = pd.read_parquet(self.results / "runs" / f"{cfg.run_id}{suffix}")
            if label is not None:
                df["variant"] = label
            frames.append(df)
        if left_out and not pass1:
            shown = ", ".join(left_out[:6]) + (" ..." if len(left_out) > 6 else "")
            warnings.warn(
                f"study {name}: left out {len(left_out)} run(s): {shown}", FigureDataWarning, stacklevel=2
            )
        if not frames:
            raise StudiesError(f"study {name} has no finished runs in {self.results}")
        out = pd.concat(frames, ignore_index=True)
        self._cache[key] = out
        return out


def save(fig, out_dir: Path, fid: str, formats: Iterable[str] = ("png", "pdf")) -> list[Path]:
    """Write one figure. PNGs are quantised to a 256-colour palette (line plots lose nothing visible, files
    shrink ~3x, so the committed gallery stays far below 300 KB each); metadata carries no dates, so
    rebuilding from the same runs gives the same files."""
    import io

    from PIL import Image

    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for fmt in formats:
        p = out_dir / f"{fid}.{fmt}"
        tmp = p.with_name(p.name + ".tmp")
        kw = {"bbox_inches": "tight", "pad_inches": 0.08}
        if fmt == "png":
            buf = io.BytesIO()
            fig.savefig(buf, format="png", metadata={"Software": None}, **kw)
            img = Image.open(io.BytesIO(buf.getvalue())).convert("RGB")
            img.quantize(256, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE).save(
                tmp, format="png", optimize=True
            )
        else:
            meta = {"Creator": None, "Producer": None, "CreationDate": None}
            fig.savefig(tmp, format=fmt, metadata=meta, **kw)
        os.replace(tmp, p)
        paths.append(p)
    return paths


def _clean(obj: Any) -> Any:
    """Summaries as stable JSON-able values (rounded floats, so rebuilding twice gives the same text)."""
    if isinstance(obj, dict):
        return {str(k): _clean(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_clean(v) for v in obj]
    if isinstance(obj, float):
        return float(f"{obj:.6g}") if math.isfinite(obj) else float("nan")
    if hasattr(obj, "item"):
        return _clean(obj.item())
    return obj


def gallery(entries: list[dict], path: Path, img_dir: Path) -> str:
    """paper_figs/README.md: each figure, one line on the paper's finding, one line on ours (from data)."""
    rel = os.path.relpath(img_dir, path.parent)
    lines = [
        "# Gallery: the paper's figures regenerated by the simulator",
        "",
        "Generated by `isocompute figs --gallery paper_figs/README.md` (`make figs`); do not edit by hand.",
        'Every number on an "Ours" line is computed from the runs by the figure\'s `summary` (paper_figs/),',
        "never typed. Runs: the simulator presets of `paper_figs/specs.py` at the quick sizing; the studies",
        "each figure needs are declared in its module. One figure: `isocompute figs --only ID` (ids:",
        "`isocompute figs --list`); a new figure = a module with a `SPEC`, named in paper_figs/registry.py.",
        "Conventions: colour = n on one log2 scale in every figure; dashed black = frontier (max over n) of",
        "the per-n sigmoid fits (studies.frontier); hollow n* points = no n has improved yet (ties).",
        "",
    ]
    for e in entries:
        lines += [
            f"## {e['heading']}",
            "",
            f"![{e['id']}]({rel}/{e['id']}.png)",
            "",
            f"- **Paper:** {e['paper_finding']}",
            f"- **Ours:** {e['ours']}",
            "",
        ]
    text = "\n".join(lines)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return text


def heading(spec: FigureSpec) -> str:
    return f"{spec.title} (paper Fig. {spec.paper})" if spec.paper else f"{spec.title} (ours)"


def build(
    specs: list[FigureSpec],
    out: Path,
    results: Path,
    backend: str = "sim",
    jobs: int | None = None,
    size: str = "quick",
    gallery_path: Path | None = None,
    progress: bool = True,
    log=print,
    reuse: Iterable[Path] = (),
) -> dict[str, dict]:
    """Run/reuse studies, draw every figure, save PNG + PDF to `out`, optionally write the gallery."""
    import matplotlib.pyplot as plt

    for spec in specs:
        if backend not in spec.backends:
            raise StudiesError(
                f"figure {spec.id} needs the {' or '.join(spec.backends)} backend, not {backend}"
            )
    studies = needed_studies(specs, size)
    t0 = time.perf_counter()
    plan = run_studies(studies, results, backend, jobs, progress, reuse)
    log(
        f"studies ready in {time.perf_counter() - t0:.1f} s ({sum(len(v) for v in plan.values())} runs, "
        f"results in {results})"
    )
    tables = Tables(results, plan)
    done: dict[str, dict] = {}
    entries = []
    for spec in specs:
        t1 = time.perf_counter()
        fig = spec.make(tables)
        save(fig, out, spec.id)
        plt.close(fig)
        summ = _clean(spec.summary(tables))
        done[spec.id] = summ
        entries.append(
            {
                "id": spec.id,
                "heading": heading(spec),
                "paper_finding": spec.paper_finding,
                "ours": spec.ours(summ),
            }
        )
        log(f"{spec.id}: {out / spec.id}.png/.pdf ({time.perf_counter() - t1:.1f} s)")
        if spec.text is not None:
            log(spec.text(tables))
    if gallery_path is not None:
        gallery(entries, gallery_path, out)
        log(f"gallery: {gallery_path}")
    return done


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-").lower()
