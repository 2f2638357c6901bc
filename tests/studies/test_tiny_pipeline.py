"""Everything accepts the tiny LM: each sweep kind, `sweep allocators`, fit / plot / plan /
predict, `figs --lm tiny` and the Ray executor run `--backend llm --lm tiny` through the one pipeline. Budgets
are tiny (a few GRPO steps of bp 4), so this checks the plumbing; the science runs are in docs/tiny_lm/."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from isocompute.cli import main

TINY = ["--backend", "llm", "--lm", "tiny", "--d-val", "16", "--n-evals", "2", "--option", "train_eval=false"]


def _ok(args):
    r = CliRunner().invoke(main, args, catch_exceptions=False)
    assert r.exit_code == 0, r.output
    return r


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    out = tmp_path_factory.mktemp("tiny") / "nvm"
    _ok(["sweep", "n-vs-m", "--n", "2,4", "--bp", "4", "--budget", "64", "--seeds", "1", "--jobs", "1",
         "--no-progress", "--out", str(out), *TINY])
    return out


def _tables(path):
    from studies.io import load_table

    return load_table(path)


def test_n_vs_m_then_fit_plot_plan(swept, tmp_path):
    t = _tables(swept)
    assert set(t["n"]) == {2, 4} and set(t["model"]) == {"tiny"} and set(t["backend"]) == {"llm"}
    r = _ok(["fit", str(swept), "--json"])
    fit = json.loads(r.stdout)
    assert isinstance(fit, dict)
    _ok(["plot", str(swept), "--out", str(tmp_path / "p.png")])
    assert (tmp_path / "p.png").stat().st_size > 0
    r = _ok(["plan", str(swept), "--budget", "256", "--json"])
    assert isinstance(json.loads(r.stdout), dict)


@pytest.mark.parametrize("kind,extra", [
    ("fixed-batch", ["--batch", "8", "--n", "2,4", "--budget", "64"]),
    ("joint", ["--bp", "2,4", "--n", "2,4", "--bmax", "8", "--budget", "64"]),
    ("allocators", ["--allocators", "knapsack", "--base-n", "2", "--n", "2", "--bp", "4", "--budget", "64"]),
])
def test_every_sweep_kind_runs_the_tiny_lm(kind, extra, tmp_path):
    out = tmp_path / kind
    _ok(["sweep", kind, *extra, "--seeds", "1", "--jobs", "1", "--no-progress", "--out", str(out), *TINY])
    t = _tables(out)
    assert len(t) and set(t["model"]) == {"tiny"}


def test_predict_runs_tiny_pilots(tmp_path):
    """predict runs its pilots on the tiny LM into --out; from one seed of 16 steps at two n, n* is nowhere
    determined (studies.fit.nstar), so neither rule may extrapolate: one line on stderr, exit 2."""
    args = ["predict", "--budget", "1024", "--n", "2,4", "--bp", "4", "--seeds", "1", "--pilot-fraction",
            "0.0625", "--out", str(tmp_path / "pilots"), "--jobs", "1", "--json", *TINY]
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 2
    errors = [ln for ln in r.output.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and "no rule can predict from these pilots" in errors[0]
    assert len(list((tmp_path / "pilots").rglob("*.parquet"))) >= 2  # both pilots ran and were stored


def test_figs_on_the_tiny_lm(monkeypatch, tmp_path):
    from paper_figs import build
    from studies import presets

    monkeypatch.setattr(build, "TINY_GRID", {"n": (2, 4), "bp": (4,), "budget": 64, "seeds": 1})
    quick = {"lm": "tiny", "d_val": 16, "n_evals": 2, "train_eval": False}
    monkeypatch.setitem(presets.PRESETS, "tiny", {"interference": quick})
    _ok(["figs", "--backend", "llm", "--lm", "tiny", "--only", "fig24", "--results", str(tmp_path / "r"),
         "--out", str(tmp_path / "img"), "--jobs", "1", "--quiet"])
    assert (tmp_path / "img" / "fig24.png").stat().st_size > 0
    r = CliRunner().invoke(main, ["figs", "--lm", "tiny", "--only", "fig24"])
    assert r.exit_code == 2 and "--lm takes --backend llm" in r.output


@pytest.mark.slow  # starts Ray
def test_the_ray_executor_runs_the_tiny_lm_as_the_local_one(swept, tmp_path):
    import pandas as pd

    out = tmp_path / "ray"
    _ok(["sweep", "n-vs-m", "--n", "2,4", "--bp", "4", "--budget", "64", "--seeds", "1", "--executor", "ray",
         "--no-progress", "--out", str(out), *TINY])
    cols = ["run_id", "n", "compute", "val_mean", "train_mean", "tokens"]  # same machine: the same numbers
    a, b = (_tables(p)[cols].sort_values(["run_id", "compute"]).reset_index(drop=True) for p in (out, swept))
    pd.testing.assert_frame_equal(a, b)
