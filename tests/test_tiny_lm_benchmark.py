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
