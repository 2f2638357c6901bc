"""The allocators study through the one pipeline: sweep -> ResultStore -> fit --by allocator."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from isocompute.cli import main
from studies.config import RunConfig, StudiesError
from studies.sweeps import build_sweep


def test_build_sweep_allocators_grid():
    base = RunConfig(bp=16, budget=2**12)
    cfgs = build_sweep("allocators", base, n=[4, 8, 16], allocators=["knapsack", "fixed", "dynamic-sampling"],
                       seeds=2)
    assert len(cfgs) == 3 * 2 + 2 * 2
    fixed = [c for c in cfgs if c.allocator == "fixed"]
    assert sorted({c.n for c in fixed}) == [4, 8, 16]
    others = [c for c in cfgs if c.allocator != "fixed"]
    assert {c.n for c in others} == {8} and {c.allocator for c in others} == {"knapsack", "dynamic-sampling"}
    assert all(c.budget == 2**12 and c.bp == 16 for c in cfgs)
    with pytest.raises(StudiesError):
        build_sweep("allocators", base, n=[4, 8])
    with pytest.raises(StudiesError):
        build_sweep("n-vs-m", base, n=[4, 8], allocators=["knapsack"])


def test_fixed_run_id_unchanged_by_the_field():
    """RunConfig.run_id leaves a default allocator out of its hash: ids of older results stay valid."""
    c = RunConfig()
    assert c.run_id == RunConfig.from_dict({k: v for k, v in c.to_dict().items() if k != "allocator"}).run_id
    assert c.replace(allocator="knapsack").run_id != c.run_id


def test_llm_backend_refuses_an_allocator():
    from studies.backends import engine_kwargs

    with pytest.raises(StudiesError, match="allocator"):
        engine_kwargs(RunConfig(backend="llm", allocator="knapsack"), {"n": None}, "llm")


def test_sweep_allocators_cli_and_fit_by_allocator(tmp_path):
    out = tmp_path / "res"
    args = ["sweep", "allocators", "--out", out, "--n", "4,8", "--bp", "8", "--budget", "2^11",
            "--seeds", "2", "--allocators", "knapsack,dynamic-sampling", "--d", "32", "--d-val", "16",
            "--n-evals", "6", "--jobs", "1", "--no-progress"]
    r = CliRunner().invoke(main, [str(a) for a in args])
    assert r.exit_code == 0, r.output
    from studies.io import load_table

    t = load_table(out)
    assert set(t["allocator"]) == {"fixed-n4", "fixed-n8", "knapsack", "dynamic-sampling"}
    for rid, g in t.groupby("run_id"):
        assert g["compute"].iloc[-1] <= 2**11, rid
    fit = CliRunner().invoke(main, ["fit", str(out), "--by", "allocator", "--json"])
    assert fit.exit_code == 0, fit.output
    obj = json.loads(fit.stdout)
    assert obj
