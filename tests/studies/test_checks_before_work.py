"""What a command refuses (one line, exit 2) or warns about before any work, and words that say what they
count: the same runs given twice to fit, conflicting duplicate rows in a table, a sweep into a folder that
holds another experiment (a warning), a step that would not fit in memory; "too few record-breaking points",
an expected regret only with its interval (never from 2 seeds), the logs fit reads, --lm small, the README's
reports."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from studies_fakes import register
from synthetic_curves import synthetic_table

from isocompute.cli import main
from studies.cli_kit import checks
from studies.config import RunConfig, StudiesError

register()
ROOT = Path(__file__).resolve().parents[2]


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def one_line_error(r, *words: str) -> bool:
    return (r.exit_code == 2 and r.stderr.startswith("error: ") and r.stderr.count("\n") == 1
            and all(w in r.stderr for w in words))


def sweep(out: Path, *extra: str, seeds: int = 2, n: str = "2,4,8"):
    return invoke("sweep", "n-vs-m", "--backend", "fake", "--n", n, "--bp", "4", "--budget", "2^14",
                  "--seeds", seeds, "--jobs", "1", "--out", out, "--quiet", *extra)


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("checks") / "a"
    assert sweep(out).exit_code == 0
    return out


# ----------------------------------------------------------------------------------- the same run twice
def test_fit_refuses_the_same_path_twice_however_written(runs, monkeypatch):
    assert invoke("fit", runs).exit_code == 0
    assert one_line_error(invoke("fit", runs, runs), "given twice", "count twice")
    monkeypatch.chdir(runs.parent)
    assert one_line_error(invoke("fit", "a", f"./a/../{runs.name}"), "given twice")
    assert one_line_error(invoke("plot", runs, runs), "given twice")


def test_fit_refuses_a_copy_of_runs_it_already_has(runs, tmp_path):
    copy = tmp_path / "b"
    shutil.copytree(runs, copy)
    r = invoke("fit", runs, copy)
    assert one_line_error(r, "also in an earlier PATH with the same rows", str(copy)), r.output


def test_two_logs_whose_runs_only_share_a_name_are_kept_apart(tmp_path):
    """A run_id used by two logs with different rows is two runs (renamed), not a copy."""
    t = synthetic_table({2: (0.3, 0.6, 2e3, 1.5), 8: (0.3, 0.7, 8e3, 1.5)}, seeds=1, points=20, c_max=1e6,
                        rng=np.random.default_rng(0))
    t.to_csv(tmp_path / "x.csv", index=False)
    t.assign(val_mean=t["val_mean"] + 0.01).to_csv(tmp_path / "y.csv", index=False)
    assert invoke("fit", tmp_path / "x.csv", tmp_path / "y.csv").exit_code == 0


# ------------------------------------------------------------------------------------ duplicate rows
def _table(tmp_path) -> pd.DataFrame:
    return synthetic_table({2: (0.3, 0.6, 2e3, 1.5), 8: (0.3, 0.7, 8e3, 1.5)}, seeds=2, points=20, c_max=1e6,
                           rng=np.random.default_rng(1))


def test_conflicting_duplicate_rows_are_refused_and_exact_repeats_dropped_with_a_warning(tmp_path):
    t = _table(tmp_path)
    row = t.iloc[[5]]
    t.pipe(lambda d: pd.concat([d, row.assign(val_mean=row["val_mean"] + 0.2)])).to_csv(
        tmp_path / "conflict.csv", index=False)
    r = invoke("fit", tmp_path / "conflict.csv")
    assert one_line_error(r, "1 conflicting duplicate row(s)", f"run_id {row['run_id'].iloc[0]} at compute",
                          "keep one row per run_id and compute"), r.output
    pd.concat([t, row]).to_csv(tmp_path / "repeat.csv", index=False)
    r = invoke("fit", tmp_path / "repeat.csv", "--json")
    assert r.exit_code == 0 and "warning: dropped 1 repeated row(s)" in r.stderr
    t.to_csv(tmp_path / "clean.csv", index=False)
    clean = invoke("fit", tmp_path / "clean.csv", "--json")
    assert json.loads(r.stdout)["frontier"] == json.loads(clean.stdout)["frontier"]


# ------------------------------------------------------------------------- a folder of another experiment
def test_a_sweep_into_a_folder_holding_another_experiment_is_warned_about_before_any_run(runs, tmp_path):
    """A warning, not a refusal (a store may hold several experiments on purpose; fit reads them apart with
    --where), said before the first run so that Ctrl-C costs nothing; an extended sweep gets none."""
    out = tmp_path / "a"
    shutil.copytree(runs, out)
    r = sweep(out, "--lr", "0.5")
    assert r.exit_code == 0 and r.stderr.count("\n") == 1, r.output
    said = (f"warning: {out} holds 6 run(s) of another experiment (they differ from this sweep in lr: 0.5 "
            "vs unset (the backend's default)); fit will read them apart only with --where")
    assert r.stderr.startswith(said), r.stderr
    assert one_line_error(invoke("fit", out), "differ in lr")
    assert invoke("fit", out, "--where", "lr=0.5").exit_code == 0
    grown = tmp_path / "b"
    shutil.copytree(runs, grown)
    r = sweep(grown, seeds=3, n="2,4,8,16")  # the same experiment, more seeds and another n: a resumed sweep
    assert r.exit_code == 0 and r.stderr == "" and "6 already finished" in r.stdout, r.output


# ------------------------------------------------------------------------------------------ memory
def test_a_step_larger_than_the_memory_is_refused_in_one_line(tmp_path):
    pytest.importorskip("torch")
    r = invoke("run", "--backend", "llm", "--lm", "tiny", "--n", "2^20", "--bp", "2^10", "--budget", "2^30")
    assert one_line_error(r, "one step of 1,073,741,824 rollouts", "GB available", "smaller n or bp"), \
        r.output
    r = invoke("sweep", "n-vs-m", "--backend", "llm", "--lm", "tiny", "--n", "2,2^20", "--bp", "2^10",
               "--budget", "2^30", "--out", tmp_path / "unused")
    assert one_line_error(r, "one step of 1,073,741,824 rollouts"), r.output
    assert not (tmp_path / "unused").exists()


def test_a_step_filling_most_of_the_memory_is_a_warning(capsys):
    """Against a made-up machine: refused above all of the memory, a warning above half of it, silent
    below; the simulator (no estimate) and cuda runs pass."""
    pytest.importorskip("torch")
    cfg = RunConfig(backend="llm", lm="tiny", n=64, bp=64, budget=2**12)
    from studies.backends import get_backend

    need = get_backend("llm").step_bytes(cfg)
    assert need > 64 * 64 * 10 * 100  # rollouts x tokens x bytes per token
    with pytest.raises(StudiesError, match="one step of 4,096 rollouts"):
        checks.check_memory([cfg], available=need - 1)
    checks.check_memory([cfg], available=int(need * 1.5))
    assert capsys.readouterr().err.startswith("warning: one step of 4,096 rollouts")
    checks.check_memory([cfg], available=need * 4)
    assert capsys.readouterr().err == ""
    checks.check_memory([RunConfig(n=2**20, bp=2**10, budget=2**30)], available=1)  # the simulator
    assert checks.available_memory() and checks.available_memory("/nonexistent") is None


# --------------------------------------------------------------------------------------------- words
def test_too_few_points_says_it_counts_record_breaking_points(tmp_path):
    out = tmp_path / "s"
    assert sweep(out, "--n-evals", "4").exit_code == 0
    r = invoke("fit", out)
    assert r.exit_code == 0
    assert re.search(r"too few record-breaking points \(\d+, \d+ distinct C; a sigmoid needs 5, 4 distinct\)",
                     r.output), r.output


def test_no_expected_regret_from_two_seeds_and_one_with_its_interval_from_three(runs, tmp_path):
    two = invoke("fit", runs)
    assert two.exit_code == 0 and "expected regret of" not in two.stdout
    assert "no expected regret from 2 run(s) per configuration" in two.stdout
    cert = json.loads(invoke("fit", runs, "--json").stdout)["certainty"]
    assert cert["expected_regret"] is None and cert["expected_regret_interval"] is None
    out = tmp_path / "three"
    assert sweep(out, seeds=3).exit_code == 0
    cert = json.loads(invoke("fit", out, "--json").stdout)["certainty"]
    lo, hi = cert["expected_regret_interval"]
    assert 0 <= lo <= cert["expected_regret"] <= hi
    assert re.search(r"expected regret of n = \d+: [\d.e-]+ 90% interval \[", invoke("fit", out).stdout)


def test_fit_of_an_unknown_file_names_the_logs_it_reads(tmp_path):
    (tmp_path / "random.log").write_text("epoch 1 loss 0.3\n")
    r = invoke("fit", tmp_path / "random.log")
    assert one_line_error(r, "verl console log", "trainer_state.json", "--format"), r.output
    assert ".csv, .parquet, .jsonl" in r.stderr


def test_lm_small_points_at_pretrain_not_into_the_installed_package(tmp_path, monkeypatch):
    pytest.importorskip("torch")
    from llm_backend.model import PACKAGED_MODELS

    if (PACKAGED_MODELS / "small" / "config.json").exists():
        pytest.skip("this installation ships the small LM")
    monkeypatch.setenv("ISOCOMPUTE_CACHE", str(tmp_path / "cache"))
    r = invoke("run", "--backend", "llm", "--lm", "small", "--budget", "2^10")
    cache = str(tmp_path / "cache")
    assert one_line_error(r, "does not ship", "isocompute llm pretrain --lm small", cache), r.output
    assert str(PACKAGED_MODELS) not in r.stderr
    help_text = " ".join(invoke("run", "--help").stdout.split())
    assert "tiny or small (shipped" not in help_text and "once made by `isocompute llm pretrain --lm small`" \
        in help_text


def test_the_readme_lists_every_report_of_the_registry():
    from isocompute.reports.cli import COMMANDS

    text = (ROOT / "README.md").read_text()
    start = text.index("isocompute report --help")
    block = []
    for line in text[start:].splitlines():
        if block and not (line.startswith(" ") and line.lstrip().startswith("#")):  # its continuations
            break
        block.append(line.split("#", 1)[1])
    said = {w.strip(" ,.") for w in " ".join(block).split(":", 1)[1].split(",")}
    assert said == set(COMMANDS), said ^ set(COMMANDS)
