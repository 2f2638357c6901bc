"""Run or reuse the studies figures need, load their tables, draw and save figures, write the gallery.

All studies share one results directory, through the one study pipeline of `studies.declared`
(StudySpec -> RunConfigs -> studies.executors.run_sweep -> studies.store.ResultStore -> lazy tables): run
ids are deterministic hashes of the config, so a run needed by several figures is computed once, and a
finished run is never recomputed (`isocompute figs` twice costs only the drawing).
"""

from __future__ import annotations

import os
import time
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from paper_figs.specs import LLM_GRID, TINY_GRID, FigureSpec, StudySpec
from studies import declared
from studies.config import StudiesError
from studies.files import atomic_write_text, jsonable
from studies.presets import presets_for

__all__ = ["FigureDataWarning", "Tables", "build", "run_studies"]

SIZES: dict[str, dict[str, Any]] = {
    "quick": {},
    "full": {"seeds": 8, "budget_factor": 4.0},
}
"""`--size`: quick is the catalog as declared (make figs <= 20 min on 2 cores); full is 8 seeds, 4x budget."""


class FigureDataWarning(UserWarning):
    """Runs left out of a figure (diverged or failed); the message names them."""


def sized(st: StudySpec, size: str, backend: str = "sim", lm: str | None = None) -> StudySpec:
    if size not in SIZES:
        raise StudiesError(f"unknown size {size!r}; choose one of {', '.join(SIZES)}")
    if backend == "llm":  # the CPU-sized grid; the simulator's own overrides (response_len...) do not apply
        return replace(st, **(TINY_GRID if lm == "tiny" else LLM_GRID), base=(), variants=())
    return st.scaled(**SIZES[size]) if SIZES[size] else st


def needed_studies(specs: Iterable[FigureSpec], size: str = "quick", backend: str = "sim",
                   lm: str | None = None) -> dict[str, StudySpec]:
    """Unique studies of the given figures (by name); two figures naming one study must declare it equally."""
    out: dict[str, StudySpec] = {}
    for spec in specs:
        for st in spec.studies:
            st = sized(st, size, backend, lm)
            if st.name in out and out[st.name] != st:
                raise RuntimeError(f"study {st.name!r} is declared differently by two figures")
            out[st.name] = st
    return out


def run_studies(
    studies: Mapping[str, StudySpec],
    results: Path,
    backend: str = "sim",
    jobs: int | None = None,
    progress: bool = True,
    reuse: Iterable[Path] = (),
    lm: str | None = None,
) -> declared.DeclaredRuns:
    """Run every missing run of the figures' studies into one results directory (studies.declared)."""
    return declared.run_studies(studies, results, presets_for(backend, lm), backend, jobs, progress, reuse,
                                study="paper_figs", desc="figure runs")


class Tables(declared.Tables):
    """studies.declared.Tables whose left-out runs are reported as FigureDataWarning."""

    def __init__(self, results: Path, runs: declared.DeclaredRuns):
        super().__init__(results, runs, warning=FigureDataWarning)


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


SUMMARY_DIGITS = 6
"""Significant digits of a figure's summary numbers, so that rebuilding twice gives the same gallery text."""


def plain_summary(summary: Any) -> Any:
    """A figure's summary as plain values (studies.files.jsonable), floats rounded to SUMMARY_DIGITS; NaN
    is kept (not strict), since the gallery's `ours` lines format it."""
    return jsonable(summary, strict=False, digits=SUMMARY_DIGITS)


def gallery(entries: list[dict], path: Path, img_dir: Path) -> str:
    """paper_figs/README.md: each figure, one line on the paper's finding, one line on ours (from data)."""
    rel = os.path.relpath(img_dir, path.parent)
    lines = [
        "# Gallery: the paper's figures regenerated by the simulator",
        "",
        "Generated by `isocompute figs --out docs/figs --gallery paper_figs/README.md` (`make figs-docs`); "
        "do not edit by hand.",
        'Every number on an "Ours" line is computed from the runs by the figure\'s `summary` (paper_figs/),',
        "never typed. Runs: the simulator presets of `studies/presets.py` at the quick sizing; the studies",
        "each figure needs are declared in its module. One figure: `isocompute figs --only ID` (ids:",
        "`isocompute figs --list`); a new figure = a module with a `SPEC`, named in paper_figs/registry.py.",
        "Conventions: colour = n on one log2 scale in every figure; dashed black = frontier (the best n's",
        "measured seed-mean record); n*(C) (studies/fit/nstar.py): filled points where it is determined,",
        "shaded areas where it is a tie (the set of n the seeds cannot tell apart), hollow where one n alone",
        "has data.",
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
    atomic_write_text(path, text)  # a killed build never leaves half a gallery
    return text


def heading(spec: FigureSpec) -> str:
    return f"{spec.title} (paper Fig. {spec.paper})" if spec.paper else f"{spec.title} (ours)"


def _draw(spec: FigureSpec, tables: Tables, out: Path) -> tuple[dict, dict, str | None, float, list]:
    """Draw and save one figure: (summary, gallery entry, text or None, seconds, warnings caught)."""
    import matplotlib.pyplot as plt

    t1 = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fig = spec.make(tables)
        save(fig, out, spec.id)
        plt.close(fig)
        summ = plain_summary(spec.summary(tables))
        text = spec.text(tables) if spec.text is not None else None
    entry = {"id": spec.id, "heading": heading(spec), "paper_finding": spec.paper_finding,
             "ours": spec.ours(summ)}
    return summ, entry, text, time.perf_counter() - t1, [_Caught(w.message, w.category) for w in caught]


@dataclass(frozen=True)
class _Caught:
    message: Warning | str
    category: type[Warning]


def _draw_registered(fid: str, results: Path, runs: declared.DeclaredRuns, out: Path):
    """Worker: the registry's figure `fid` drawn from its own lazy tables (a fresh process: spawn)."""
    from paper_figs.registry import figures

    return _draw(figures()[fid], Tables(results, runs), out)


def _draw_all(specs: list[FigureSpec], results: Path, runs: declared.DeclaredRuns, out: Path,
              jobs: int | None) -> list:
    """Every figure's _draw result in the order of `specs`. Drawing is serial matplotlib work (~85 s for the
    catalog on this machine), so with jobs > 1 the registry's figures are drawn in a pool of spawned
    processes (each reads the tables it needs; nothing is recomputed); any other spec, or jobs = 1, serially
    in this process."""
    from paper_figs.registry import figures

    reg = figures()
    workers = min(jobs or 1, len(specs))
    if workers <= 1 or any(reg.get(s.id) is not s for s in specs):
        tables = Tables(results, runs)
        return [_draw(s, tables, out) for s in specs]
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(workers, mp_context=mp.get_context("spawn")) as pool:
        futs = [pool.submit(_draw_registered, s.id, results, runs, out) for s in specs]
        return [f.result() for f in futs]


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
    lm: str | None = None,
) -> dict[str, dict]:
    """Run/reuse studies, draw every figure, save PNG + PDF to `out`, optionally write the gallery.
    `lm`: the llm backend's model ("tiny": the shipped tiny LM at TINY_GRID; None: SmolLM2 at LLM_GRID)."""
    refused = [s for s in specs if backend not in s.backends]
    for spec in refused:
        why = f"figure {spec.id} needs the {' or '.join(spec.backends)} backend, not {backend}"
        if len(refused) == len(specs):
            raise StudiesError(why)
        log(f"{spec.id}: refused: {why}")
    specs = [s for s in specs if backend in s.backends]
    studies = needed_studies(specs, size, backend, lm)
    t0 = time.perf_counter()
    runs = run_studies(studies, results, backend, jobs, progress, reuse, lm)
    log(
        f"studies ready in {time.perf_counter() - t0:.1f} s ({sum(len(v) for v in runs.values())} runs, "
        f"results in {results})"
    )
    done: dict[str, dict] = {}
    entries = []
    for spec, (summ, entry, text, seconds, caught) in zip(specs, _draw_all(specs, results, runs, out, jobs),
                                                           strict=True):
        for w in caught:  # a worker's warnings (left-out runs), re-issued here in figure order
            warnings.warn(w.message, w.category, stacklevel=2)
        done[spec.id] = summ
        entries.append(entry)
        log(f"{spec.id}: {out / spec.id}.png/.pdf ({seconds:.1f} s)")
        if text is not None:
            log(text)
    if gallery_path is not None:
        gallery(entries, gallery_path, out)
        log(f"gallery: {gallery_path}")
    return done
