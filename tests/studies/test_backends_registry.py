"""Backend registry and the sim adapter's mapping RunConfig -> SimConfig (docs/CONTRACTS.md)."""


import numpy as np
import pytest

from studies.backends import BACKENDS, SimAdapter, get_backend, tidy_pass1
from studies.config import RunConfig, StudiesError


def test_registry_answers_unknown_and_unavailable_backends_in_one_line():
    assert isinstance(get_backend("sim"), SimAdapter)
    if "llm" not in BACKENDS:
        with pytest.raises(StudiesError, match="^the llm backend is not available yet$"):
            get_backend("llm")
    with pytest.raises(StudiesError, match="unknown backend 'gpt'"):
        get_backend("gpt")


def test_sim_config_maps_shared_fields_and_keeps_engine_defaults():
    from sandbox.config import SimConfig

    cfg = RunConfig(model="interference", dataset="hard", n=16, bp=8, budget=4096, seed=2, problem_seed=5,
                    lr=0.03, kl_coef=0.1, d=64, options=(("K", 4), ("share", 1), ("snapshots", False)))
    sc = SimAdapter().sim_config(cfg)
    assert (sc.model, sc.dataset, sc.n, sc.bp, sc.budget, sc.seed, sc.problem_seed) == (
        "interference", "hard", 16, 8, 4096, 2, 5)
    assert (sc.lr, sc.kl_coef, sc.d, sc.K, sc.snapshots) == (0.03, 0.1, 64, 4, False)
    assert sc.share == 1.0 and isinstance(sc.share, float)
    default = SimConfig()
    assert (sc.optimizer, sc.lr_rule, sc.weight_decay) == (
        default.optimizer, default.lr_rule, default.weight_decay)


@pytest.mark.parametrize(
    ("cfg", "message"),
    [
        (RunConfig(model="transformer"), "unknown model 'transformer'"),
        (RunConfig(dataset="medium"), "unknown dataset 'medium'"),
        (RunConfig(options=(("bogus", 1),)), "unknown sim option 'bogus'"),
        (RunConfig(options=(("n", 4),)), "unknown sim option 'n'"),
        (RunConfig(options=(("K", 2.5),)), "option K must be an integer"),
        (RunConfig(options=(("snapshots", 1),)), "option snapshots must be true or false"),
        (RunConfig(options=(("K", 1),)), "K must be >= 2"),
        (RunConfig(options=(("d_val", 16),)), "unknown sim option 'd_val'"),
            (RunConfig(lm="smollm2"), "the sim backend has no setting lm"),
            (RunConfig(device="cuda"), "the simulator runs on the cpu only"),
    ],
)
def test_sim_adapter_turns_engine_errors_into_one_line_studies_errors(cfg, message):
    with pytest.raises(StudiesError, match=message) as e:
        SimAdapter().validate(cfg)
    assert "\n" not in str(e.value)


def test_tidy_pass1_layout():
    compute = np.array([0, 10, 20])
    train = np.arange(6, dtype=np.float32).reshape(3, 2) / 10
    val = np.ones((3, 4), dtype=np.float32)
    df = tidy_pass1("r", compute, {"train": train, "val": val, "missing": None})
    assert list(df.columns) == ["run_id", "compute", "split", "problem", "pass1"]
    assert len(df) == 3 * 2 + 3 * 4
    tr = df[df.split == "train"]
    assert tr.loc[(tr.compute == 10) & (tr.problem == 1), "pass1"].item() == pytest.approx(0.3)
    assert (df[df.split == "val"].pass1 == 1).all()


def test_sim_adapter_runs_the_simulator_and_adds_run_id():
    cfg = RunConfig(model="tabular", n=4, bp=8, budget=4096, d=32, n_evals=6,
                    d_val=16, options=(("dim", 8),))
    out = SimAdapter().run(cfg)
    t = out.table
    assert list(t.columns[:1]) == ["run_id"] and (t.run_id == cfg.run_id).all()
    for col in ("backend", "n", "bp", "batch", "m", "compute", "val_mean", "val_best_k", "val_worst_k"):
        assert col in t.columns
    assert t.compute.iloc[0] == 0 and (t.compute == t.m * cfg.batch).all()
    assert out.status in ("done", "diverged")
    assert set(out.pass1.split) == {"train", "val"}
    assert out.pass1.groupby(["compute", "split"]).size().to_dict()[(0, "train")] == 32
    again = SimAdapter().run(cfg)
    assert again.table.equals(t)  # same seed, same table (bit for bit)


def test_studies_imports_no_engine_until_a_run_needs_it():
    import subprocess
    import sys

    code = ("import sys, studies, studies.cli, studies.backends, studies.executors, studies.store, "
            "studies.io, studies.sweeps; from isocompute.cli import main; "
            "print(sorted(m for m in ('sandbox', 'numba', 'torch', 'llm_backend', 'ray') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
