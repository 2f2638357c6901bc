"""Local executors: a process pool gives the same files as in-process runs; failures are recorded."""

import pandas as pd
import pytest
from studies_fakes import register

from studies.config import RunConfig, StudiesError
from studies.executors import run_sweep
from studies.io import load_table
from studies.store import ResultStore
from studies.sweeps import n_vs_m

register()
BASE = RunConfig(backend="fake", bp=4, budget=2**10, n_evals=8)


def test_pool_equals_in_process_and_records_a_failing_run(tmp_path):
    bad = BASE.replace(n=16, options=(("fail", True),))
    cfgs = n_vs_m(BASE, [2, 4, 8], seeds=2) + [bad]
    with ResultStore(tmp_path / "serial") as st:
        run_sweep(cfgs, st, jobs=1, progress=False)
    with ResultStore(tmp_path / "pool") as st:
        s = run_sweep(cfgs, st, jobs=2, progress=True)
    assert s.done == 6 and list(s.failed) == [bad.run_id]
    assert "RuntimeError: fake failure" in s.failed[bad.run_id]
    with pytest.warns(UserWarning, match="unfinished"):
        pool = load_table(tmp_path / "pool")
    with pytest.warns(UserWarning, match="unfinished"):
        serial = load_table(tmp_path / "serial")
    pd.testing.assert_frame_equal(pool, serial)
    with pytest.warns(UserWarning):
        pd.testing.assert_frame_equal(load_table(tmp_path / "pool", kind="pass1"),
                                      load_table(tmp_path / "serial", kind="pass1"))


def test_everything_is_validated_before_anything_runs(tmp_path):
    cfgs = [BASE.replace(n=2), BASE.replace(n=4, model="transformer")]
    with ResultStore(tmp_path) as st, pytest.raises(StudiesError, match="unknown model 'transformer'"):
        run_sweep(cfgs, st, jobs=1, progress=False)
    assert not list((tmp_path / "runs").glob("*.parquet"))
    with ResultStore(tmp_path / "x") as st, pytest.raises(StudiesError, match="unknown executor"):
        run_sweep(cfgs[:1], st, executor="slurm")
