"""Runs stored before the allocator column existed have none; loading a results directory labels them as the
fixed-n runs they were, so `fit --by allocator` keeps them beside new allocator runs."""

from studies.backends import get_backend
from studies.config import RunConfig
from studies.io import load_table
from studies.store import ResultStore


def test_old_runs_without_the_column_load_as_fixed(tmp_path):
    sim = get_backend("sim")
    old = RunConfig(backend="sim", model="tabular", n=2, bp=4, budget=256, d=8, d_val=8, seed=0)
    new = old.replace(allocator="knapsack", n=4)
    with ResultStore(tmp_path, study="t") as store:
        out = sim.run(old)
        out.table = out.table.drop(columns=["allocator"])  # as written before the column existed
        store.write_run(old, out)
        store.write_run(new, sim.run(new))
    t = load_table(tmp_path)
    labels = dict(zip(t["run_id"], t["allocator"], strict=False))
    assert labels[old.run_id] == "fixed-n2"
    assert labels[new.run_id] == "knapsack"
