"""examples/trl_n_schedule.py, the README's worked example, run in short: two TRL runs on the shipped tiny LM
(one with an n schedule), then `isocompute fit` on their folder; and a setting it cannot serve refused in
one line with exit 2 before anything is written."""

import importlib.util
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("trl")

from studies.io import load_table  # noqa: E402

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "trl_n_schedule.py"


@pytest.fixture(scope="module")
def example():
    spec = importlib.util.spec_from_file_location("trl_n_schedule", EXAMPLE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_example_trains_with_its_schedule_and_fit_reads_it(example, tmp_path):
    out = tmp_path / "runs"
    assert example.main([str(out), "--steps", "4", "--schedule", "4@0,8@2"]) == 0  # 0: fit's exit code
    t = load_table(out / "schedule")
    np.testing.assert_array_equal(t["n"], [4, 4, 8, 8])
    np.testing.assert_array_equal(t["compute"], np.cumsum([32, 32, 64, 64]))  # 8 prompts a step
    assert t["val_mean"].notna().all()
    fixed = load_table(out / "fixed")
    assert (fixed["allocator"] == "fixed-n4").all() and fixed["compute"].iloc[-1] == 128


def test_a_setting_it_cannot_serve_is_one_line_exit_2_nothing_written(example, tmp_path, capsys):
    out = tmp_path / "refused"
    assert example.main([str(out), "--allocator", "knapsack", "--vllm-mode", "server"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: allocator knapsack gives prompts unequal n")
    assert not out.exists()
