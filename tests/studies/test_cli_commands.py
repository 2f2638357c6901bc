"""The `isocompute` CLI: options agree with RunConfig, one-line errors and exit 2, run/sweep/fit/plot."""

import dataclasses
import json

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from studies_fakes import FakeAdapter, register

from isocompute.cli import main
from studies.cli import run
from studies.config import RunConfig

register()


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def test_run_options_agree_with_runconfig_fields():
    opts = {p.name for p in run.params} - {"as_json", "out", "progress", "quiet"}
    assert opts == {f.name for f in dataclasses.fields(RunConfig)}
    helps = RunConfig.field_help()
    for p in run.params:
        if p.name in helps:
            assert p.help.startswith(helps[p.name]), p.name
        if p.name in helps and p.name != "options":
            default = next(f.default for f in dataclasses.fields(RunConfig) if f.name == p.name)
            assert p.default == default, p.name


def test_every_command_and_option_has_help():
    ctx = main.make_context("isocompute", [], resilient_parsing=True)
    assert {"run", "sweep", "fit", "plot", "llm", "figs"} <= set(main.list_commands(ctx))
    for name in ("run", "sweep", "fit", "plot"):  # the commands of studies/cli.py
        cmd = main.get_command(ctx, name)
        assert cmd.help or cmd.short_help, name
        for p in cmd.params:
            if p.param_type_name == "option":
                assert p.help, f"{name} {p.name}"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["run", "--n", "1"], "n = 1 < 2 leaves the group baseline without signal"),
        (["run", "--backend", "llm"], "no prepared model at"),
        (["run", "--backend", "gpt"], "unknown backend 'gpt'"),
        (["run", "--bp", "2048", "--d", "1024"], "bp = 2048 exceeds the training set size d = 1024"),
        (["run", "--budget", "100"], "budget 100 is smaller than one step"),
        (["run", "--model", "transformer"], "unknown model 'transformer'"),
        (["run", "--dataset", "medium"], "unknown dataset 'medium'"),
        (["run", "--lr", "-1"], "lr must be positive"),
        (["run", "--budget", "lots"], "not a count: 'lots'"),
        (["run", "--option", "bogus=1"], "unknown sim option 'bogus'"),
        (["run", "--option", "K8"], "option must read KEY=VALUE"),
        (["run", "--objective", "dpo"], "'dpo' is not one of"),
        (["run", "--nn", "4"], "No such option '--nn'"),
        (["run", "--out", "x.xlsx", "--backend", "fake"], "unknown table format .xlsx"),
        (["sweep", "bogus", "--out", "d"], "'bogus' is not one of"),
        (["sweep", "n-vs-m"], "Missing option '--out'"),
        (["sweep", "n-vs-m", "--out", "d", "--bp", "32,64"], "give one --bp value"),
        (["sweep", "joint", "--out", "d", "--bp", "32"], "joint needs --bmax"),
        (["sweep", "n-vs-m", "--out", "d", "--n", "2^3..2^1"], "empty range"),
        (["sweep", "n-vs-m", "--out", "d", "--n", "2", "--bp", "4", "--budget", "64", "--executor", "ray",
          "--address", "127.0.0.1:1"], "cannot reach Ray at 127.0.0.1:1"),
        (["sweep", "n-vs-m", "--out", "d", "--n", "2", "--bp", "4", "--budget", "64", "--executor", "ray",
          "--address", "nowhere"], "--address must read HOST:PORT"),
        (["fit", "missing.csv"], "no such file or directory: missing.csv"),
        (["plot", "missing.csv"], "no such file or directory: missing.csv"),
        (["bogus"], "No such command 'bogus'"),
    ],
)
def test_bad_input_is_one_line_on_stderr_and_exit_2(tmp_path, monkeypatch, args, message):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ISOCOMPUTE_CACHE", str(tmp_path / "cache"))  # no prepared LLM in this test's cache
    r = invoke(*args)
    assert r.exit_code == 2, r.output
    assert r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], r.stderr
    assert "Traceback" not in r.output


def test_help_and_version_exit_0():
    for args in (["--help"], ["run", "--help"], ["sweep", "-h"], ["fit", "--help"], ["--version"]):
        r = invoke(*args)
        assert r.exit_code == 0 and r.stdout, args
    assert "2^1..2^8" in invoke("sweep", "--help").stdout


def test_run_json_summary_and_table_file(tmp_path):
    out = tmp_path / "t.csv"
    r = invoke("run", "--backend", "fake", "--n", "4", "--bp", "8", "--budget", "2^12", "--n-evals", "6",
               "--seed", "3", "--json", "--out", out)
    assert r.exit_code == 0, r.output
    s = json.loads(r.stdout)
    cfg = RunConfig(backend="fake", n=4, bp=8, budget=4096, n_evals=6, seed=3)
    expected = FakeAdapter().run(cfg).table
    assert s["run_id"] == cfg.run_id and s["status"] == "done" and s["steps"] == 128
    assert s["final"]["val_mean"] == pytest.approx(expected.val_mean.iloc[-1], abs=0)
    assert s["best_val_mean"] == pytest.approx(expected.val_mean.max(), abs=0)
    assert RunConfig.from_dict(s["config"]) == cfg
    pd.testing.assert_frame_equal(pd.read_csv(out), expected, check_dtype=False)
    human = invoke("run", "--backend", "fake", "--n", "4", "--bp", "8", "--budget", "2^12")
    assert human.exit_code == 0 and "m = 128 steps" in human.stdout


def test_sweep_then_rerun_skips_and_reports_diverged(tmp_path):
    out = tmp_path / "res"
    args = ["sweep", "n-vs-m", "--backend", "fake", "--out", out, "--n", "2,4", "--bp", "4",
            "--budget", "1e3",
            "--seeds", "2", "--n-evals", "6", "--jobs", "1", "--no-progress"]
    r = invoke(*args)
    assert r.exit_code == 0, r.output
    assert "4 runs (4 run now, 0 already finished, 0 diverged, 0 failed)" in r.stdout
    r = invoke(*args)
    assert "4 runs (0 run now, 4 already finished" in r.stdout
    r = invoke(*args[:-3], "--option", "diverge_at=10", "--jobs", "1", "--no-progress")
    assert r.exit_code == 0 and "4 diverged" in r.stdout and r.stderr.count("diverged") == 4
    r = invoke(*args[:-3], "--option", "fail=true", "--jobs", "1", "--no-progress")
    assert r.exit_code == 1 and r.stderr.count("fake failure") == 4


@pytest.mark.parametrize(
    ("study", "grid", "pairs"),
    [
        ("fixed-batch", ["--batch", "16,32", "--n", "2,4,32"], {(8, 2), (4, 4), (16, 2), (8, 4), (1, 32)}),
        ("joint", ["--bp", "2,4", "--n", "2^1..2^3", "--bmax", "8"], {(2, 2), (2, 4), (4, 2)}),
        ("n-vs-m", ["--bp", "4", "--n", "2,8"], {(4, 2), (4, 8)}),
    ],
)
def test_sweep_grids_from_the_command_line(tmp_path, study, grid, pairs):
    out = tmp_path / study
    r = invoke("sweep", study, "--backend", "fake", "--out", out, *grid, "--budget", "2^9", "--seeds", "2",
               "--n-evals", "4", "--jobs", "1", "--no-progress")
    assert r.exit_code == 0, r.output
    runs = json.loads((out / "manifest.json").read_text())["runs"]
    cfgs = [RunConfig.from_dict(e["config"]) for e in runs.values()]
    assert {(c.bp, c.n) for c in cfgs} == pairs and len(cfgs) == 2 * len(pairs)
    assert {c.seed for c in cfgs} == {0, 1}
    assert all(c.problem_seed == c.seed and c.budget == 512 for c in cfgs)
    assert all(e["status"] == "done" for e in runs.values())
    rec = json.loads((out / "runs" / f"{cfgs[0].run_id}.json").read_text())
    assert rec["versions"]["pandas"] == pd.__version__ and rec["rows"] == 4


def _synthetic_table(seed=0):
    """Curves R_n(C) = 0.1 + (A_n - 0.1) / (1 + (Cmid_n / C)^1.5): larger n end higher but rise later."""
    rng = np.random.default_rng(seed)
    rows = []
    c = np.geomspace(1e3, 1e7, 60)
    truth = {}
    for i, n in enumerate([2, 8, 32, 128]):
        a, cmid = 0.4 + 0.12 * i, 1e4 * 4**i
        r = 0.1 + (a - 0.1) / (1 + (cmid / c) ** 1.5)
        truth[n] = (a, cmid)
        for cc, rr in zip(c, r + rng.normal(0, 0.002, c.size), strict=True):
            rows.append({"run_id": f"run-n{n}", "compute": cc, "n": n, "bp": 32, "val_mean": rr})
    return pd.DataFrame(rows), truth


def test_fit_json_on_a_minimal_csv_recovers_the_known_frontier(tmp_path):
    table, truth = _synthetic_table()
    path = tmp_path / "mine.csv"
    table.to_csv(path, index=False)
    r = invoke("fit", path, "--json")
    assert r.exit_code == 0, r.output
    rep = json.loads(r.stdout)
    assert {"metric", "by", "curves", "frontier", "n_star_fit"} <= set(rep)
    assert rep["metric"] == "val_mean" and rep["by"] == "n"
    fitted = {cur["n"]: cur["params"] for cur in rep["curves"]}
    for n, (a, cmid) in truth.items():  # noise sd 0.002 on 60 points: A within 0.02, C_mid within 15%
        assert fitted[n]["A"] == pytest.approx(a, abs=0.02)
        assert fitted[n]["C_mid"] == pytest.approx(cmid, rel=0.15)
    cs = np.array([f["compute"] for f in rep["frontier"]])
    assert set(cs) <= set(table["compute"]) and np.all(np.diff(np.log(cs)) > 0)  # evaluation computes
    ns = list(truth)
    checked = 0
    for f in rep["frontier"]:
        vals = np.array([0.1 + (truth[n][0] - 0.1) / (1 + (truth[n][1] / f["compute"]) ** 1.5) for n in ns])
        top2 = np.sort(vals)[-2:]
        if top2[1] - top2[0] > 0.01:  # a clear winner: n* must be it, and alone in its set
            assert f["n"] == ns[int(np.argmax(vals))] and f["set"] == [f["n"]], f
            checked += 1
    assert checked >= 10
    human = invoke("fit", path)
    assert human.exit_code == 0 and "compute-optimal n*(C)" in human.stdout
    assert len(human.stdout.splitlines()) >= len(rep["frontier"]) + 2


def test_fit_missing_column_is_one_line(tmp_path):
    table, _ = _synthetic_table()
    path = tmp_path / "mine.parquet"
    table.drop(columns="n").to_parquet(path)
    r = invoke("fit", path, "--json")
    assert r.exit_code == 2 and r.stderr.strip().count("\n") == 0 and "lacks column(s) n" in r.stderr
    r = invoke("fit", path, "--by", "bp", "--metric", "val_best_k")
    assert r.exit_code == 2 and "lacks column(s) val_best_k" in r.stderr


def test_plot_writes_a_png(tmp_path):
    table, _ = _synthetic_table()
    path = tmp_path / "mine.csv"
    table.to_csv(path, index=False)
    r = invoke("plot", path)
    assert r.exit_code == 0, r.output
    png = tmp_path / "mine_frontier.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000


@pytest.mark.slow
def test_demo_smoke_on_a_tiny_budget(tmp_path):
    out = tmp_path / "demo"
    r = invoke("demo", "--out", out, "--seeds", "1", "--budget", "2^14", "--jobs", "1", "--no-progress")
    assert r.exit_code == 0, r.output
    for model, metric in (("tabular", "train_mean"), ("interference", "val_mean")):
        assert f"== {model} (8 runs, {metric})" in r.stdout
        man = json.loads((out / model / "manifest.json").read_text())
        assert len(man["runs"]) == 8 and {e["status"] for e in man["runs"].values()} == {"done"}
        assert (out / model / "frontier.png").read_bytes()[:4] == b"\x89PNG"
    assert r.stdout.count("compute-optimal n*(C)") == 2
    # each row names its lr, and the tuned recipe's result stands beside them (the claims report's)
    assert r.stdout.count("at the simulator's constant lr 0.1, untuned") == 2
    assert "== the same question under the paper's recipe (claims report" in r.stdout
    assert "should" not in r.stdout


def test_the_demo_contrast_quotes_the_claims_report():
    from studies.presets import CLAIMS_JSON, demo_contrast

    summary = json.loads(CLAIMS_JSON.read_text())
    lines = demo_contrast(summary)
    g = summary["f1"]["recipe"]["gain"]
    assert f"{summary['verdicts']['f1']}; best large n minus best small n at 2^22 {g['estimate']:+.4f}" \
        in lines[1]
    assert lines[2].startswith(f"  constant lr {summary['f1']['preset']['lr']:g}, as in this demo")
    assert demo_contrast(None)[0].startswith("The tuned recipe beside this constant lr: docs/CLAIMS.md")


def test_fit_on_a_results_directory_names_left_out_diverged_runs(tmp_path):
    out = tmp_path / "res"
    common = ["--backend", "fake", "--out", out, "--bp", "4", "--budget", "2^16", "--n-evals", "24",
              "--jobs", "1", "--no-progress"]
    assert invoke("sweep", "n-vs-m", "--n", "2,8,32", *common).exit_code == 0
    r = invoke("sweep", "n-vs-m", "--n", "4", "--option", "diverge_at=50", *common)
    assert r.exit_code == 0 and "1 diverged" in r.stdout
    diverged = RunConfig(backend="fake", n=4, bp=4, budget=2**16, n_evals=24, seed=0, problem_seed=0,
                         options=(("diverge_at", 50),)).run_id
    r = invoke("fit", out, "--json")
    assert r.exit_code == 0, r.output
    assert f"warning: left out 1 diverged run(s): {diverged} (step 50)" in r.stderr
    rep = json.loads(r.stdout)
    assert sorted(c["n"] for c in rep["curves"]) == [2, 8, 32]  # the diverged n = 4 run is not fitted


def test_fit_table_marks_ties_and_lone_configurations(tmp_path):
    """Before any curve has moved, both n sit near R0 and the seeds cannot tell them apart: those rows print
    n* as its set, marked (tie); where n = 16 has no evaluation yet the row says (alone); once n = 16 pulls
    ahead, the row prints n* alone; footnotes explain both marks."""
    from synthetic_curves import synthetic_table

    table = synthetic_table({2: (0.1, 0.6, 1e5, 1.5), 16: (0.1, 0.8, 1e6, 1.5)}, seeds=2, noise=0.0)
    path = tmp_path / "t.csv"
    table.to_csv(path, index=False)
    out = invoke("fit", path).stdout.splitlines()
    rows = [ln for ln in out if ln[:12].strip() and ln.split()[0][0].isdigit()]
    assert rows[0].endswith("2 (alone)") and any(r.endswith("2-16 (tie)") for r in rows)
    assert rows[-1].split()[-1] == "16"
    assert any(ln.startswith("(tie): every n listed is within the best's interval") for ln in out)
    assert any(ln.startswith("(alone): the only n with an evaluation") for ln in out)
