"""Rollout allocators of the llm backend (llm_backend/allocators.py): each rule on hand-computed
cases, unequal groups through advantages / packing / the loss, and tiny real runs (the prepared SmolLM2,
hf engine) whose recorded compute and tokens equal what the engine actually generated."""

from __future__ import annotations

import numpy as np
import pytest

from isocompute.contract import allocrules
from llm_backend import allocators as al
from llm_backend.config import ConfigError, LLMConfig

# ------------------------------------------------------------------------------------- rules by hand


def test_history_records_rate_and_zero_variance_streak():
    h = al.History.empty(3)
    assert h.p.tolist() == [-1, -1, -1] and h.streak.tolist() == [0, 0, 0]
    h.record(0, [1, 0, 1, 1])
    assert h.p[0] == 0.75 and h.streak[0] == 0
    h.record(1, [0, 0])
    h.record(1, [0, 0, 0])
    assert h.p[1] == 0.0 and h.streak[1] == 2
    h.record(1, [1, 1], ema=0.5)  # EMA: 0.5 * 0 + 0.5 * 1
    assert h.p[1] == 0.5 and h.streak[1] == 3
    h.record(1, [1, 0])
    assert h.streak[1] == 0
    assert al.History.from_state(h.state()).p.tolist() == h.p.tolist()


def _ctx(d=6, bp=2, n=4, budget=64, spent=0, seed=0):
    return al.StepContext(1, spent, budget, n, bp, al.ProblemStream(seed, d), al.History.empty(d),
                          np.random.default_rng(0))


def test_problem_stream_is_the_fixed_paths_order():
    from llm_backend.problems import problem_order

    cfg = LLMConfig(n=2, bp=3, budget=64, seed=5, engine="hf")
    s = al.ProblemStream(5, 7)
    for step in range(1, 8):  # crosses epochs (d = 7 is no multiple of bp = 3)
        assert s.take(3) == problem_order(cfg, step, 7)


def test_knapsack_sizes_from_history_and_prior():
    a = al.make("knapsack", 4, 2)
    ctx = _ctx()
    assert a.propose(ctx).ns == [4, 4]  # both unseen: prior 0.5 each, equal split
    ctx = _ctx()
    ctx.history.p[:] = [0.5, 0.2, 0.5, 0.2, 0.5, 0.2]
    draw = a.propose(ctx)
    p = [float(ctx.history.p[g]) for g in draw.problems]
    want = [0, 0]
    allocrules.knapsack_alloc(p, 8, 2, 16, want)
    assert draw.ns == want and sum(draw.ns) == 8
    ctx = _ctx()
    ctx.history.p[:] = 0.0  # no value anywhere: the leftovers tie at p = 0, lowest index first
    assert al.make("knapsack:nmax=5", 4, 2).propose(ctx).ns == [5, 3]


def test_dynamic_sampling_keeps_groups_with_signal_and_refills():
    a = al.make("dynamic-sampling:rounds=3", 2, 2)
    ctx = _ctx(n=2, bp=2, budget=16)
    d0 = a.propose(ctx)
    assert d0.ns == [2, 2]
    assert a.keep(ctx, d0, [np.array([1.0, 1.0]), np.array([0.0, 1.0])]) == [False, True]
    ctx.drawn, ctx.kept, ctx.rounds = 4, 1, 1
    d1 = a.propose(ctx)  # one kept of bp = 2: refill with the next 2 problems of the stream
    assert d1 is not None and len(d1.problems) == 2
    assert a.keep(ctx, d1, [np.array([1.0, 0.0]), np.array([0.0, 1.0])]) == [True, False]  # first bp kept
    ctx.drawn, ctx.kept, ctx.rounds = 8, 2, 2
    assert a.propose(ctx) is None  # bp groups with signal
    ctx.kept = 1
    assert a.propose(ctx) is not None
    ctx.rounds = 3
    assert a.propose(ctx) is None  # `rounds` draws made
    ctx = _ctx(n=2, bp=2, budget=16, spent=8)
    ctx.drawn, ctx.kept, ctx.rounds = 4, 0, 1
    assert a.propose(ctx) is not None  # 8 + 4 + 4 <= 16
    ctx.spent = 9
    assert a.propose(ctx) is None  # a refill would exceed the budget


def test_skip_zero_var_skips_streaked_problems_before_rollouts():
    a = al.make("skip-zero-var:p=1", 4, 2)
    ctx = _ctx(d=8, bp=2)
    order = al.ProblemStream(0, 8).take(8)  # one epoch: each problem once
    ctx.history.streak[:] = 1
    ctx.history.streak[order[2]] = 0  # the only problem with signal last time
    ctx.history.streak[order[5]] = 0
    assert a.propose(ctx).problems == [order[2], order[5]]
    assert ctx.stream.pos == 6  # skipped problems cost a stream position, no rollouts
    ctx = _ctx(d=3, bp=2)
    ctx.history.streak[:] = 1  # everything streaked: at most d skips per draw, then take what comes
    assert len(a.propose(ctx).problems) == 2
    b = al.make("skip-zero-var:streak=2", 4, 2)
    ctx = _ctx(d=4, bp=2)
    ctx.history.streak[:] = 1  # below the streak threshold: nothing skipped, no random draw
    assert b.propose(ctx).problems == al.ProblemStream(0, 4).take(2)


def test_dynamo_sizes_from_the_counts_and_the_prior():
    a = al.make("dynamo", 4, 2)  # nmin 2, nmax 6
    assert a.propose(_ctx()).ns == [4, 4]  # both unseen: the prior's weight each, an even split
    ctx = _ctx()
    order = al.ProblemStream(0, 6).take(2)
    ctx.history.k[order] = [2, 0]  # 2 of 4 correct (weight 4/3) and 0 of 4 (the floor, 0.01)
    ctx.history.g[order] = [4, 4]
    assert a.propose(ctx).ns == [6, 2]  # nmax and nmin: the water level clips both


def test_pilot_commit_pilots_then_commits_the_kept_and_evicts_the_solved():
    a = al.make("pilot-commit:rounds=2", 8, 2)  # pilot 2, commit 6
    ctx = _ctx(d=4, bp=2, n=8, budget=1000)
    d0 = a.propose(ctx)
    assert d0.ns == [2, 2] and not d0.extends
    assert a.keep(ctx, d0, [np.array([1.0, 0.0]), np.array([1.0, 1.0])]) == [True, False]
    assert ctx.history.out[d0.problems[1]] and not ctx.history.out[d0.problems[0]]
    ctx.drawn, ctx.kept, ctx.rounds = 4, 1, 1
    ctx.draws.append(d0)
    d1 = a.propose(ctx)
    assert d1.extends and d1.problems == [d0.problems[0]] and d1.ns == [6]
    ctx.drawn, ctx.rounds = 10, 2
    ctx.draws.append(d1)
    d2 = a.propose(ctx)  # a second pilot round: the other two problems of the epoch
    assert d2.ns == [2, 2] and set(d2.problems) == set(range(4)) - set(d0.problems)
    assert a.keep(ctx, d2, [np.array([0.0, 0.0]), np.array([0.0, 0.0])]) == [False, False]  # too hard
    ctx.drawn, ctx.rounds = 14, 3
    ctx.draws.append(d2)
    assert a.propose(ctx) is None  # rounds=2 pilot rounds made: the step trains on one group
    assert a.propose(_ctx(d=4, bp=2, n=8, budget=1000, spent=985)) is None  # no room for bp n = 16
    assert a.propose(_ctx(d=4, bp=2, n=8, budget=1000, spent=984)) is not None


def test_schedule_doubles_n_at_compute_fractions_and_fits_the_budget():
    a = al.make("schedule:double@0.25,0.5", 8, 8)
    sizes = {spent: a.group_size(_ctx(bp=8, n=8, budget=1000, spent=spent)) for spent in (0, 249, 250, 600)}
    assert sizes == {0: 8, 249: 8, 250: 16, 600: 32}
    assert a.group_size(_ctx(bp=8, n=8, budget=1000, spent=900)) == 12  # the room left: 100 // 8
    assert a.propose(_ctx(bp=8, n=8, budget=1000, spent=990)) is None  # room for n = 1 only: the run ends
    assert a.propose(_ctx(bp=8, n=8, budget=1000, spent=900)).ns == [12] * 8


def test_fixed_allocator_and_budget_room():
    a = al.make("fixed", 4, 2)
    assert a.propose(_ctx(budget=64, spent=56)).ns == [4, 4]
    assert a.propose(_ctx(budget=64, spent=57)) is None


def test_specs_refused_in_one_line():
    for spec, msg in [("variance", "not implemented on the llm backend"), ("gvm", "llm backend has fixed"),
                      ("ada", "not implemented"), ("schedule:zv@0.5", "schedule:zv@T is not implemented"),
                      ("bogus", "unknown allocator 'bogus'"), ("knapsack:oracle=1", "true pass@1"),
                      ("knapsack:nmin=9", "nmin <= n"), ("schedule:double@2", "fractions in"),
                      ("dynamo:oracle=1", "dynamo:oracle=1 needs the true pass@1"),
                      ("pilot-commit:pilot=8", "2 <= pilot < n")]:
        with pytest.raises(ConfigError, match=msg) as e:
            LLMConfig(n=8, bp=2, budget=64, engine="hf", allocator=spec)
        assert "\n" not in str(e.value)
    assert LLMConfig(engine="hf").allocator == "fixed"


# ---------------------------------------------------------------------- unequal groups in the GRPO step

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")


def test_group_advantages_by_hand_and_equal_sizes_match_advantages():
    from llm_backend import loss

    a = loss.group_advantages([[1, 0], [1, 0, 0, 0]], adv_eps=0.0)
    # group 1: mean 0.5, sample std sqrt(0.5); group 2: mean 0.25, sample std sqrt(0.75 / 3) = 0.5
    np.testing.assert_allclose(a, [0.5 / 0.5**0.5, -0.5 / 0.5**0.5, 1.5, -0.5, -0.5, -0.5])
    b = loss.group_advantages([[1, 0], [1, 0, 0, 0], [1, 1, 1]], "batch", adv_eps=0.0)
    std = np.std([1, 0, 1, 0, 0, 0, 1, 1, 1], ddof=1)
    np.testing.assert_allclose(b, np.r_[[0.5, -0.5], [0.75, -0.25, -0.25, -0.25], [0, 0, 0]] / std)
    r = np.random.default_rng(0).integers(0, 2, (4, 3)).astype(float)
    for scale in ("group", "batch", "none"):
        want = loss.advantages(r, scale).reshape(-1)
        np.testing.assert_allclose(loss.group_advantages(list(r), scale), want)


def test_update_slices_follow_group_boundaries():
    from llm_backend import trainer

    assert trainer.update_slices([2, 3, 4], 2) == [slice(0, 2), slice(2, 9)]
    assert trainer.update_slices([2, 2, 2, 2], 2) == [slice(0, 4), slice(4, 8)]


def _unequal_groups(sizes=(2, 3, 1), seed=3):
    from test_grpo import VOCAB

    g = np.random.default_rng(seed)
    prompts, comps, elps = [], [], []
    for k in sizes:
        p = g.integers(1, VOCAB, size=g.integers(3, 7)).tolist()
        for _ in range(k):
            c = g.integers(1, VOCAB, size=g.integers(1, 6)).tolist()
            prompts.append(p)
            comps.append(c)
            elps.append((-3.0 + 0.3 * g.standard_normal(len(c))).tolist())
    return prompts, comps, elps, g.standard_normal(sum(sizes))


@pytest.mark.parametrize("loss_agg", ["token_mean", "seq_mean"])
def test_unequal_groups_packed_equal_padded_and_the_loss_convention(loss_agg):
    """Groups of sizes 2, 3, 1: the packed layout (group boundaries from `sizes`, short rows that split
    groups) gives the padded layout's loss and gradient; the loss is token_mean = sum over all tokens /
    all tokens, seq_mean = mean over all sequences (TRL / verl; group sizes do not reweight)."""
    from test_grpo import Cfg, tiny_llama

    from llm_backend import trainer
    from llm_backend.batch import make_padded_batch
    from llm_backend.packed import make_packed_batch

    sizes = [2, 3, 1]
    prompts, comps, elps, adv = _unequal_groups(sizes)
    cfg = Cfg(loss_agg=loss_agg, n=2, kl_coef=0.0, entropy_coef=0.0, tis_cap=0.0)
    out = {}
    for name in ("padded", "packed"):
        model = tiny_llama(0)
        if name == "padded":
            batch = make_padded_batch(prompts, comps, elps, adv, pad_id=0, sizes=sizes)
        else:
            batch = make_packed_batch(prompts, comps, elps, adv, sizes, row_tokens=9, micro_tokens=20)
            assert batch.group_starts() == [0, 2, 5] and batch.n == 0
        model.zero_grad()
        agg = trainer.backward(model, batch, cfg)
        out[name] = (agg["loss"], [p.grad.clone() for p in model.parameters()])
    assert out["packed"][0] == pytest.approx(out["padded"][0], rel=1e-5, abs=1e-7)
    for x, y in zip(out["padded"][1], out["packed"][1], strict=True):
        torch.testing.assert_close(y, x, atol=1e-6, rtol=1e-4)
    lens = np.array([len(c) for c in comps])
    want = -(adv * lens).sum() / lens.sum() if loss_agg == "token_mean" else -adv.mean()
    assert out["packed"][0] == pytest.approx(want, rel=1e-5)  # pg at the update: loss = -weighted mean A


def test_unequal_groups_ppo_minibatches_split_at_group_boundaries():
    from test_grpo import Cfg, tiny_llama

    from llm_backend import trainer
    from llm_backend.batch import make_padded_batch
    from llm_backend.packed import make_packed_batch

    sizes = [2, 3, 1]
    prompts, comps, elps, adv = _unequal_groups(sizes)
    cfg = Cfg(n=2, kl_coef=0.0, entropy_coef=0.0, objective="ppo", ppo_epochs=1, minibatches=2)
    params = {}
    for name in ("padded", "packed"):
        model = tiny_llama(0)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.0)
        if name == "padded":
            batch = make_padded_batch(prompts, comps, elps, adv, pad_id=0, sizes=sizes)
        else:
            batch = make_packed_batch(prompts, comps, elps, adv, sizes, row_tokens=9, micro_tokens=20)
        assert trainer.train_step(model, opt, batch, cfg)["updates"] == 2
        params[name] = [p.detach().clone() for p in model.parameters()]
    for x, y in zip(params["padded"], params["packed"], strict=True):
        torch.testing.assert_close(y, x, atol=2e-6, rtol=1e-5)
    with pytest.raises(ValueError, match="do not cover"):
        make_packed_batch(prompts, comps, elps, adv, [2, 3])
    with pytest.raises(ValueError, match="share one prompt"):
        make_packed_batch(prompts, comps, elps, adv, [3, 2, 1])


def test_draw_step_appends_the_commit_to_the_pilot_group(monkeypatch):
    """A Pilot-Commit step through the run loop's draw_step with a scripted engine: each kept problem trains
    on one group of n = pilot + commit rollouts, the all-correct problem is evicted, every drawn rollout
    counts, and the zero-variance share reads the merged groups."""
    from types import SimpleNamespace

    from llm_backend import loop, tasks
    from llm_backend.engines import Rollouts

    class Scripted:
        def generate(self, prompts, n, max_new_tokens, temperature=1.0, top_p=1.0, seed=0):
            out = Rollouts([], [], [], [], n)
            for _ in prompts:
                for j in range(n):
                    out.prompt_ids.append([1])
                    out.token_ids.append([j])
                    out.logprobs.append([-1.0])
                    out.texts.append(str(j))
            return out

    # answer "k": the first k rollouts of every draw of the problem are correct
    monkeypatch.setattr(tasks, "build_prompt", lambda tok, q: q)
    monkeypatch.setattr(tasks, "reward", lambda text, answer: float(int(text) < int(answer)))
    train = [SimpleNamespace(question=f"q{i}", answer=a) for i, a in enumerate("1201")]
    cfg = LLMConfig(n=8, bp=2, budget=10_000, seed=0, engine="hf", allocator="pilot-commit")
    state = loop.RunState(0, 0, 0, al.ProblemStream(0, 4), al.History.empty(4))
    assert al.ProblemStream(0, 4).take(4) == [2, 0, 1, 3]  # pilot rounds {2, 0} and {1, 3}
    drawn = loop.draw_step(al.make("pilot-commit", 8, 2), cfg, 1, state, Scripted(), None, train)
    # pilot 2, 0 -> commit 0 -> pilot 1, 3 -> commit 3: four draws, 2 x 2 x 2 + 2 x 6 rollouts
    assert drawn.info["rounds"] == 4 and drawn.rollouts == 20 == state.history.g.sum()
    assert [g.rewards.tolist() for g in drawn.kept] == [[1, 0, 1, 0, 0, 0, 0, 0]] * 2  # pilot + commit
    assert drawn.info["groups_drawn"] == 4 and drawn.info["n_max"] == 8 and drawn.info["n_min"] == 2
    assert drawn.zero_var_frac == 0.5  # problems 2 (all wrong) and 1 (all correct); the merged have signal
    assert state.history.out.tolist() == [False, True, False, False]  # 2 of 2 in the pilot: evicted


def test_generate_groups_puts_each_prompts_rollouts_back_in_order():
    from llm_backend.engines import Rollouts, generate_groups

    class Echo:
        calls: list = []

        def generate(self, prompts, n, max_new_tokens, temperature=1.0, top_p=1.0, seed=0):
            self.calls.append((list(prompts), n, seed))
            out = Rollouts([], [], [], [], n)
            for p in prompts:
                for j in range(n):
                    out.prompt_ids.append([len(p)])
                    out.token_ids.append([j])
                    out.logprobs.append([-1.0])
                    out.texts.append(f"{p}/{n}/{j}")
            return out

    e = Echo()
    ro = generate_groups(e, ["a", "b", "c"], [2, 3, 2], 4, seed=7)
    assert ro.texts == ["a/2/0", "a/2/1", "b/3/0", "b/3/1", "b/3/2", "c/2/0", "c/2/1"]
    assert ro.group_sizes == [2, 3, 2] and ro.num_tokens == 7
    assert [(c[0], c[1]) for c in e.calls] == [(["a", "c"], 2), (["b"], 3)]
    e.calls.clear()
    ro = generate_groups(e, ["a", "b"], [2, 2], 4, seed=7)  # equal sizes: the one-n call, its seed
    assert e.calls == [(["a", "b"], 2, 7)] and ro.group_sizes == [2, 2]


# ------------------------------------------------------------------ tiny real runs (hf engine, runner)

SPLITS = str(__import__("pathlib").Path(__file__).resolve().parents[2] / "docs" / "llm_study" / "gpu")


@pytest.fixture(scope="module")
def tiny_lm(tmp_path_factory, model_path):
    """A randomly initialised 2-layer Llama with the SmolLM2 tokenizer (chat template, vocabulary) saved as
    a local HF folder: the real runner, hf engine and GRPO step in seconds instead of minutes."""
    from transformers import LlamaConfig, LlamaForCausalLM

    from llm_backend.model import load_tokenizer

    tok = load_tokenizer(model_path)
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                      num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=512,
                      tie_word_embeddings=True, bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                      pad_token_id=tok.pad_token_id)
    out = tmp_path_factory.mktemp("tiny-lm")
    LlamaForCausalLM(cfg).save_pretrained(out)
    tok.save_pretrained(out)
    return str(out)


@pytest.fixture
def coin_reward(monkeypatch):
    """Reward = a fixed hash bit of the completion text, and always 1 on the split's first training problem
    (answer 8): a random model then gets groups with and without signal, and problems of different p (the
    accounting does not depend on what the reward means)."""
    import zlib

    from llm_backend import tasks

    def reward(text, answer):
        return 1.0 if str(answer) == "8" else float(zlib.crc32(text.encode()) % 2)

    monkeypatch.setattr(tasks, "reward", reward)


def tiny(lm, **kw):
    """bp 2 x n 4 for 4 fixed steps (budget 32), 6 new tokens, one validation problem with one sample; float32
    on every CPU (the accounting does not depend on the precision, and bf16 autocast, the default with AMX,
    doubled a run's time here: 9.2 against 4.6 s on the Intel Xeon at load ~3)."""
    base = dict(model=lm, engine="hf", dataset="easy", data_dir=SPLITS, bp=2, n=4, budget=32,
                max_new_tokens=6, k=1, d_val=1, n_evals=2, train_eval=False, lr=1e-3, seed=0,
                engine_dtype="float32", train_dtype="float32")
    return LLMConfig(**{**base, **kw})


@pytest.fixture
def counted(monkeypatch):
    """Counts the training rollouts and tokens the hf engine generates (evaluation calls left out)."""
    from llm_backend import evaluation
    from llm_backend.engines import HFEngine

    seen = {"rollouts": 0, "tokens": 0, "calls": 0, "eval": False}
    gen, evaluate = HFEngine.generate, evaluation.evaluate

    def generate(self, prompts, n, *a, **kw):
        ro = gen(self, prompts, n, *a, **kw)
        if not seen["eval"]:
            assert len(ro.token_ids) == len(prompts) * n
            seen["rollouts"] += len(ro.token_ids)
            seen["tokens"] += ro.num_tokens
            seen["calls"] += 1
        return ro

    def _evaluate(*a, **kw):
        seen["eval"] = True
        try:
            return evaluate(*a, **kw)
        finally:
            seen["eval"] = False

    monkeypatch.setattr(HFEngine, "generate", generate)
    monkeypatch.setattr(evaluation, "evaluate", _evaluate)
    return seen


def _params(res):
    return {k: v.detach().clone() for k, v in res.model.state_dict().items()}


def _same_tables(a, b):
    assert set(a) == set(b)
    for col in a:
        np.testing.assert_array_equal(a[col], b[col], err_msg=col)


def test_fixed_is_todays_path_and_a_no_op_allocator_reproduces_it(tiny_lm, coin_reward):
    """allocator "fixed" (explicit or the default) is the fixed path; skip-zero-var:p=0 (never skips) runs
    the allocator path with the same draws, and gives the same table and parameters bit for bit."""
    from llm_backend.loop import run

    default = run(tiny(tiny_lm))
    explicit = run(tiny(tiny_lm, allocator="fixed"))
    generic = run(tiny(tiny_lm, allocator="skip-zero-var:p=0"))
    assert default.table["compute"].tolist() == [0, 8, 32]  # eval_steps(4, 2) = 0, 1, 4
    assert any(s["grad_norm"] > 0 for s in default.steps)  # the runs moved: equality is not vacuous
    for other in (explicit, generic):
        _same_tables(default.table, other.table)
        pa, pb = _params(default), _params(other)
        assert all(torch.equal(pa[k], pb[k]) for k in pa)
    assert [s["rollouts"] for s in generic.steps] == [8, 8, 8, 8]


SPECS = ["knapsack", "dynamic-sampling", "skip-zero-var:p=1", "schedule:double@0.25", "dynamo",
         "pilot-commit"]


@pytest.mark.parametrize("spec", SPECS)
def test_recorded_compute_and_tokens_are_what_the_engine_generated(spec, tiny_lm, coin_reward, counted):
    from llm_backend.loop import run

    cfg = tiny(tiny_lm, allocator=spec, d=2)  # 2 training problems (p = 1 and p ~ 0.5): both every step
    res = run(cfg)
    assert res.status == "done"
    compute, tokens = res.table["compute"], res.table["tokens"]
    assert compute[-1] == counted["rollouts"] == sum(s["rollouts"] for s in res.steps)
    assert tokens[-1] == counted["tokens"]
    assert compute[0] == 0 and compute[-1] <= cfg.budget and list(compute) == sorted(set(compute))
    assert [s["compute"] for s in res.steps] == list(np.cumsum([s["rollouts"] for s in res.steps]))
    assert res.table["m"][-1] == len(res.steps)  # the last step is evaluated
    assert compute[1] >= 8 and all(s["compute"] < 8 for s in res.steps[: res.table["m"][1] - 1])
    if spec == "knapsack":  # every step spends bp * n, split over the problems within [nmin, nmax]
        assert all(s["rollouts"] == 8 and 2 <= s["n_min"] <= s["n_max"] <= 16 for s in res.steps)
        assert [s["n_min"] for s in res.steps[1:]] == [2, 2, 2]  # the p = 1 problem: nmin from step 2 on
        assert compute[-1] == 32
    if spec == "dynamic-sampling":
        assert all(s["groups_kept"] <= 2 and 1 <= s["rounds"] <= 4 for s in res.steps)
        assert all(s["rollouts"] == 8 * s["rounds"] for s in res.steps)
    if spec == "skip-zero-var:p=1":
        assert all(s["rollouts"] == 8 for s in res.steps)
    if spec == "dynamo":  # every step spends bp * n, split within [n/2, 3n/2]
        assert all(s["rollouts"] == 8 and 2 <= s["n_min"] <= s["n_max"] <= 6 for s in res.steps)
    if spec == "pilot-commit":  # pilot 2, commit 2: pilots of 2 x 2, a commit of 2 per kept group
        assert all(s["groups_kept"] <= 2 and s["rollouts"] == 2 * s["groups_drawn"] + 2 * s["groups_kept"]
                   for s in res.steps)
    if spec == "schedule:double@0.25":  # n 4 -> 8 once 8 of 32 rollouts are spent; the last step cut to fit
        assert [s["n_max"] for s in res.steps] == [4, 8, 4] and compute.tolist() == [0, 8, 32]


def test_allocator_run_resumes_from_a_checkpoint_to_the_same_end(tiny_lm, coin_reward, tmp_path):
    """The allocator's state (rollouts spent, stream position, history) is checkpointed: stopped after step
    1 and resumed, a dynamic-sampling run ends where the uninterrupted one does."""
    from llm_backend.loop import run

    kw = dict(allocator="dynamic-sampling", d=2, checkpoint_every=1)
    full = run(tiny(tiny_lm, checkpoint_dir=str(tmp_path / "a"), **kw))
    run(tiny(tiny_lm, checkpoint_dir=str(tmp_path / "b"), **kw), stop_after=1)
    resumed = run(tiny(tiny_lm, checkpoint_dir=str(tmp_path / "b"), **kw))
    assert len(full.steps) > 1 and full.steps[0]["rounds"] > 1  # a refill before the checkpoint
    _same_tables(full.table, resumed.table)
    pa, pb = _params(full), _params(resumed)
    assert all(torch.equal(pa[k], pb[k]) for k in pa)


# ------------------------------------------------------------------------- through the studies pipeline


def _sweep_args(out, lm, allocators, extra=()):
    return ["sweep", "allocators", "--backend", "llm", "--lm", lm, "--allocators", allocators, "--n", "2",
            "--bp", "2", "--budget", "16", "--seeds", "1", "--k", "1", "--n-evals", "2", "--d", "2",
            "--d-val", "1", "--option", "engine=hf", "--option", "max_new_tokens=6", "--option",
            "train_eval=false", "--option", f"data_dir={SPLITS}", "--option", "engine_dtype=float32",
            "--option", "train_dtype=float32", "--jobs", "1", "--no-progress", "--out", str(out), *extra]


def test_sweep_allocators_llm_cli_records_the_allocator_and_the_drawn_compute(tmp_path, tiny_lm, coin_reward,
                                                                              counted):
    from click.testing import CliRunner

    from isocompute.cli import main
    from studies.io import load_table

    out = tmp_path / "res"
    r = CliRunner().invoke(main, _sweep_args(out, tiny_lm, "dynamic-sampling"))
    assert r.exit_code == 0, r.output
    t = load_table(out)
    assert set(t["allocator"]) == {"fixed-n2", "dynamic-sampling"}
    final = t.sort_values("compute").groupby("allocator")["compute"].last()
    assert final["fixed-n2"] == 16 and final["dynamic-sampling"] <= 16
    assert final.sum() == counted["rollouts"]  # both runs together: every generated rollout, no more
    assert t.groupby("allocator")["tokens"].max().sum() == counted["tokens"]
    fixed_ids = set(t[t.allocator == "fixed-n2"].run_id)
    assert all(i.startswith("llm-") and "-bp2-n2-s0-" in i for i in fixed_ids)


def test_sweep_allocators_llm_cli_refuses_a_simulator_only_allocator(tmp_path, tiny_lm):
    from click.testing import CliRunner

    from isocompute.cli import main

    r = CliRunner().invoke(main, _sweep_args(tmp_path / "res", tiny_lm, "knapsack,variance"))
    assert r.exit_code == 2, r.output
    lines = [x for x in r.output.splitlines() if x.strip()]
    assert len(lines) == 1 and "variance is not implemented on the llm backend" in lines[0], r.output


def test_llm_allocators_sweep_keeps_the_llm_study_run_ids():
    """The fixed-n runs of an llm allocators sweep are the runs of isocompute.reports.llm_study at the same
    settings (problem_seed stays None on the llm backend), so a shared results directory reuses them."""
    from isocompute.reports.llm_study import grid_configs
    from studies.config import RunConfig
    from studies.sweeps import build_sweep

    study = {c.run_id for c in grid_configs(3, 512) if c.n == 8 and c.lr == 3e-5}
    base = RunConfig(backend="llm", dataset="easy", bp=8, budget=512, lr=3e-5, lr_rule="sqrt", k=4, n_evals=4,
                     d_val=33, options={"max_new_tokens": 24, "train_eval": False,
                                        "data_dir": "docs/llm_study/nvm/splits"})
    cfgs = build_sweep("allocators", base, n=[8], allocators=["knapsack", "dynamic-sampling"], seeds=3)
    assert {c.run_id for c in cfgs if c.allocator == "fixed"} == study
    assert {c.allocator for c in cfgs} == {"fixed", "knapsack", "dynamic-sampling"} and len(cfgs) == 9
