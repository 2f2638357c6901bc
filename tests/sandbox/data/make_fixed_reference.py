"""Reference tables of the fixed allocator path, made at commit a0b8ea3 (before the allocators existed) with
`python tests/sandbox/data/make_fixed_reference.py tests/sandbox/data/fixed_reference.npz`;
tests/sandbox/test_sim_allocators.py imports CFGS from it (runpy; the main block does not run then)."""

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from sandbox import SimConfig, run  # noqa: E402

CFGS = {
    "tab": dict(model="tabular", dataset="easy", n=8, bp=16, budget=2**13, d=64, d_val=32, n_evals=6),
    "tab_n32": dict(model="tabular", dataset="hard", n=32, bp=8, budget=2**13, d=64, d_val=32, n_evals=6,
                    seed=3),
    "intf": dict(model="interference", dataset="easy", n=4, bp=16, budget=2**12, d=64, d_val=32, n_evals=5),
    "ppo_nest": dict(model="linear", dataset="easy", n=4, bp=8, budget=2**12, d=32, d_val=16, n_evals=4,
                     dim=8, objective="ppo", ppo_epochs=2, minibatches=2, n_est=4, response_len=100.0,
                     kl_coef=0.01),
}

if __name__ == "__main__":
    out = {}
    for k, kw in CFGS.items():
        r = run(SimConfig(**kw))
        for c, v in r.table.items():
            out[f"{k}/{c}"] = v
        out[f"{k}/pass1_train"] = r.pass1["train"]
    np.savez_compressed(sys.argv[1], **out)
    print("ok", len(out))
