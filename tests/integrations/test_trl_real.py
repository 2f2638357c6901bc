"""A real TRL GRPOTrainer (tiny random Llama built in the test) at two num_generations with the callback on:
the callback's live table and the trainer_state.json reader agree, compute follows TRL's batch geometry,
and `isocompute fit` reads the file as it is."""

import json
import math

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

pytest.importorskip("trl")

from tiny_trl import run  # noqa: E402

from isocompute.cli import main  # noqa: E402
from studies.config import StudiesError  # noqa: E402
from studies.io import load_table  # noqa: E402
from studies.readers.trl import Geometry, state_to_table  # noqa: E402


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("trl")
    out = {}
    for n in (2, 4):
        d = root / f"n{n}"
        trainer, cb = run(d, num_generations=n, prompts_per_step=4, steps=4, eval_steps=2)
        out[n] = (d, trainer, cb)
    return root, out


def test_callback_and_reader_agree_on_the_same_real_run(runs):
    _, out = runs
    for n, (d, trainer, _) in out.items():
        live = pd.read_parquet(d / "isocompute.parquet")
        read = load_table(d / "trainer_state.json")
        pd.testing.assert_frame_equal(live.reset_index(drop=True), read, check_dtype=False)
        args = trainer.args
        # TRL 1.16: per_device_train_batch_size counts completions; one generation batch per optimiser step
        assert args.generation_batch_size == 4 * n and args.steps_per_generation == 1
        assert (read["n"] == n).all() and (read["bp"] == 4).all()
        np.testing.assert_array_equal(read["m"], [1, 2, 3, 4])
        np.testing.assert_array_equal(read["compute"], read["m"] * 4 * n)
        log = [e for e in trainer.state.log_history if "reward" in e]
        np.testing.assert_allclose(read["batch_reward"], [e["reward"] for e in log])
        np.testing.assert_allclose(read["zero_var_frac"], [e["frac_reward_zero_std"] for e in log])
        lengths = np.array([e["completions/mean_length"] for e in log])
        np.testing.assert_allclose(read["tokens"], np.cumsum(lengths * 4 * n))
        evals = {e["step"]: e["eval_reward"] for e in trainer.state.log_history if "eval_reward" in e}
        assert sorted(evals) == [2, 4]
        for step, v in evals.items():
            assert read.loc[read["m"] == step, "val_mean"].item() == pytest.approx(v)
        assert read.loc[read["m"] == 1, "val_mean"].isna().all()
        assert math.isnan(read["train_mean"].iloc[0]) and read["seed"].iloc[0] == 0


def test_fit_reads_the_trainer_state_files_without_conversion(runs):
    root, out = runs
    r = CliRunner().invoke(main, ["fit", str(root), "--metric", "batch_reward", "--json"])
    assert r.exit_code == 0, r.output
    rep = json.loads(r.stdout)
    assert {c["n"] for c in rep["curves"]} == {2, 4} and rep["frontier"]
    r = CliRunner().invoke(main, ["fit", str(out[2][0] / "trainer_state.json"), str(out[4][0]), "--json"])
    assert r.exit_code == 0, r.output
    assert {c["n"] for c in json.loads(r.stdout)["curves"]} == {2, 4}


def test_a_state_file_without_the_callback_needs_n_and_bp(runs, tmp_path):
    _, out = runs
    state = json.loads((out[4][0] / "trainer_state.json").read_text())
    state["stateful_callbacks"].pop("IsoComputeCallback")
    f = tmp_path / "run" / "trainer_state.json"
    f.parent.mkdir()
    f.write_text(json.dumps(state))
    r = CliRunner().invoke(main, ["fit", str(f), "--metric", "batch_reward"])
    assert r.exit_code == 2
    assert "--n (GRPOConfig.num_generations)" in r.output and "--bp" in r.output
    t = load_table(f, n=4, bp=4)
    ours = load_table(out[4][0] / "trainer_state.json")
    # the run's label (allocator) lives in the callback's record
    pd.testing.assert_frame_equal(t.drop(columns=["run_id", "seed"]),
                                  ours.drop(columns=["run_id", "seed", "allocator"]))
    with pytest.raises(StudiesError, match="records n=4 but --n 8"):
        state_to_table(json.loads((out[4][0] / "trainer_state.json").read_text()), "x", n=8)


def test_geometry_counts_generation_batches_as_trl_schedules_them():
    # steps_per_generation = 2 x gradient_accumulation: one batch of 16 completions every 2 optimiser steps;
    # num_iterations = 2 reuses each batch twice
    g = Geometry(n=4, bp=4, gradient_accumulation_steps=2, steps_per_generation=4, num_iterations=1)
    np.testing.assert_array_equal(g.compute(np.array([1, 2, 3, 4])), [16, 16, 32, 32])
    g = Geometry(n=4, bp=4, gradient_accumulation_steps=1, steps_per_generation=1, num_iterations=2)
    np.testing.assert_array_equal(g.compute(np.array([1, 2, 3])), [16, 16, 32])
