"""`isocompute report tiny-study` end to end on the quick plan (the real tiny LM, seconds): every stage into a
results directory, the report with its verdicts and readouts, the JSON object, the honest status of a partial
store, resuming, and bad input (one line, exit 2)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from isocompute.cli import main
from isocompute.reports import tiny_study as ts

pytest.importorskip("torch")


def invoke(*args):
    return CliRunner().invoke(main, ["report", "tiny-study", *map(str, args)])


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    root = tmp_path_factory.mktemp("tiny_study")
    r = invoke(
        "--quick",
        "--jobs",
        "1",
        "--no-progress",
        "--store",
        root / "store",
        "--out",
        root / "T.md",
        "--fig",
        root / "f.png",
        "--json",
    )
    assert r.exit_code == 0, r.output
    return root, json.loads(r.stdout)


@pytest.mark.slow  # the quick plan: ~20 real tiny-LM runs, ~20 s on 2 cores
def test_quick_plan_runs_every_stage_and_states_each_verdict(quick):
    root, js = quick
    assert [s["done"] == s["declared"] > 0 for s in js["stages"]] == [True] * len(ts.STAGES)
    verdicts = {(p, a): v["verdict"] for p, part in js["parts"].items() for a, v in part["arms"].items()}
    assert set(verdicts) == {("easy", "R"), ("easy", "E"), ("hard", "R")}
    assert set(verdicts.values()) <= {ts.REPRODUCED, ts.NOT_REPRODUCED, ts.INCONCLUSIVE}
    md = (root / "T.md").read_text()
    assert "Stage 5 of 5 finished" in md and "**Quick mode**" in md
    assert (
        md.count("**Rule, ") == 2 and "base lrs 5.62e-05, 0.0001, 0.000178 at B_ref = 64 under the sqrt" in md
    )
    for arm in ("Easy, arm R", "Easy, arm E", "Hard, arm R"):
        assert f"- {arm}" in md and f"### {arm}" in md
    assert (root / "f.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.slow  # the quick plan: ~20 real tiny-LM runs, ~20 s on 2 cores
def test_readouts_of_the_quick_store(quick):
    root, _ = quick
    x = ts.measure(ts.QUICK, root / "store")
    a = x["parts"]["easy"]["arms"]["R"]
    part = ts.QUICK.part("easy")
    assert [float(b) for b in part.readout] == a["budgets"]
    assert len(a["stars"]) == len(a["budgets"]) == len(a["stake"]) == len(a["best_k"])
    assert all(s.point in part.ns for s in a["stars"])
    for splits in a["pass1"].values():
        assert set(splits) == {"train", "val"}
        for per in splits.values():
            for v in per.values():
                assert 0 <= v["zero"] <= 1 and 0 <= v["one"] <= 1 and v["runs"] == len(part.report_seeds)
    assert set(a["gap"]) == set(part.ns) and set(a["zero_var"][a["matched"][-1]]) == set(part.ns)
    assert all(np.isfinite(a["wall"]["rate"][n][0]) for n in part.ns)
    st = a["stake"][-1]
    assert st["best"] in part.ns and st["best_small"] in part.ns
    ev = a["evidence"]
    assert set(ev.rec["seed"]) == set(part.report_seeds) and set(ev.tune_rec["seed"]) == set(part.tune_seeds)
    assert x["parts"]["easy"]["choices"].r_lr in {ts.lr_point(k) for k in range(-2, 3)}


@pytest.mark.slow  # the quick plan: ~20 real tiny-LM runs, ~20 s on 2 cores
def test_regenerating_reads_the_store_and_runs_nothing(quick, monkeypatch):
    root, js = quick

    def no_runs(*a, **k):
        raise AssertionError("the report ran a run")

    monkeypatch.setattr("studies.executors.run_sweep", no_runs)
    r = invoke("--store", root / "store", "--out", root / "again.md", "--fig", root / "g.png")
    assert r.exit_code == 0, r.output  # the full plan's report on the quick store: nothing of it has run
    md = (root / "again.md").read_text()
    assert "Stage 0 of 5 finished" in md and "not yet decided" in md and "not yet run" in md
    # the quick plan's stages resume: all finished, nothing to run
    r = invoke(
        "--quick", "--stage", "tune", "--store", root / "store", "--out", root / "T2.md", "--no-progress"
    )
    assert r.exit_code == 0, r.output
    assert "stage tune: all" in r.stderr


@pytest.mark.slow  # the quick plan: ~20 real tiny-LM runs, ~20 s on 2 cores
def test_a_partial_store_says_where_it_stands(tmp_path):
    r = invoke(
        "--quick",
        "--stage",
        "pilot",
        "--jobs",
        "1",
        "--no-progress",
        "--store",
        tmp_path / "s",
        "--out",
        tmp_path / "P.md",
        "--json",
    )
    assert r.exit_code == 0, r.output
    js = json.loads(r.stdout)
    assert js["stages"][0]["done"] == 1 and js["stages"][1]["done"] == 1  # the pilot run is a tuning run
    md = (tmp_path / "P.md").read_text()
    assert "Stage 1 of 5 finished" in md and "its tuning stage is not finished" in md
    assert "| 2 | done |" in md  # the pilot's row
    r = invoke("--quick", "--stage", "report", "--store", tmp_path / "s", "--out", tmp_path / "P.md")
    assert r.exit_code == 2 and "run stage tune" in r.output and len(r.output.strip().splitlines()) == 1


def test_bad_input_is_one_line_and_exit_2(tmp_path):
    r = invoke("--stage", "nope")
    assert r.exit_code == 2
    (tmp_path / "f").write_text("x")
    r = invoke("--store", tmp_path / "f", "--stage", "pilot", "--out", tmp_path / "o.md")
    assert r.exit_code == 2 and len(r.output.strip().splitlines()) == 1
    assert invoke("--help").exit_code == 0
