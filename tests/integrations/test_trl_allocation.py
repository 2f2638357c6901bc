"""IsoComputeGRPOTrainer on real TRL 1.16 with the shipped tiny LM (loaded as LlamaForCausalLM, TRL's default
transformers generation, CPU, seconds a run): an n schedule changes the generation at its declared step, a
per-prompt-n run trains on the project's own group advantages, a DAPO-refill run counts what it generated
beyond what it trained, a plain run resumed at another n is recorded as what it is, and `isocompute fit`
reads each run's output at its true compute. What is counted here is counted from the batches TRL built
(the prompts the reward function saw, the batch the trainer returned), never from the config."""

from __future__ import annotations

import itertools
import json
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

pytest.importorskip("trl")

from datasets import Dataset  # noqa: E402
from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: E402
from trl import GRPOConfig, GRPOTrainer  # noqa: E402

from isocompute.cli import main  # noqa: E402
from isocompute.integrations.allocation import AllocationError, NSchedule  # noqa: E402
from isocompute.integrations.trl import IsoComputeCallback  # noqa: E402
from isocompute.integrations.trl_grpo import IsoComputeGRPOTrainer  # noqa: E402
from llm_backend.loss import group_advantages  # noqa: E402
from studies.io import load_table  # noqa: E402

TINY = Path(__file__).resolve().parents[2] / "llm_backend" / "models" / "tiny"
PROMPTS = [f"{a}+{b}=" for a, b in [(13, 27), (41, 58), (66, 12), (35, 44), (72, 19), (24, 63), (50, 37),
                                       (88, 11)]]
"""Two-digit sums: the tiny LM's pass@1 on them is spread over (0, 1), so groups differ."""


def sum_reward(prompts, completions, **kwargs):
    """1 when the completion is the sum, else 0."""
    out = []
    for p, c in zip(prompts, completions, strict=True):
        a, b = p.rstrip("=").split("+")
        out.append(float(c.strip() == str(int(a) + int(b))))
    return out


class Seen:
    """A reward function that records each batch TRL scores: the steps done, the prompts, the rewards."""

    __name__ = "sum_reward"

    def __init__(self):
        self.calls: list[tuple[int, list[str], list[float]]] = []

    def __call__(self, prompts, completions, trainer_state=None, **kwargs):
        r = sum_reward(prompts, completions)
        if trainer_state is not None and trainer_state.global_step is not None:
            self.calls.append((int(trainer_state.global_step), list(prompts), r))
        return r


class Spy(IsoComputeGRPOTrainer):
    """Keeps every training batch the trainer hands to TRL's loss."""

    def _allocated_step(self):
        batch = super()._allocated_step()
        self.batches = [*getattr(self, "batches", []), {k: v for k, v in batch.items()}]
        return batch


def config(out: Path, n: int, bp: int, steps: int, **kw) -> GRPOConfig:
    return GRPOConfig(output_dir=str(out), num_generations=n, per_device_train_batch_size=bp * n,
                      max_completion_length=4, max_steps=steps, logging_steps=1, save_strategy="no",
                      report_to=[], learning_rate=1e-3, use_cpu=True, seed=0, data_seed=0, disable_tqdm=True,
                      temperature=1.0, **kw)


def train(out: Path, allocation, n=4, bp=2, steps=5, prompts=PROMPTS, cls=Spy, **kw):
    seen = Seen()
    tok = AutoTokenizer.from_pretrained(TINY)
    trainer = cls(model=AutoModelForCausalLM.from_pretrained(TINY), reward_funcs=seen,
                  args=config(out, n, bp, steps), train_dataset=Dataset.from_dict({"prompt": prompts}),
                  processing_class=tok, allocation=allocation, **kw)
    trainer.train()
    trainer.save_state()
    return trainer, seen


def fit_json(*argv) -> tuple[int, dict | str]:
    r = CliRunner().invoke(main, ["fit", *map(str, argv), "--metric", "batch_reward", "--json"])
    return r.exit_code, (json.loads(r.stdout) if r.exit_code == 0 else r.output)


@pytest.fixture(scope="module")
def schedule_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("sched") / "n4to16"
    trainer, seen = train(out, NSchedule.at_steps({0: 4, 3: 16}), lr_rule="sqrt")
    return out, trainer, seen


def test_an_n_schedule_changes_the_generation_exactly_at_its_step(schedule_run):
    out, trainer, seen = schedule_run
    per_step = {}
    for step, prompts, _ in seen.calls:
        per_step.setdefault(step, Counter()).update(prompts)
    assert sorted(per_step) == [0, 1, 2, 3, 4]
    for step, counts in per_step.items():  # completions per prompt, counted from the scored batch
        assert sorted(counts.values()) == ([4, 4] if step < 3 else [16, 16]), (step, counts)
    rows = [len(b["completion_ids"]) for b in trainer.batches]
    assert rows == [8, 8, 8, 32, 32]  # the batches TRL trained on
    t = load_table(out)
    np.testing.assert_array_equal(t["n"], [4, 4, 4, 16, 16])
    np.testing.assert_array_equal(t["bp"], [2] * 5)
    np.testing.assert_array_equal(t["compute"], np.cumsum([len(p) for _, p, _ in seen.calls]))
    np.testing.assert_array_equal(t["rollouts_trained"], np.cumsum(rows))
    assert (t["allocator"] == "n-schedule:4@step0,16@step3").all()
    # the sqrt rule: the scheduler's linear decay, times sqrt(32 / 8) = 2 once n = 16
    lr = t["lr"].to_numpy()
    decay = 1e-3 * (1 - np.arange(5) / 5)
    np.testing.assert_allclose(lr, decay * np.array([1, 1, 1, 2, 2]), rtol=1e-9)


def test_fit_reads_the_schedule_at_its_true_compute_and_keeps_it_one_curve(schedule_run):
    out, _, seen = schedule_run
    code, rep = fit_json(out, "--by", "allocator")
    assert code == 0, rep
    assert [c["allocator"] for c in rep["curves"]] == ["n-schedule:4@step0,16@step3"]
    total = sum(len(p) for _, p, _ in seen.calls)
    assert max(f["compute"] for f in rep["frontier"]) == pytest.approx(total)
    code, msg = fit_json(out)  # --by n would split one run into two curves
    assert code == 2 and "changes n within the run (4, 16" in msg and "--by allocator" in msg


def test_per_prompt_n_trains_on_the_projects_group_advantages(tmp_path):
    out = tmp_path / "knap"
    trainer, seen = train(out, "knapsack:nmin=2,nmax=12", prompts=PROMPTS[:4], steps=6)
    unequal = 0
    for batch, (_, prompts, rewards) in zip(trainer.batches, seen.calls, strict=True):
        sizes = [len(list(g)) for _, g in itertools.groupby(prompts)]
        assert sum(sizes) == 8 and len(batch["advantages"]) == 8  # sum n_i = bp * n
        unequal += len(set(sizes)) > 1
        groups, off = [], 0
        for k in sizes:
            groups.append(rewards[off:off + k])
            off += k
        want = group_advantages(groups, scale_rewards="group", adv_std="sample", adv_eps=1e-4)
        np.testing.assert_allclose(batch["advantages"].numpy(), want, atol=1e-6, rtol=0)
    assert unequal >= 2, "knapsack gave every prompt the same n: the test saw no unequal groups"
    t = load_table(out)
    assert (t["n"] == 4).all() and (t["allocator"] == "knapsack:nmin=2,nmax=12").all()
    np.testing.assert_array_equal(t["compute"], 8 * np.arange(1, 7))
    assert t["isocompute/n_max"].max() > t["isocompute/n_min"].min()
    code, rep = fit_json(out)
    assert code == 0, rep


def test_dapo_refills_are_compute_that_trains_nothing(tmp_path):
    out = tmp_path / "dapo"
    trainer, seen = train(out, "dynamic-sampling:rounds=4", steps=5)
    generated = np.cumsum([sum(len(p) for s, p, _ in seen.calls if s == k) for k in range(5)])
    trained = np.cumsum([len(b["completion_ids"]) for b in trainer.batches])
    t = load_table(out)
    np.testing.assert_array_equal(t["compute"], generated)
    np.testing.assert_array_equal(t["rollouts_trained"], trained)
    assert t["compute"].iloc[-1] > t["rollouts_trained"].iloc[-1]  # the dropped groups were paid for
    for b in trainer.batches:  # only groups with a signal are trained on
        adv = b["advantages"].numpy()
        assert np.all(np.abs(adv.reshape(-1, 4)).sum(axis=1) > 0)
    code, rep = fit_json(out)
    assert code == 0, rep
    assert max(f["compute"] for f in rep["frontier"]) == pytest.approx(generated[-1])


def test_a_plain_run_resumed_at_another_n_is_recorded_as_a_schedule(tmp_path):
    out = tmp_path / "resumed"
    tok = AutoTokenizer.from_pretrained(TINY)
    data = Dataset.from_dict({"prompt": PROMPTS})

    def plain(n, steps, resume=None):
        args = config(out, n, 2, steps)
        args.save_strategy, args.save_steps = "steps", 2
        tr = GRPOTrainer(model=AutoModelForCausalLM.from_pretrained(TINY), reward_funcs=sum_reward, args=args,
                         train_dataset=data, processing_class=tok, callbacks=[IsoComputeCallback()])
        tr.train(resume_from_checkpoint=resume)
        tr.save_state()

    plain(4, 2)
    plain(8, 4, resume=str(out / "checkpoint-2"))
    live = pd.read_parquet(out / "isocompute.parquet")
    t = load_table(out / "trainer_state.json")
    pd.testing.assert_frame_equal(live.reset_index(drop=True), t, check_dtype=False)
    np.testing.assert_array_equal(t["n"], [4, 4, 8, 8])
    np.testing.assert_array_equal(t["compute"], [8, 16, 32, 48])  # not 4 x 16: what each step generated
    assert (t["allocator"] == "n-schedule:4@step0,8@step2").all()
    code, msg = fit_json(out / "trainer_state.json")
    assert code == 2 and "changes n within the run (4, 8" in msg
    code, rep = fit_json(out / "trainer_state.json", "--by", "allocator")
    assert code == 0, rep


@pytest.mark.parametrize("allocation, change, match", [
    ("knapsack", {"use_vllm": True, "vllm_mode": "server"}, "vLLM server mode generates one n"),
    ("knapsack", {"multi_objective_aggregation": "normalize_then_sum"}, "normalize_then_sum"),
    ("dynamic-sampling", {"gradient_accumulation_steps": 2}, "steps_per_generation=2"),
    (NSchedule.at_steps({0: 8, 2: 16}), {}, "num_generations 4 is not the schedule's first n 8"),
    (NSchedule.at_fractions({0: 4, 0.5: 16}), {}, "needs budget="),
    (NSchedule.at_steps({0: 4, 2: 3}, fixed="rollouts"), {}, "do not split into groups of n = 3"),
    ("variance", {}, "not implemented on the llm backend"),
])
def test_settings_it_cannot_serve_are_one_line_and_write_nothing(tmp_path, allocation, change, match):
    out = tmp_path / "refused"
    args = config(out, 4, 2, 2)
    for k, v in change.items():
        setattr(args, k, v)
    if "gradient_accumulation_steps" in change:
        args.steps_per_generation = 2
    with pytest.raises(AllocationError, match=match) as e:
        IsoComputeGRPOTrainer(model=AutoModelForCausalLM.from_pretrained(TINY), reward_funcs=sum_reward,
                              args=args, train_dataset=Dataset.from_dict({"prompt": PROMPTS}),
                              processing_class=AutoTokenizer.from_pretrained(TINY), allocation=allocation)
    assert "\n" not in str(e.value)
    assert not out.exists()


def test_a_resumed_trainer_continues_its_schedule_stream_and_counts(tmp_path):
    """Fixed rollouts per step (bp 2 x n 4, then 1 x 8): a run stopped at a checkpoint after step 2 and
    resumed draws the prompts the uninterrupted run drew and counts on from the rollouts it had spent."""
    sched = NSchedule.at_steps({0: 4, 2: 8}, fixed="rollouts")
    _, whole = train(tmp_path / "whole", sched, steps=4)
    out = tmp_path / "resumed"
    data = Dataset.from_dict({"prompt": PROMPTS})
    seen = Seen()
    for steps, resume in ((2, None), (4, str(out / "checkpoint-2"))):
        args = config(out, 4, 2, steps)
        args.save_strategy, args.save_steps = "steps", 2
        tr = IsoComputeGRPOTrainer(model=AutoModelForCausalLM.from_pretrained(TINY), reward_funcs=seen,
                                   args=args, train_dataset=data, allocation=sched,
                                   processing_class=AutoTokenizer.from_pretrained(TINY))
        tr.train(resume_from_checkpoint=resume)
        tr.save_state()
    assert (out / "checkpoint-2" / "isocompute_trainer.json").exists()
    counts = [sorted(Counter(p).values()) for _, p, _ in seen.calls]
    assert counts == [[4, 4], [4, 4], [8], [8]]
    assert [set(p) for _, p, _ in seen.calls] == [set(p) for _, p, _ in whole.calls]
    t = load_table(out)
    np.testing.assert_array_equal(t["compute"], [8, 16, 24, 32])
    np.testing.assert_array_equal(t["bp"], [2, 2, 1, 1])
    assert (t["allocator"] == "n-schedule:4@step0,8@step2").all()


def test_training_ends_at_the_last_step_the_budget_pays_for(tmp_path):
    trainer, seen = train(tmp_path / "budget", "fixed", steps=50, budget=44)  # 8 rollouts a step
    assert trainer.state.global_step == 5 and len(seen.calls) == 5
    assert load_table(tmp_path / "budget")["compute"].iloc[-1] == 40


@pytest.mark.parametrize("allocation, kw", [("pilot-commit", {}), ("skip-zero-var:p=1", {}), ("dynamo", {}),
                                            ("schedule:double@0.5", {"budget": 32})])
def test_every_allocator_of_the_llm_backend_runs_in_trl_and_counts_its_draws(tmp_path, allocation, kw):
    trainer, seen = train(tmp_path / "a", allocation, steps=3, prompts=PROMPTS[:4], **kw)
    t = load_table(tmp_path / "a")
    generated = [sum(len(p) for s, p, _ in seen.calls if s == k) for k in range(len(trainer.batches))]
    np.testing.assert_array_equal(t["compute"], np.cumsum(generated))
    trained = [len(b["advantages"]) for b in trainer.batches]
    np.testing.assert_array_equal(t["rollouts_trained"], np.cumsum(trained))
    assert (t["allocator"] == allocation).all()
    if "budget" in kw:  # half the budget spent after two steps of 2 x 4: the third draws 2 x 8
        assert generated == [8, 8, 16]
