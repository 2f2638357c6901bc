"""benchmarks/tiny_lm.py's interleaved timing: ABBA order, and speedups that a linear drift of the machine's
speed does not bias."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

_PATH = Path(__file__).resolve().parents[1] / "benchmarks" / "tiny_lm.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("tiny_lm_bench", _PATH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_interleaved_runs_abba_and_cancels_a_linear_drift(bench):
    order, clock = [], [0]
    work = {"new": 1.0, "ref": 2.0}  # the reference does twice the work: true speedup 2

    def measure(root):
        clock[0] += 1
        order.append(root)
        slow = 1.0 + 0.1 * clock[0]  # the machine slows by 10% of its first speed per run
        return {"wall_s": work[root] * slow, "cpu_s": work[root] * slow}

    out = bench.interleaved({"new": "new", "ref": "ref"}, measure, 4, {"speedup_wall": "wall_s"})
    assert order == ["new", "ref", "ref", "new", "new", "ref", "ref", "new"]
    assert out["speedup_wall"] == pytest.approx(2.0)  # ABBA: the drift cancels exactly
    assert len(out["new_runs"]) == len(out["ref_runs"]) == 4
    per = out["speedup_per_rep"]
    assert per[0] > 2.0 and per[1] < 2.0  # each rep alone is biased one way or the other
    naive = measure("ref")["wall_s"] / measure("new")["wall_s"]  # one order only (ref first here): biased
    assert naive < 2.0 - 0.05


def _result(single: dict, pair: float, floor: float) -> dict:
    run = {"rollouts_per_s": 1000.0, "t_rollout_s": 1.0, "t_train_s": 2.0}
    return {
        "cpu": "Test CPU", "isa": "AVX2", "cores": 2, "torch_threads": 1, "loadavg_before": [0.1, 0, 0],
        "loadavg_after": [1.9, 0, 0],
        "end_to_end": [{"n": n, "new": run, "ref": run, "speedup_wall": x, "speedup_per_rep": [x, x]}
                       for n, x in single.items()],
        "two_runs_at_once": [{"n": 4, "new": run, "ref": run, "speedup_aggregate": pair}],
        "update": {"n": 64, "own_update_s": 0.09, "own_over_floor": floor, "own_share_of_peak": 0.4,
                   "own_over_hf": 1.1, "matmul_peak_gflops": 90.0},
        "rollout": {"bp": 16, "n": 8, "kv_rollouts_per_s": 9000.0, "kv_over_hf": 3.0,
                    "kv_share_of_peak": 0.2},
    }


def test_table_says_which_targets_a_result_meets(bench):
    text = bench.markdown(_result({4: 1.74, 16: 2.25, 64: 1.49}, pair=1.71, floor=3.2))
    assert "**1.74x** (not met: 2x)" in text and "**2.25x** (met: 1.5x)" in text
    assert "**1.49x** (not met: 1.5x)" in text and "**1.71x** (met: 1.7x)" in text
    assert "**3.20x** the float32 matmul floor (not met: within 3x" in text
    assert "Test CPU (AVX2)" in text
    text = bench.markdown(_result({4: 2.0, 16: 1.5, 64: 1.5}, pair=1.69, floor=2.9))
    assert text.count("(met:") == 4 and "**1.69x** (not met: 1.7x)" in text and "(met: within 3x" in text


def test_table_of_a_missing_file_is_a_one_line_error(tmp_path):
    import subprocess
    import sys

    p = subprocess.run([sys.executable, str(_PATH), "--table", str(tmp_path / "none.json")],
                       capture_output=True, text=True)
    assert p.returncode == 2 and p.stdout == "" and len(p.stderr.strip().splitlines()) == 1


def test_table_names_the_run_it_quotes_by_the_rep_count(bench):
    two = bench.markdown(_result({4: 1.7, 16: 2.0, 64: 2.0}, pair=1.8, floor=2.5))
    assert "of the slower of the two runs" in two and "ratio over both reps" in two
    res = _result({4: 1.7, 16: 2.0, 64: 2.0}, pair=1.8, floor=2.5)
    for row in res["end_to_end"]:
        row["speedup_per_rep"] = [1.6, 1.7, 1.8]
    three = bench.markdown(res)
    assert "of the median of the 3 runs" in three and "ratio over all 3 reps" in three
    assert "1.60x / 1.70x / 1.80x" in three and "slower" not in three
