"""The local executor hands simulator runs to sandbox.run_many (one batch per policy layout, the runs taken
one at a time by its threads); the store holds the same files as with one run at a time."""

import pandas as pd

from studies.backends import SimAdapter
from studies.config import RunConfig
from studies.executors import run_sweep
from studies.io import load_table
from studies.store import ResultStore
from studies.sweeps import n_vs_m

BASE = RunConfig(backend="sim", bp=8, budget=2**12, n_evals=6, d=64, d_val=32)


def test_batched_sweep_writes_the_same_store_as_one_run_at_a_time(tmp_path, monkeypatch):
    cfgs = n_vs_m(BASE, [2, 4, 16], seeds=2) + n_vs_m(BASE.replace(model="interference"), [2, 8], seeds=2)
    with ResultStore(tmp_path / "batched") as st:
        s = run_sweep(cfgs, st, jobs=2, progress=False)
    assert s.done == len(cfgs) and not s.failed
    calls = []
    real = SimAdapter.run_many
    monkeypatch.setattr(SimAdapter, "run_many", lambda self, c, threads=None, **kw:
                        calls.append(len(c)) or real(self, c, threads, **kw))
    with ResultStore(tmp_path / "batched2") as st:
        run_sweep(cfgs, st, jobs=2, progress=False)
    assert sum(calls) == len(cfgs) and len(calls) >= 2  # one batch per model at least
    monkeypatch.delattr(SimAdapter, "run_many")  # the adapter without batching: one run at a time
    with ResultStore(tmp_path / "single") as st:
        run_sweep(cfgs, st, jobs=1, progress=False)
    for kind in ("table", "pass1"):
        a = load_table(tmp_path / "batched", kind=kind)
        b = load_table(tmp_path / "single", kind=kind)
        pd.testing.assert_frame_equal(a, b, check_exact=True)
    assert len(load_table(tmp_path / "batched")) > len(cfgs)
