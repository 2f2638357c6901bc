"""A kept final state (LLMConfig.keep_final) continues a run to a larger budget (continue_from) with the
bits of the run made at that budget from the start: the table, the pass@1 snapshots and the weights. This is
what lets a study extend its runs (docs/TINY_STAGE2.md: 2^22 -> 2^24) instead of restarting them."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from llm_backend.config import ConfigError, config_for
from llm_backend.loop import run

BASE = dict(dataset="easy", n=4, bp=4, seed=3, d_val=8, k=2, kl_coef=0.01, entropy_coef=0.001,
            warmup_steps=10, eval_from=64, evals_per_octave=2)


def kept(budget: int, folder):
    """A run of BASE to `budget` and its kept final state written to `folder`."""
    res = run(config_for("tiny", budget=budget, keep_final=True, **BASE))
    folder.mkdir()
    for name, data in res.final.items():
        (folder / name).write_bytes(data)
    return res


def test_continuation_matches_the_longer_run(tmp_path):
    folder = tmp_path / "final"
    short = kept(512, folder)
    cont = run(config_for("tiny", budget=1024, continue_from=str(folder), **BASE))
    full = run(config_for("tiny", budget=1024, **BASE))
    for col in ("compute", "m", "val_mean", "train_mean", "tokens"):
        np.testing.assert_array_equal(cont.table[col], full.table[col], err_msg=col)
    np.testing.assert_array_equal(cont.pass1["val"], full.pass1["val"])
    for (k, a), (_, b) in zip(cont.model.state_dict().items(), full.model.state_dict().items(), strict=True):
        assert torch.equal(a, b), k
    assert len(cont.steps) == len(full.steps) - len(short.steps)  # its step log starts afresh


def test_continuation_refuses_another_config(tmp_path):
    folder = tmp_path / "final"
    kept(256, folder)
    with pytest.raises(ConfigError, match="another run's final state"):
        run(config_for("tiny", budget=512, continue_from=str(folder), **{**BASE, "seed": 4}))
    with pytest.raises(ConfigError, match="eval_from"):
        config_for("tiny", budget=512, continue_from=str(folder), **{**BASE, "eval_from": 0})
