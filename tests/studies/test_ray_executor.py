"""Ray executor against a real local Ray instance: the same tables as the local executor, each run's
resource request (its CPUs, a whole GPU on cuda), and --ship-code's packages on the workers."""

import sys
import time
import warnings
from pathlib import Path

import pandas as pd
import pytest
import studies_fakes
from studies_fakes import FakeAdapter, register

import studies.executors as ex
from studies.backends import LLMAdapter, SimAdapter, register_backend
from studies.config import RunConfig, StudiesError
from studies.executors import run_sweep
from studies.io import load_table
from studies.store import ResultStore
from studies.sweeps import n_vs_m

ray = pytest.importorskip("ray")
register()
REPO = Path(__file__).resolve().parents[2]


class TimedFake(FakeAdapter):
    """The fake backend, each run's wall-clock interval, GPU ids and the files of its imports in its info."""

    def run(self, cfg, progress=False):
        import sandbox
        import studies.executors

        t0 = time.time()
        out = super().run(cfg, progress)
        gpus = [str(g) for g in ray.get_gpu_ids()] if ray.is_initialized() else []  # (no auto-init locally)
        out.info.update(t0=t0, t1=time.time(), gpus=gpus,
                        studies_file=studies.executors.__file__, sandbox_file=sandbox.__file__)
        return out


@pytest.fixture(scope="module")
def local_ray():
    # Ray workers do not share the test's sys.path: ship the fake backends' modules by value.
    ray.cloudpickle.register_pickle_by_value(studies_fakes)
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    register_backend("timed", TimedFake())
    # one declared GPU (none is needed: Ray only counts it) so that GPU runs queue for it
    ray.init(address="local", num_cpus=2, num_gpus=1, include_dashboard=False, log_to_driver=False,
             configure_logging=False)  # "local": never a cluster that a `ray start` left in /tmp/ray
    yield
    ray.shutdown()


def _both(tmp_path, cfgs, **kw):
    with ResultStore(tmp_path / "local") as st:
        loc = run_sweep(cfgs, st, jobs=1, progress=False)
    with ResultStore(tmp_path / "ray") as st:
        rem = run_sweep(cfgs, st, executor="ray", progress=False, **kw)
    return loc, rem


def _tables_equal(a, b):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pd.testing.assert_frame_equal(load_table(a), load_table(b))
        pd.testing.assert_frame_equal(load_table(a, kind="pass1"), load_table(b, kind="pass1"))


def _infos(path):
    with ResultStore(path) as st:
        return {run_id: st.record(run_id)["info"] for run_id in st.manifest["runs"] if st.is_finished(run_id)}


@pytest.mark.slow  # starts Ray
def test_ray_equals_local_on_a_small_sweep(tmp_path, local_ray):
    bad = RunConfig(backend="fake", n=32, bp=4, budget=2**10, options=(("fail", True),))
    cfgs = n_vs_m(RunConfig(backend="fake", bp=4, budget=2**10, n_evals=8), [2, 4, 8], seeds=2) + [bad]
    loc, rem = _both(tmp_path, cfgs)
    assert (rem.done, list(rem.failed)) == (6, [bad.run_id]) and loc.done == 6
    assert "fake failure" in rem.failed[bad.run_id]
    _tables_equal(tmp_path / "ray", tmp_path / "local")
    # each record names the node its run ran on (one node here)
    node = ray.get_runtime_context().get_node_id()
    assert {i["ray_node"] for i in _infos(tmp_path / "ray").values()} == {node}
    assert ray.is_initialized()  # an instance the caller started is left running


@pytest.mark.slow
def test_ray_equals_local_with_the_simulator(tmp_path, local_ray):
    base = RunConfig(model="tabular", bp=8, budget=2**12, d=32, n_evals=6,
                     d_val=16, options=(("dim", 8),))
    cfgs = n_vs_m(base, [2, 8], seeds=1)
    loc, rem = _both(tmp_path, cfgs)
    assert rem.done == loc.done == 2
    _tables_equal(tmp_path / "ray", tmp_path / "local")


@pytest.mark.slow
def test_gpu_runs_never_share_the_gpu(tmp_path, local_ray):
    cfgs = [RunConfig(backend="timed", device="cuda", n=n, bp=4, budget=2**10, options=(("sleep", 1.0),))
            for n in (2, 4, 8)]
    with ResultStore(tmp_path) as st:
        s = run_sweep(cfgs, st, executor="ray", progress=False)
    assert s.done == 3 and not s.failed
    runs = sorted(_infos(tmp_path).values(), key=lambda i: i["t0"])
    assert all(i["gpus"] == ["0"] for i in runs)  # each got the one GPU...
    assert all(a["t1"] <= b["t0"] for a, b in zip(runs, runs[1:], strict=False))  # ...never two at once


def test_each_run_asks_for_its_cpus_and_a_gpu_on_cuda():
    """The resource request of each kind of run, read off the options each task is submitted with."""
    llm_cpu, llm_gpu = RunConfig(backend="llm"), RunConfig(backend="llm", device="cuda:1")
    sim = RunConfig(model="tabular")
    opts = {name: ex.ray_task_options(adapter, cfg, node_cpus=16) for name, adapter, cfg in (
        ("llm_cpu", LLMAdapter(), llm_cpu), ("llm_gpu", LLMAdapter(), llm_gpu),
        ("sim", SimAdapter(), sim), ("fake", FakeAdapter(), RunConfig(backend="fake")))}
    got = {k: (o["num_cpus"], o["num_gpus"]) for k, o in opts.items()}
    assert got == {"llm_cpu": (16, 0), "llm_gpu": (1, 1), "sim": (1, 0), "fake": (1, 0)}
    assert all(o["max_retries"] == ex.RAY_MAX_RETRIES > 0 for o in opts.values())


def test_the_submitted_tasks_carry_the_request(monkeypatch):
    seen = []

    class FakeRemote:
        def options(self, **opts):
            seen.append(opts)
            return self

        def remote(self, *a):
            raise RuntimeError("stop after options")

    monkeypatch.setattr(ray, "remote", lambda f: FakeRemote())
    monkeypatch.setattr(ex, "_alive_nodes", lambda: [{"CPU": 8.0, "GPU": 1.0}, {"CPU": 4.0}])
    for cfg in (RunConfig(backend="llm"), RunConfig(backend="llm", device="cuda")):
        with pytest.raises(RuntimeError, match="stop after options"):
            ex._run_ray([(LLMAdapter(), cfg)], lambda r: None)
    # an llm run on cpu takes all of the smallest node's CPUs; on cuda one CPU and the GPU
    assert [(o["num_cpus"], o["num_gpus"]) for o in seen] == [(4, 0), (1, 1)]


def test_a_request_no_node_can_hold_fails_in_one_line():
    gpu_run = [{"num_cpus": 1, "num_gpus": 1}]
    with pytest.raises(StudiesError, match=r"asking for 1 CPU and 1 GPU \(alive nodes: 2 CPU/0 GPU\)"):
        ex._check_feasible(gpu_run, [{"CPU": 2.0}])
    with pytest.raises(StudiesError, match="asking for 16 CPU"):
        ex._check_feasible([{"num_cpus": 16, "num_gpus": 0}], [{"CPU": 8.0, "GPU": 1.0}])
    ex._check_feasible(gpu_run, [{"CPU": 2.0}, {"CPU": 1.0, "GPU": 1.0}])  # one node that can: no error


def test_ship_code_without_the_ray_executor_is_bad_input(tmp_path):
    from click.testing import CliRunner

    from isocompute.cli import main

    r = CliRunner().invoke(main, ["sweep", "n-vs-m", "--backend", "fake", "--n", "2", "--bp", "4", "--budget",
                                  "64", "--ship-code", "--out", str(tmp_path / "out")])
    assert r.exit_code == 2 and r.stderr.strip() == "error: --ship-code is for --executor ray", r.output
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("mode, names", [
    (None, ["no token was found", "~/.ray/auth_token", "RAY_AUTH_TOKEN", "RAY_AUTH_MODE=disabled"]),
    ("token", ["refused this machine's auth token", "ray get-auth-token"]),
    ("disabled", ["RAY_AUTH_MODE=disabled here", "unset RAY_AUTH_MODE"]),
])
def test_auth_refusal_names_the_setting(monkeypatch, mode, names):
    if mode is None:
        monkeypatch.delenv("RAY_AUTH_MODE", raising=False)
    else:
        monkeypatch.setenv("RAY_AUTH_MODE", mode)
    msg = str(ex._auth_error("127.0.0.2:6399"))
    assert "\n" not in msg and msg.startswith("the Ray cluster at 127.0.0.2:6399")
    assert all(n in msg for n in names), msg


def test_an_auth_failure_is_recognised_down_the_exception_chain():
    try:
        try:
            raise RuntimeError("Failed to connect to GCS: RPC error: InvalidAuthToken: token is missing")
        except RuntimeError as e:
            raise ConnectionError("Failed to connect to Ray cluster at 127.0.0.2:6399") from e
    except ConnectionError as e:
        assert ex._is_auth_failure(e)
    assert not ex._is_auth_failure(ConnectionError("Failed to connect to Ray cluster"))


def test_no_address_is_ray_address_or_a_new_local_instance(monkeypatch):
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    assert ex._resolve_address(None) == "local"  # not the cluster /tmp/ray/ray_current_cluster names
    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.2:6399")
    assert ex._resolve_address(None) == "127.0.0.2:6399" and ex._resolve_address("auto") == "auto"


@pytest.mark.slow
def test_ship_code_puts_the_shipped_packages_on_the_workers(tmp_path, local_ray, monkeypatch):
    """Last in this file: it needs a Ray session of its own (Ray uploads py_modules only in ray.init). Ray
    also puts the driver's working directory on the workers' sys.path, ahead of everything: run from
    elsewhere than the checkout, as a driver whose directory the remote nodes do not have."""
    monkeypatch.chdir(tmp_path)
    cfgs = n_vs_m(RunConfig(backend="timed", bp=4, budget=2**10, n_evals=6), [2, 4], seeds=1)
    with ResultStore(tmp_path / "refused") as st, pytest.raises(StudiesError, match="--ship-code needs"):
        run_sweep(cfgs, st, executor="ray", progress=False, ship_code=True)  # the fixture's Ray is up
    ray.shutdown()
    loc, rem = _both(tmp_path, cfgs, ship_code=True)  # starts (and stops) a local instance with the packages
    assert rem.done == loc.done == 2 and not ray.is_initialized()
    _tables_equal(tmp_path / "ray", tmp_path / "local")
    for info in _infos(tmp_path / "ray").values():
        for key in ("studies_file", "sandbox_file"):
            path = Path(info[key])
            assert "runtime_resources" in path.parts and REPO not in path.parents, path
    shipped = [Path(p).name for p in ex.code_runtime_env()["py_modules"]]
    assert shipped == ["studies", "sandbox", "llm_backend"]

