"""`isocompute plan --emit trl|verl` and the plan's learning rate (studies.fit.emit): the YAML loads as TRL's
GRPOConfig for five budgets, the verl overrides pass verl's batch checks (written out here as arithmetic),
the lr follows the chosen rule from the pilots' own lr, and an n schedule is emitted where the pilots' n*
rises to the recommendation."""

import json
import math

import numpy as np
import pytest
from click.testing import CliRunner
from synthetic_curves import synthetic_table

from isocompute.cli import main
from isocompute.integrations.allocation import NSchedule
from studies import cli
from studies.fit import emit
from studies.fit.plan import make_plan

SPECS = {2: (0.1, 0.55, 2e3, 1.5), 4: (0.1, 0.65, 5e3, 1.5), 8: (0.1, 0.75, 1.5e4, 1.5),
         16: (0.1, 0.85, 5e4, 1.5)}
"""Larger n: higher plateau, reached later (as tests/studies/test_plan.py): n* rises with C."""
BUDGETS = ("3e4", "1e5", "3e5", "1e6", "4e6")
LR = 1e-3


@pytest.fixture(scope="module")
def pilots(tmp_path_factory):
    t = synthetic_table(SPECS, seeds=4, points=40, c_max=1e6, bp=32, noise=0.003,
                        rng=np.random.default_rng(1))
    t["lr"] = LR
    f = tmp_path_factory.mktemp("pilots") / "pilots.csv"
    t.to_csv(f, index=False)
    return t, f


def plan_cli(f, *argv):
    return CliRunner().invoke(main, ["plan", str(f), "--bootstrap", "5", *argv])


def test_the_cli_choices_are_the_emit_modules():
    assert cli.EMITS == emit.EMITS and cli.PLAN_LR_RULES == emit.PLAN_LR_RULES


@pytest.mark.parametrize("budget", BUDGETS)
def test_emit_trl_loads_as_a_grpo_config(pilots, budget, tmp_path):
    trl = pytest.importorskip("trl")
    import yaml  # a dependency of trl's
    _, f = pilots
    r = plan_cli(f, "--budget", budget, "--emit", "trl")
    assert r.exit_code == 0, r.output
    fields = yaml.safe_load(r.stdout)  # stdout is the config file; the plan went to stderr
    assert "recommended: n = " in r.stderr and "recommended" not in r.stdout
    cfg = trl.GRPOConfig(output_dir=str(tmp_path / "out"), use_cpu=True, report_to=[], **fields)
    plan = json.loads(plan_cli(f, "--budget", budget, "--emit", "trl", "--json").stdout)
    rec, sched = plan["recommended"], plan["schedule"]
    n0 = sched["phases"][0][1] if sched else rec["n"]
    assert cfg.num_generations == n0 and cfg.steps_per_generation == 1
    assert cfg.generation_batch_size == rec["bp"] * n0 == cfg.per_device_train_batch_size
    assert plan["emit"] == {"trainer": "trl", "fields": fields}
    # the steps the budget pays for, phase by phase, until the next would exceed it
    spent, steps = 0, 0
    while True:
        n = max(k for c, k in sched["phases"] if spent >= c) if sched else rec["n"]
        if spent + rec["bp"] * n > float(budget):
            break
        spent, steps = spent + rec["bp"] * n, steps + 1
    assert cfg.max_steps == steps > 0
    # sqrt rule from the pilots' lr at the recommended n (batch bp n), carried to the first phase's batch
    assert cfg.learning_rate == pytest.approx(LR * math.sqrt(n0 / rec["n"]))
    if sched:
        s = NSchedule.from_plan(plan)
        assert s.unit == "compute" and s.n0 == n0 and s.phases[-1][1] == rec["n"]


@pytest.mark.parametrize("budget", BUDGETS)
@pytest.mark.parametrize("gpus", [1, 4, 8])
def test_emit_verl_passes_verls_batch_checks(pilots, budget, gpus):
    _, f = pilots
    r = plan_cli(f, "--budget", budget, "--emit", "verl", "--gpus", str(gpus))
    assert r.exit_code == 0, r.output
    o = dict(line.split("=", 1) for line in r.stdout.splitlines() if line and not line.startswith("#"))
    tbs, n = int(o["data.train_batch_size"]), int(o["actor_rollout_ref.rollout.n"])
    mini = int(o["actor_rollout_ref.actor.ppo_mini_batch_size"])
    micro = int(o["actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu"])
    g = int(o["trainer.n_gpus_per_node"]) * int(o["trainer.nnodes"])
    assert g == gpus
    # ray_trainer.py _validate_config: real_train_batch_size = train_batch_size x rollout.n divisible by the
    # minimal batch (n_gpus under FSDP); train_batch_size >= ppo_mini_batch_size
    assert (tbs * n) % g == 0 and tbs >= mini
    # fsdp_workers.py: ppo_mini_batch_size x n // n_gpus > 0, divisible by ppo_micro_batch_size_per_gpu
    normalised = mini * n // g
    assert normalised > 0 and normalised % micro == 0 and normalised // micro > 0
    plan = json.loads(plan_cli(f, "--budget", budget, "--json").stdout)
    rec = plan["recommended"]
    assert (tbs, n, int(o["trainer.total_training_steps"])) == (rec["bp"], rec["n"], rec["m"])
    assert float(o["actor_rollout_ref.actor.optim.lr"]) == pytest.approx(plan["lr"]["lr"])
    assert emit.verl_violations(o) == []


def test_verl_checks_fail_where_verl_would(pilots):
    _, f = pilots
    r = plan_cli(f, "--budget", "1e6", "--emit", "verl", "--gpus", "3")  # 32 x 16 is not a multiple of 3
    assert r.exit_code == 2 and r.stdout == ""
    errors = [line for line in r.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "divisible by the 3 GPUs" in errors[0]
    bad = {"data.train_batch_size": 8, "actor_rollout_ref.rollout.n": 4,
           "actor_rollout_ref.actor.ppo_mini_batch_size": 16,
           "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu": 3, "trainer.n_gpus_per_node": 1}
    found = emit.verl_violations(bad)
    assert any("must be >= ppo_mini_batch_size" in v for v in found)
    assert any("divisible by ppo_micro_batch_size_per_gpu 3" in v for v in found)


def test_the_plan_prints_its_lr_under_the_chosen_rule(pilots):
    t, f = pilots
    # bp capped at 8: the batch is 4x smaller than the pilots' (32): sqrt halves the lr, constant keeps it
    p = make_plan(t, 1e6, bp_max=8, bootstrap=5, lr_rule="sqrt")
    assert p["lr"]["pilot_lr"] == LR and p["lr"]["pilot_batch"] == 32 * p["recommended"]["n"]
    assert p["lr"]["lr"] == pytest.approx(LR / 2)
    assert make_plan(t, 1e6, bp_max=8, bootstrap=5, lr_rule="constant")["lr"]["lr"] == LR
    r = plan_cli(f, "--budget", "1e6", "--bp-max", "8")
    assert r.exit_code == 0 and f"learning rate {LR / 2:.4g} (sqrt rule from the pilots' 0.001" in r.output
    no_lr = t.drop(columns=["lr"])
    p = make_plan(no_lr, 1e6, bootstrap=5)
    assert p["lr"]["lr"] is None and any("log no lr; give --lr" in w for w in p["warnings"])
    assert make_plan(no_lr, 1e6, bootstrap=5, lr=2e-3, lr_rule="constant")["lr"]["lr"] == 2e-3


def test_the_schedule_follows_the_pilots_n_star_and_ends_at_the_recommendation(pilots):
    t, _ = pilots
    p = make_plan(t, 1e6, bootstrap=5)
    phases = p["schedule"]["phases"]
    ns = [n for _, n in phases]
    assert ns == sorted(set(ns)) and ns[-1] == p["recommended"]["n"] == 16 and len(ns) >= 3
    starts = [c for c, _ in phases]
    assert starts[0] == 0 and starts == sorted(starts) and starts[-1] < 1e6
    flat = synthetic_table({2: SPECS[16], 4: SPECS[16]}, seeds=3, points=30, c_max=1e6, bp=32, noise=0.003,
                           rng=np.random.default_rng(2))
    assert make_plan(flat, 1e6, bootstrap=5)["schedule"] is None  # n* does not rise: no schedule
