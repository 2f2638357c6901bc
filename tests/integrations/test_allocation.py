"""The data side of allocation inside TRL, without TRL: n schedules and their labels
(isocompute.integrations.allocation), the lr rule's factor, the reader of per-step records
(studies.readers.trl.log_history_to_table) and how a table with a schedule is cleaned and kept one curve
(studies.io)."""

import math

import numpy as np
import pandas as pd
import pytest

from isocompute.integrations.allocation import AllocationError, LRRule, NSchedule, segments_label
from studies.config import StudiesError
from studies.io import check_by_constant, clean_external, scheduled_runs
from studies.readers.trl import LOGGED, Geometry, log_history_to_table


def test_a_schedule_in_steps_gives_n_by_steps_done():
    s = NSchedule.at_steps({0: 4, 3: 16})
    assert [s.n_at(k, 0, None) for k in range(6)] == [4, 4, 4, 16, 16, 16]
    assert s.label == "n-schedule:4@step0,16@step3" and s.n0 == 4
    assert s.bp_for(16, 8) == 8  # prompts fixed: the batch grows with n


def test_shares_of_the_budget_and_rollouts_spent():
    s = NSchedule.at_fractions({0: 2, 0.25: 4, 0.5: 8})
    assert [s.n_at(0, c, 1000) for c in (0, 249, 250, 499, 500, 999)] == [2, 2, 4, 4, 8, 8]
    assert s.label == "n-schedule:2@0%,4@25%,8@50%"
    with pytest.raises(AllocationError, match="needs the trainer's budget"):
        s.n_at(0, 10, None)
    c = NSchedule(((0, 2), (4096, 4)), "compute")
    assert (c.n_at(99, 4095, None), c.n_at(0, 4096, None)) == (2, 4) and c.label == "n-schedule:2@C0,4@C4096"


def test_fixed_rollouts_trade_prompts_for_n():
    s = NSchedule.at_steps({0: 4, 10: 16}, fixed="rollouts")
    assert (s.bp_for(4, 16), s.bp_for(16, 16)) == (16, 4)
    s.check(16, steps_per_generation=4)
    with pytest.raises(AllocationError, match="do not split into groups of n = 16"):
        s.check(2)  # 8 rollouts a step are no group of 16
    with pytest.raises(AllocationError, match="steps_per_generation = 3"):
        NSchedule.at_steps({0: 4}).check(4, steps_per_generation=3)


@pytest.mark.parametrize("phases, unit, fixed, match", [
    (((1, 4),), "steps", "prompts", "starts at 0"),
    (((0, 4), (5, 8), (5, 16)), "steps", "prompts", "must increase"),
    (((0, 4), (2, 1)), "steps", "prompts", "n >= 2"),
    (((0, 4), (1.0, 8)), "fraction", "prompts", "below 1"),
    (((0, 4), (2.5, 8)), "steps", "prompts", "whole steps"),
    (((0, 4),), "epochs", "prompts", "unknown schedule unit"),
    (((0, 4),), "steps", "tokens", "unknown fixed"),
])
def test_bad_schedules_are_one_line(phases, unit, fixed, match):
    with pytest.raises(AllocationError, match=match) as e:
        NSchedule(phases, unit, fixed)
    assert "\n" not in str(e.value)


def test_a_plan_becomes_a_schedule():
    plan = {"recommended": {"n": 16}, "schedule": {"unit": "compute", "phases": [[0.0, 4], [5000.0, 16]]}}
    s = NSchedule.from_plan(plan)
    assert s.unit == "compute" and s.phases == ((0.0, 4), (5000.0, 16))
    assert NSchedule.from_plan({"recommended": {"n": 8}, "schedule": None}).label == "fixed-n8"


def test_the_lr_rule_scales_with_the_batch():
    assert LRRule("sqrt").factor(256, 64) == pytest.approx(2.0)
    assert LRRule("sqrt", ref_batch=16).factor(256, 64) == pytest.approx(4.0)
    assert LRRule("constant").factor(256, 64) == 1.0
    with pytest.raises(AllocationError, match="linear is the simulator's only"):
        LRRule("linear")


def test_segments_label_is_fixed_or_a_schedule():
    assert segments_label([(0, 4)]) == "fixed-n4"
    assert segments_label([(0, 4), (20, 8)]) == "n-schedule:4@step0,8@step20"


def test_per_step_records_give_each_row_its_n_and_compute():
    # steps 1-2 at n = 4, 3-4 at 16 (counted by the trainer); an evaluation alone at step 5; no record at 0
    steps = ((1, 4, 8), (2, 4, 16), (3, 16, 48), (4, 16, 80))
    log = [{"step": 0, "eval_reward": 0.1},
           *({"step": k, "reward": 0.2, LOGGED["n"]: n, LOGGED["bp"]: 2, LOGGED["compute"]: c,
              LOGGED["rollouts_trained"]: c} for k, n, c in steps),
           {"step": 5, "eval_reward": 0.3}, {"step": 5, "train_runtime": 1.0}]
    t = log_history_to_table(log, Geometry(n=4, bp=2), "r", allocator="n-schedule:4@step0,16@step2")
    np.testing.assert_array_equal(t["m"], [0, 1, 2, 3, 4, 5])
    np.testing.assert_array_equal(t["n"], [4, 4, 4, 16, 16, 16])
    np.testing.assert_array_equal(t["batch"], [8, 8, 8, 32, 32, 32])
    np.testing.assert_array_equal(t["compute"], [0, 8, 16, 48, 80, 80])  # step 5 logged no step of its own
    assert math.isnan(t["rollouts_trained"].iloc[0]) and t["rollouts_trained"].iloc[-1] == 80
    assert (t["allocator"] == "n-schedule:4@step0,16@step2").all()
    plain = log_history_to_table([{"step": k, "reward": 0.1} for k in (1, 2)], Geometry(n=4, bp=2), "p")
    np.testing.assert_array_equal(plain["compute"], [8, 16])
    assert "allocator" not in plain.columns and "rollouts_trained" not in plain.columns


def table(run, ns, label):
    return pd.DataFrame({"run_id": run, "compute": np.arange(1, len(ns) + 1) * 10.0, "n": ns, "bp": 2,
                         "val_mean": 0.1, "allocator": label})


def test_a_scheduled_run_may_change_n_and_is_kept_one_curve():
    sched = table("s", [4, 4, 16], "n-schedule:4@step0,16@step2")
    both = pd.concat([sched, table("f", [4, 4, 4], "fixed-n4")], ignore_index=True)
    assert scheduled_runs(both) == {"s"}
    cleaned, _ = clean_external(both)
    assert len(cleaned) == 6
    check_by_constant(cleaned, "allocator")
    with pytest.raises(StudiesError, match=r"run s changes n within the run \(4, 16: n-schedule:4@step0,"
                                           r"16@step2\); one run is one curve: fit it --by allocator"):
        check_by_constant(cleaned, "n")
    with pytest.raises(StudiesError, match="has 2 values of n"):  # a fixed run cannot change n
        clean_external(table("f", [4, 8, 8], "fixed-n4"))
