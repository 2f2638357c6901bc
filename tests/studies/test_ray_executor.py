"""Ray executor against a real local Ray instance: the same tables as the local executor (issue 3)."""

import warnings

import pandas as pd
import pytest
import studies_fakes
from studies_fakes import register

from studies.config import RunConfig
from studies.executors import run_sweep
from studies.io import load_table
from studies.store import ResultStore
from studies.sweeps import n_vs_m

ray = pytest.importorskip("ray")
register()


@pytest.fixture(scope="module")
def local_ray():
    # Ray workers do not share the test's sys.path: ship the fake backend's module by value.
    ray.cloudpickle.register_pickle_by_value(studies_fakes)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield
    ray.shutdown()


def _both(tmp_path, cfgs):
    with ResultStore(tmp_path / "local") as st:
        loc = run_sweep(cfgs, st, jobs=1, progress=False)
    with ResultStore(tmp_path / "ray") as st:
        rem = run_sweep(cfgs, st, executor="ray", progress=False)
    return loc, rem


def test_ray_equals_local_on_a_small_sweep(tmp_path, local_ray):
    bad = RunConfig(backend="fake", n=32, bp=4, budget=2**10, options=(("fail", True),))
    cfgs = n_vs_m(RunConfig(backend="fake", bp=4, budget=2**10, n_evals=8), [2, 4, 8], seeds=2) + [bad]
    loc, rem = _both(tmp_path, cfgs)
    assert (rem.done, list(rem.failed)) == (6, [bad.run_id]) and loc.done == 6
    assert "fake failure" in rem.failed[bad.run_id]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pd.testing.assert_frame_equal(load_table(tmp_path / "ray"), load_table(tmp_path / "local"))
        pd.testing.assert_frame_equal(load_table(tmp_path / "ray", kind="pass1"),
                                      load_table(tmp_path / "local", kind="pass1"))
    assert ray.is_initialized()  # an instance the caller started is left running


def test_ray_equals_local_with_the_simulator(tmp_path, local_ray):
    base = RunConfig(model="tabular", bp=8, budget=2**12, d=32, n_evals=6,
                     d_val=16, options=(("dim", 8),))
    cfgs = n_vs_m(base, [2, 8], seeds=1)
    loc, rem = _both(tmp_path, cfgs)
    assert rem.done == loc.done == 2
    pd.testing.assert_frame_equal(load_table(tmp_path / "ray"), load_table(tmp_path / "local"))
    pd.testing.assert_frame_equal(load_table(tmp_path / "ray", kind="pass1"),
                                  load_table(tmp_path / "local", kind="pass1"))


def test_gpu_runs_reserve_a_gpu(monkeypatch):
    import studies.executors as ex

    seen = []

    class FakeRemote:
        def options(self, **opts):
            seen.append(opts)
            return self

    adapter = studies_fakes.FakeAdapter()
    monkeypatch.setattr(ray, "remote", lambda f: FakeRemote())
    monkeypatch.setattr(ray, "is_initialized", lambda: True)

    def no_submit(*a, **k):
        raise RuntimeError("stop after options")

    FakeRemote.remote = no_submit
    cpu = RunConfig(backend="fake", device="cpu")
    gpu = RunConfig(backend="fake", device="cuda")
    for cfg in (cpu, gpu):
        with pytest.raises(RuntimeError, match="stop after options"):
            ex._run_ray([(adapter, cfg)], lambda r: None)
    assert [o["num_gpus"] for o in seen] == [0, 1] and all(o["num_cpus"] == 1 for o in seen)
