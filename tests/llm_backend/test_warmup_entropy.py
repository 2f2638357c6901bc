"""The paper's Easy recipe on the llm backend, checked on the shipped tiny LM (seconds): the linear lr warm-up
(`warmup_steps`: the lr of each step, the same lr after a resume, reachable as a study option) and the
entropy bonus (its gradient against a central difference, and a step that raises the entropy)."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from llm_backend import trainer  # noqa: E402
from llm_backend.config import ConfigError, config_for  # noqa: E402

RUN = dict(
    dataset="easy",
    n=2,
    bp=2,
    budget=24,
    k=1,
    d_val=4,
    n_evals=2,
    lr=1e-3,
    warmup_steps=4,
    train_eval=False,
    seed=3,
)
"""6 steps of bp 2 x n 2, a 4-step warm-up: steps 1-4 ramp, 5-6 run at the full lr."""


def test_step_lr_ramps_linearly_then_holds():
    c = config_for("tiny", n=4, bp=16, warmup_steps=10)
    full = c.effective_lr()
    assert full == pytest.approx(1e-4)  # n 4 x bp 16 = B_ref 64: the base lr itself
    assert [c.step_lr(s) for s in range(1, 12)] == pytest.approx(
        [full * s / 10 for s in range(1, 11)] + [full]
    )
    assert c.step_lr(10_000) == full
    plain = config_for("tiny", n=4, bp=16)
    assert plain.warmup_steps == 0 and {plain.step_lr(s) for s in (1, 2, 50)} == {full}
    with pytest.raises(ConfigError, match="warmup_steps"):
        config_for("tiny", warmup_steps=-1)


def test_tiny_default_base_lr_is_the_tuned_one():
    """1e-4 at B_ref 64 under the sqrt rule (docs/tiny_lm/README.md cites the tuning that chose it)."""
    c = config_for("tiny", n=64, bp=16, budget=2**20)
    assert (c.lr, c.lr_rule, c.lr_ref_batch) == (1e-4, "sqrt", 64)
    assert c.effective_lr() == pytest.approx(1e-4 * 4.0)


def test_the_optimizer_steps_at_step_lr(monkeypatch):
    from llm_backend.loop import run

    seen = []
    real = trainer.train_step

    def spy(model, opt, *a, **k):
        seen.append(opt.param_groups[0]["lr"])
        return real(model, opt, *a, **k)

    monkeypatch.setattr(trainer, "train_step", spy)
    cfg = config_for("tiny", **RUN)
    res = run(cfg)
    assert len(res.steps) == 6
    assert seen == pytest.approx([cfg.step_lr(s) for s in range(1, 7)])
    assert seen[0] == pytest.approx(cfg.effective_lr() / 4) and seen[-1] == cfg.effective_lr()


def test_a_resumed_run_warms_up_as_the_uninterrupted_one(tmp_path):
    """Stopped after step 2 (inside the warm-up) and resumed from its checkpoint: the same parameters and
    curve as the run that never stopped. A resume that kept the optimizer's saved lr (step 2's) would not."""
    from llm_backend.loop import run

    kw = {**RUN, "checkpoint_every": 1, "entropy_coef": 0.01}
    full = run(config_for("tiny", **kw, checkpoint_dir=str(tmp_path / "a")))
    part = config_for("tiny", **kw, checkpoint_dir=str(tmp_path / "b"))
    run(part, stop_after=2)
    resumed = run(part)
    for (name, a), b in zip(
        full.model.state_dict().items(), resumed.model.state_dict().values(), strict=True
    ):
        torch.testing.assert_close(a, b, rtol=0, atol=0, msg=name)
    np.testing.assert_array_equal(
        np.asarray(full.table["val_mean"], float), np.asarray(resumed.table["val_mean"], float)
    )


def test_warmup_steps_is_a_study_option_and_listed():
    from studies.backends import LLMAdapter, backend_options
    from studies.config import RunConfig

    rc = RunConfig(backend="llm", lm="tiny", n=4, bp=16, budget=2**10, options=(("warmup_steps", 10),))
    assert LLMAdapter().llm_config(rc).warmup_steps == 10
    assert RunConfig(backend="llm", lm="tiny", n=4, bp=16, budget=2**10).run_id != rc.run_id
    doc = {o["key"]: o for o in backend_options("llm")}["warmup_steps"]
    assert doc["default"] == 0 and "warm-up" in doc["doc"]


# ------------------------------------------------------------------------------------------- entropy bonus
def _tiny_batch():
    """Four real prompts of the easy split, two completions each sampled from the shipped tiny LM; zero
    advantages, so the loss is the entropy bonus alone."""
    from llm_backend.model import load_model, load_tokenizer, resolve_model
    from llm_backend.packed import make_packed_batch
    from llm_backend.problems import load_problems
    from llm_backend.tasks import build_prompt
    from llm_backend.tiny.sampler import KVEngine

    path = resolve_model("tiny")
    tok = load_tokenizer(path)
    cfg = config_for("tiny", n=2, bp=4, budget=8)
    train, _ = load_problems(cfg)
    prompts = [build_prompt(tok, p.question) for p in train[:4]]
    ro = KVEngine(load_model(path), tok).generate(prompts, 2, cfg.max_new_tokens, 1.0, 1.0, seed=0)
    adv = np.zeros(len(ro.token_ids))
    return make_packed_batch(ro.prompt_ids, ro.token_ids, ro.logprobs, adv, n=2)


class _Cfg:
    temperature, kl_coef, tis_cap, loss_agg, tiny_trainer = 1.0, 0.0, 0.0, "token_mean", "compiled"
    objective, clip_eps, ppo_epochs, minibatches, n, max_grad_norm = "pg", 0.2, 1, 1, 2, 0.0

    def __init__(self, entropy_coef):
        self.entropy_coef = entropy_coef


def _mean_entropy(model, batch) -> float:
    with torch.no_grad():
        tot, cnt = 0.0, 0.0
        for chunk in batch.chunks(0, batch.num_sequences):
            _, ent = chunk.logprobs(model, 1.0, with_entropy=True, entropy_grad=False)
            m = batch.comp_mask[chunk.rows, chunk.cols]
            tot += float((ent.double() * m).sum())
            cnt += float(m.sum())
    return tot / cnt


@pytest.fixture(scope="module")
def tiny64():
    from llm_backend.model import load_model, resolve_model

    return load_model(resolve_model("tiny")).double()


def test_entropy_bonus_gradient_matches_finite_differences(tiny64):
    """With zero advantages and no KL the loss is -c * token-mean entropy; its autograd gradient along a
    random direction equals the central difference of -c * the entropy recomputed without gradient."""
    model = tiny64
    batch = _tiny_batch()
    c = 0.3
    model.zero_grad()
    trainer.backward(model, batch, _Cfg(c))
    g = torch.Generator().manual_seed(1)
    dirs = [torch.randn(p.shape, generator=g, dtype=p.dtype) for p in model.parameters()]
    analytic = sum(float((p.grad * d).sum()) for p, d in zip(model.parameters(), dirs, strict=True))
    assert abs(analytic) > 1e-6  # the bonus has a gradient at all
    h = 1e-4  # RMSNorm runs in float32 inside the float64 model: smaller steps hit its round-off, larger
    # ones the curvature (relative error 9e-3 at 1e-3, 7e-5 here)
    with torch.no_grad():
        for p, d in zip(model.parameters(), dirs, strict=True):
            p.add_(h * d)
    up = -c * _mean_entropy(model, batch)
    with torch.no_grad():
        for p, d in zip(model.parameters(), dirs, strict=True):
            p.add_(-2 * h * d)
    down = -c * _mean_entropy(model, batch)
    with torch.no_grad():
        for p, d in zip(model.parameters(), dirs, strict=True):
            p.add_(h * d)
    model.zero_grad()
    assert analytic == pytest.approx((up - down) / (2 * h), rel=5e-4)


def test_entropy_bonus_step_raises_entropy_and_none_leaves_it(tiny64):
    """One AdamW step on the bonus alone raises the token-mean entropy of the batch; entropy_coef 0 (and zero
    advantages) leaves the parameters, hence the entropy, unchanged."""
    import copy

    batch = _tiny_batch()
    before = _mean_entropy(tiny64, batch)
    for coef in (0.0, 0.1):
        model = copy.deepcopy(tiny64)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.0)
        trainer.train_step(model, opt, batch, _Cfg(coef))
        after = _mean_entropy(model, batch)
        if coef:
            assert after > before + 1e-3
        else:
            assert after == before
