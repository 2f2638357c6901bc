"""Readers of verl logs (console, file logger) and of wandb / TensorBoard CSV exports.

The verl fixtures are written in the formats of verl's own logging code (fixtures/verl/README.md names the
verl commits); the readers must recover bp and n, compute, the val-core metrics and numpy-2 reprs."""

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from isocompute.cli import main
from studies.config import StudiesError
from studies.io import load_table
from studies.readers import verl

FIX = Path(__file__).parent / "fixtures" / "verl"
CONSOLE, JSONL = FIX / "console_n4.log", FIX / "file_n8.jsonl"


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def test_console_log_geometry_from_the_printed_config_and_values_from_numpy_reprs():
    t = load_table(CONSOLE)
    assert set(t["backend"]) == {"verl"} and set(t["run_id"]) == {"console_n4"}
    assert (t["n"] == 4).all() and (t["bp"] == 16).all() and (t["batch"] == 64).all()
    np.testing.assert_array_equal(t["compute"], t["m"] * 64)
    assert t["m"].tolist() == list(range(61))
    val = t.dropna(subset=["val_mean"])
    assert val["m"].tolist() == list(range(0, 61, 5))
    assert val["val_mean"].iloc[0] == pytest.approx(0.2)  # parsed from np.float64(0.20000000000000068)
    assert (val["k"] == 4).all()
    np.testing.assert_allclose(val["val_worst_k"], 0.6 * val["val_mean"])
    train = t.loc[t["m"] > 0]
    np.testing.assert_allclose(train["batch_reward"], train["critic/score/mean"])
    # tokens: cumulative response tokens of bp * n rollouts per step
    np.testing.assert_allclose(train["tokens"], np.cumsum(train["response_len"] * 64))


def test_file_logger_needs_n_and_infers_bp_from_the_token_count():
    with pytest.raises(StudiesError, match=r"--n \(actor_rollout_ref.rollout.n\)"):
        load_table(JSONL)
    t = load_table(JSONL, n=8)
    assert (t["bp"] == 16).all() and t["compute"].max() == 60 * 128
    with pytest.raises(StudiesError, match="records n=4 but --n 8"):
        load_table(CONSOLE, n=8)


def test_metric_rows_not_logged_are_left_out_and_fit_runs_on_two_verl_runs(tmp_path):
    t = load_table(CONSOLE, metric="val_mean")
    assert len(t) == 13 and t["val_mean"].notna().all()
    r = invoke("fit", CONSOLE, JSONL, "--n", "4,8", "--json")
    assert r.exit_code == 0, r.output
    rep = json.loads(r.stdout)
    assert {c["n"] for c in rep["curves"]} == {4, 8}
    assert rep["frontier"][-1]["n"] == 8  # the n = 8 fixture curve is higher at large C
    r = invoke("fit", JSONL)
    assert r.exit_code == 2 and "--n" in r.output


def test_console_parser_strips_ray_prefixes_and_reads_the_config():
    text = ("(TaskRunner pid=7, ip=10.0.0.1) {'data': {'train_batch_size': 32},\n"
            "(TaskRunner pid=7, ip=10.0.0.1)  'actor_rollout_ref': {'rollout': {'n': 5}}}\n"
            "(TaskRunner pid=7, ip=10.0.0.1) step:3 - critic/score/mean:np.float32(0.5) - a/b@4:1e-3\n")
    steps, cfg = verl.parse_console(text)
    assert cfg["data"]["train_batch_size"] == 32 and verl._geometry_from_config(cfg) == {"n": 5, "bp": 32}
    assert steps == {3: {"critic/score/mean": 0.5, "a/b@4": 1e-3}}


def test_wandb_panel_export_and_tensorboard_csv_folder(tmp_path):
    steps = np.arange(1, 21)
    wb = pd.DataFrame({"train/global_step": steps})
    for name, n in (("grpo-n4", 4), ("grpo-n8", 8)):
        wb[f"{name} - train/reward"] = 0.1 + 0.01 * steps * (n / 4)
        wb[f"{name} - train/reward__MIN"] = 0.0
        wb[f"{name} - eval/reward"] = np.where(steps % 2 == 0, 0.2 + 0.01 * steps, np.nan)
    f = tmp_path / "wandb_export.csv"
    wb.to_csv(f, index=False)
    t = load_table(f, fmt="csv", n=4, bp=8)
    assert set(t["run_id"]) == {"grpo-n4", "grpo-n8"} and set(t["backend"]) == {"wandb"}
    g = t.loc[t["run_id"] == "grpo-n8"]
    np.testing.assert_allclose(g["batch_reward"], 0.1 + 0.02 * steps)
    assert g["val_mean"].notna().sum() == 10 and g["compute"].max() == 20 * 32
    with pytest.raises(StudiesError, match="--n"):
        load_table(f)
    tb = tmp_path / "tb"
    tb.mkdir()
    for tag, vals in (("train_reward", 0.1 + 0.01 * steps), ("eval_reward", 0.3 + 0.0 * steps)):
        pd.DataFrame({"Wall time": 1.7e9 + steps, "Step": steps, "Value": vals}).to_csv(
            tb / f"run-grpo_n4-tag-{tag}.csv", index=False)
    t = load_table(tb, n=4, bp=8)
    assert set(t["backend"]) == {"tensorboard"} and set(t["run_id"]) == {"grpo_n4"}
    np.testing.assert_allclose(t["batch_reward"], 0.1 + 0.01 * steps)
    np.testing.assert_allclose(t["val_mean"], 0.3)


def test_unknown_format_and_unreadable_folder_are_one_line_errors(tmp_path):
    r = invoke("fit", CONSOLE, "--format", "nope")
    assert r.exit_code == 2 and "unknown --format" in r.output
    (tmp_path / "x.txt").write_text("nothing here\n")
    r = invoke("fit", tmp_path)
    assert r.exit_code == 2 and "--format" in r.output and len(r.output.strip().splitlines()) == 1
