"""Figure layer: every registered figure draws from small synthetic tables, with the shared
style."""

from __future__ import annotations

import io
import math

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pf_synth
import pytest
from matplotlib.figure import Figure

from paper_figs import build, style
from paper_figs.catalog import FIXED_EASY, JOINT_EASY
from paper_figs.registry import figures
from paper_figs.specs import StudySpec
from studies import declared

REG = figures()


def runs_of(st: StudySpec, backend: str = "sim", lm: str | None = None):
    """(variant label, RunConfig) of every run of one figure's study: studies.declared.study_configs with the
    figures' presets for the backend."""
    return declared.study_configs(st, build.presets_for(backend, lm), backend)


@pytest.fixture(scope="module")
def synth_tables():
    cache = {}

    def get(fid):
        if fid not in cache:
            cache[fid] = pf_synth.tables_for(REG[fid])
        return cache[fid]

    return get


def _png_bytes(fig: Figure) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


@pytest.mark.parametrize("fid", list(REG))
def test_figure_draws_with_shared_style(fid, synth_tables):
    spec = REG[fid]
    fig = spec.make(synth_tables(fid))
    assert isinstance(fig, Figure)
    png = _png_bytes(fig)
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 20_000  # a drawn figure, not an empty canvas
    title = fig._suptitle.get_text()
    assert (f"Paper Fig. {spec.paper} (simulator)" in title) if spec.paper else ("Tabular" in title)
    axes = [ax for ax in fig.axes if ax.get_label() != "<colorbar>"]
    compute_axes = [ax for ax in axes if ax.get_xlabel().startswith(("compute", "steps"))]
    for ax in compute_axes:  # compute is always on a log axis with its unit
        assert ax.get_xscale() == "log"
        assert "rollouts" in ax.get_xlabel() or "tokens" in ax.get_xlabel() or "steps" in ax.get_xlabel()
    if fid not in ("fig02", "fig08", "fig10", "fig11"):
        assert compute_axes, f"{fid} has no compute axis"
    for ax in axes:  # legends live outside the axes (figure legends), never on top of data curves
        leg = ax.get_legend()
        assert leg is None, f"{fid}: an axes legend may cover data"


@pytest.mark.parametrize("fid", list(REG))
def test_summary_numbers_are_deterministic_text(fid, synth_tables):
    spec = REG[fid]
    s1 = build.plain_summary(spec.summary(synth_tables(fid)))
    s2 = build.plain_summary(spec.summary(synth_tables(fid)))
    line = spec.ours(s1)
    assert line == spec.ours(s2)
    assert isinstance(line, str) and any(ch.isdigit() for ch in line) and line.endswith(".")
    assert spec.paper_finding and spec.title


def test_n_colour_scale_is_shared_and_sequential():
    assert style.n_color(32) == style.n_color(32.0)
    # darker (lower luminance) as n grows: a sequential scale indexed by log2 n
    lum = [np.dot(style.n_color(n)[:3], [0.2126, 0.7152, 0.0722]) for n in (2, 8, 32, 128, 512)]
    assert all(a > b for a, b in zip(lum, lum[1:], strict=False))
    assert style.n_color(4096) == style.n_color(512)  # clipped at the top of the range
    assert style.n_label(32) == "$2^{5}$ = 32"
    assert style.n_label(3) == "3"


def test_log2_axis_ticks_are_powers_of_two():
    fig, ax = plt.subplots()
    ax.plot([2, 256], [2, 256])
    style.log2_axis(ax, "y", [2, 256])
    ticks = ax.get_yticks()
    assert all(math.log2(t).is_integer() for t in ticks)
    assert ax.yaxis.get_major_formatter()(32, 0) == "$2^{5}$"


def test_study_configs_expand_grids_presets_and_variants():
    joint = runs_of(JOINT_EASY)
    # bp in {8, 32, 128}, n = 2..256 with bp * n <= 8192 -> 8 + 8 + 6 pairs, 2 seeds
    assert len(joint) == 22 * JOINT_EASY.seeds
    assert {c.model for _, c in joint} == {"interference"}
    assert max(c.bp * c.n for _, c in joint) <= 8192
    fixed = runs_of(FIXED_EASY)
    assert {c.bp * c.n for _, c in fixed} == set(FIXED_EASY.batch)
    base = REG["fig26"].studies[0]
    runs = {(label, c.n, c.n_est) for label, c in runs_of(base)}
    assert ("16/64 (decoupled)", 16, 64) in runs and ("64/64", 64, 0) in runs
    models = {label: c for label, c in runs_of(REG["fig12"].studies[0])}
    assert models["linear"].model == "linear"
    assert dict(models["interference, share 0.5"].options) == {"share": 0.5}


def test_conflicting_study_declarations_are_refused():
    a = FigureSpecLike((StudySpec("x", budget=1024),))
    b = FigureSpecLike((StudySpec("x", budget=2048),))
    with pytest.raises(RuntimeError, match="declared differently"):
        build.needed_studies([a, b])


class FigureSpecLike:
    def __init__(self, studies):
        self.studies = studies


def test_every_figure_declares_its_studies_consistently():
    studies = build.needed_studies(REG.values())
    assert "joint-easy" in studies and "headline-tabular" in studies
    for st in studies.values():  # every declared study expands into valid RunConfigs
        assert runs_of(st)


def test_gallery_is_generated_and_stable(tmp_path):
    entries = [{"id": "fig06", "heading": "h", "paper_finding": "p", "ours": "o 1.0."}]
    a = build.gallery(entries, tmp_path / "README.md", tmp_path / "img")
    b = build.gallery(entries, tmp_path / "README.md", tmp_path / "img")
    assert a == b and "![fig06](img/fig06.png)" in a and "**Ours:** o 1.0." in a


def test_tables_leave_out_unfinished_runs_with_a_named_warning(tmp_path):
    from studies.config import RunConfig

    cfg = RunConfig(n=4, bp=8, budget=64)
    (tmp_path / "runs").mkdir()
    pd.DataFrame({"run_id": [cfg.run_id], "compute": [0], "val_mean": [0.4]}).to_parquet(
        tmp_path / "runs" / f"{cfg.run_id}.parquet"
    )
    tables = build.Tables(tmp_path, {"s": [(None, cfg)]})
    with (
        pytest.warns(build.FigureDataWarning, match=cfg.run_id),
        pytest.raises(Exception, match="no finished"),
    ):
        tables["s"]


def test_every_study_config_is_accepted_by_the_sim_backend():
    """What `isocompute figs --only ID` would run, for every registered id, passes the sim's validation."""
    from studies.backends import get_backend

    sim = get_backend("sim")
    for spec in REG.values():
        for st in build.needed_studies([spec]).values():
            for _, cfg in runs_of(st):
                sim.validate(cfg)


def test_import_runs_copies_only_finished_runs(tmp_path):
    from studies.config import RunConfig
    from studies.declared import import_runs

    src, dst = tmp_path / "src", tmp_path / "dst"
    (src / "runs").mkdir(parents=True)
    done, div = RunConfig(n=4, bp=8, budget=64, seed=0), RunConfig(n=4, bp=8, budget=64, seed=1)
    for cfg, status in ((done, "done"), (div, "diverged")):
        # readable Parquet files: a record whose files are damaged is not a finished run
        for suffix in (".parquet", ".pass1.parquet"):
            pd.DataFrame({"run_id": [cfg.run_id]}).to_parquet(src / "runs" / f"{cfg.run_id}{suffix}")
        rec = f'{{"run_id": "{cfg.run_id}", "status": "{status}"}}'
        (src / "runs" / f"{cfg.run_id}.json").write_text(rec)
    assert import_runs([done, div], dst, [src]) == 1
    assert (dst / "runs" / f"{done.run_id}.json").exists() and (
        dst / "runs" / f"{done.run_id}.parquet"
    ).exists()
    assert not (dst / "runs" / f"{div.run_id}.json").exists()
    assert import_runs([done], dst, [src]) == 0  # already present: nothing copied twice


@pytest.mark.slow
def test_cli_builds_a_figure_end_to_end_and_never_reruns(tmp_path, monkeypatch):
    """Real simulator runs (fig02 needs 6 one-step runs), PNG + PDF + gallery; a second build reuses every run
    file untouched and writes the same gallery text."""
    from click.testing import CliRunner

    from paper_figs import registry
    from paper_figs.cli import figs

    res, out, gal = tmp_path / "runs", tmp_path / "img", tmp_path / "README.md"
    monkeypatch.setattr(registry, "MODULES", ("fig02",))  # the gallery needs every registered figure
    args = ["--results", str(res), "--out", str(out), "--gallery", str(gal), "--quiet", "--jobs", "1"]
    r1 = CliRunner().invoke(figs, args)
    assert r1.exit_code == 0, r1.output
    png, pdf = out / "fig02.png", out / "fig02.pdf"
    assert png.stat().st_size > 10_000 and pdf.stat().st_size > 5_000 and png.stat().st_size < 300_000
    text1 = gal.read_text()
    assert "(paper Fig. 2)" in text1 and "median initial pass@1" in text1
    stamps = {p.name: p.stat().st_mtime_ns for p in (res / "runs").iterdir()}
    assert len([n for n in stamps if n.endswith(".json")]) == 6
    r2 = CliRunner().invoke(figs, args)
    assert r2.exit_code == 0, r2.output
    assert {p.name: p.stat().st_mtime_ns for p in (res / "runs").iterdir()} == stamps
    assert gal.read_text() == text1


def test_cli_unknown_figure_is_one_line_and_exit_2():
    import subprocess
    import sys
    from pathlib import Path

    exe = Path(sys.executable).with_name("isocompute")
    p = subprocess.run([str(exe), "figs", "--only", "fig99"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 2
    assert p.stderr.strip().count("\n") == 0 and "fig99" in p.stderr and "Traceback" not in p.stderr


def test_nstar_panel_draws_ties_as_areas_and_the_reports_own_fit():
    """Figures read n* from the fit report (studies.fit.nstar): a tie is a shaded area with no point of the
    trend in it (points: determined, or hollow where one n alone has data), and the n* sigmoid is the
    report's own."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.collections import PathCollection
    from synthetic_curves import synthetic_table

    from paper_figs import analysis as an
    from paper_figs import plots

    specs = {4: (0.25, 0.52, 1e4, 1.5), 8: (0.25, 0.60, 3e4, 1.3), 16: (0.25, 0.66, 1e5, 1.1)}
    rep = an.fit_report(synthetic_table(specs, seeds=3, points=30, noise=0.01, rng=np.random.default_rng(0)))
    fr = an.frontier_frame(rep)
    assert (an.undetermined(fr) == ~fr["determined"]).all() and fr["tie"].any() and fr["determined"].any()
    assert an.nstar_fit(rep).params_ == rep["n_star_fit"]["params"]
    fig, ax = plt.subplots()
    plots.nstar_panel(ax, rep)
    drawn = np.concatenate([c.get_offsets() for c in ax.collections if isinstance(c, PathCollection)])
    assert set(drawn[:, 0]) == set(fr.loc[~fr["tie"], "compute"])  # determined, or the only n with data
    assert not set(drawn[:, 0]) & set(fr.loc[fr["tie"], "compute"])
    plt.close(fig)


def test_llm_backend_builds_the_figures_that_apply_and_refuses_the_rest(tmp_path, monkeypatch):
    """`figs --backend llm`: fig24 (tokens) runs at the CPU-sized LLM grid (here through the fake llm adapter
    of tests/science/test_claims_llm.py), fig06 (a bp = 32 slice of a joint grid) is refused in one line."""
    import importlib.util
    from pathlib import Path

    from studies import backends

    path = Path(__file__).parents[1] / "science" / "test_claims_llm.py"
    spec = importlib.util.spec_from_file_location("claims_llm_fake", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    monkeypatch.setitem(backends.BACKENDS, "llm", mod.FakeLLM())
    logs = []
    done = build.build([REG["fig24"], REG["fig06"]], tmp_path / "img", tmp_path / "runs", backend="llm",
                       jobs=1, progress=False, log=logs.append)
    assert list(done) == ["fig24"] and (tmp_path / "img" / "fig24.png").exists()
    assert any(line.startswith("fig06: refused: ") and "sim backend" in line for line in logs)
    cfgs = runs_of(build.sized(REG["fig24"].studies[0], "quick", "llm"), "llm")
    assert sorted(c.n for _, c in cfgs) == [2, 4, 8] and {c.bp for _, c in cfgs} == {4}
    assert all(c.option("engine") == "vllm" and c.option("response_len") is None for _, c in cfgs)


def test_cli_llm_backend_refuses_a_sim_only_figure_in_one_line(tmp_path):
    from click.testing import CliRunner

    from paper_figs.cli import figs

    r = CliRunner().invoke(figs, ["--only", "fig06", "--backend", "llm", "--results", str(tmp_path)])
    assert r.exit_code == 2 and "sim backend" in r.output and not (tmp_path / "runs").exists()


def test_cli_lists_every_figure():
    from click.testing import CliRunner

    from paper_figs.cli import figs

    r = CliRunner().invoke(figs, ["--list"])
    assert r.exit_code == 0 and all(fid in r.output for fid in REG)


def test_cli_gallery_needs_every_figure(tmp_path):
    from click.testing import CliRunner

    from paper_figs.cli import figs

    r = CliRunner().invoke(
        figs, ["--only", "fig02", "--gallery", str(tmp_path / "g.md"), "--results", str(tmp_path)]
    )
    assert r.exit_code == 2 and "drop --only" in r.output and not (tmp_path / "g.md").exists()


@pytest.mark.slow  # spawns a pool
def test_figures_drawn_in_a_pool_equal_the_serial_ones(tmp_path):
    """build(jobs=2) draws registry figures in spawned processes: the same PNG bytes, summaries and gallery
    entries, in the same order, as jobs=1 on the same stored runs (fig02 + fig05: 72 small runs)."""
    res = tmp_path / "runs"
    specs = [REG["fig02"], REG["fig05"]]
    logs1, logs2 = [], []
    d1 = build.build(specs, tmp_path / "a", res, jobs=1, progress=False, log=logs1.append)
    d2 = build.build(specs, tmp_path / "b", res, jobs=2, progress=False, log=logs2.append)
    assert list(d1) == list(d2) == ["fig02", "fig05"] and d1 == d2
    for fid in d1:
        assert (tmp_path / "a" / f"{fid}.png").read_bytes() == (tmp_path / "b" / f"{fid}.png").read_bytes()
    strip = [line.split(" (")[0] for line in logs2 if line.startswith("fig")]
    assert strip == [line.split(" (")[0].replace("/a/", "/b/") for line in logs1 if line.startswith("fig")]
