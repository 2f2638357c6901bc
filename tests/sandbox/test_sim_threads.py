"""One run on several cores: the same seed gives the same table bit for bit with 1, 2 or 3 threads
(grpo._run_full `eval_threads`: training on the calling thread, evaluation chunks on threads of their own by
a fixed partition, the sums in the serial order), including runs that end in a divergence."""

from __future__ import annotations

import numpy as np
import pytest

from sandbox import SimConfig, grpo, run, run_many

SMALL = dict(d=600, d_val=300, bp=8, budget=2**12, n_evals=8)  # 900 problems: 4 evaluation chunks of 256


def _bits(a: np.ndarray) -> bytes:
    return np.ascontiguousarray(a).tobytes()


def _identical(a, b):
    """Tables, pass@1 snapshots and status equal bit for bit (NaN payloads and signed zeros included)."""
    assert (a.status, a.diverged_step, a.reason) == (b.status, b.diverged_step, b.reason)
    assert a.table.keys() == b.table.keys()
    for k in a.table:
        assert a.table[k].dtype == b.table[k].dtype and _bits(a.table[k]) == _bits(b.table[k]), k
    for k in a.pass1:
        assert _bits(a.pass1[k]) == _bits(b.pass1[k]), k


CONFIGS = {
    "tabular": dict(model="tabular", n=8),  # cached evaluation: only the moved rows are recomputed
    "interference": dict(model="interference", n=256, bp=32, budget=2**18),  # 9 points
    "mlp-share": dict(model="mlp", share=0.5, dim=16, hidden=8, n=4),
    "sampled-kl": dict(model="interference", n=8, kl_coef=0.1, metric_mode="sampled", response_len=40.0),
    "ppo-linear": dict(model="linear", share=0.5, n=4, objective="ppo", ppo_epochs=2, minibatches=2),
    "allocator": dict(model="tabular", n=4, allocator="dynamic-sampling"),
    "no-snapshots": dict(model="tabular", n=4, snapshots=False),
}


@pytest.mark.parametrize("key", list(CONFIGS))
def test_one_run_is_the_same_on_one_two_and_three_threads(key):
    cfg = SimConfig(**{**SMALL, **CONFIGS[key]})
    one = run(cfg, threads=1)
    assert one.status == "done"
    for threads in (2, 3):
        _identical(one, run(cfg, threads=threads))
    _identical(one, run(cfg, progress=True, threads=2))  # its progress heartbeat reads the counters only


def test_run_many_with_spare_threads_equals_run():
    cfgs = [SimConfig(**{**SMALL, **CONFIGS["interference"]}), SimConfig(**{**SMALL, **CONFIGS["tabular"]})]
    for c, r in zip(cfgs, run_many(cfgs, threads=4), strict=True):  # 2 runs, 2 evaluation threads each
        _identical(run(c, threads=1), r)
    _identical(run(cfgs[0], threads=1), run_many(cfgs[:1], threads=2)[0])


def _failing(real, at: int, value):
    """real(...) except that its call number `at` (0-based) returns `value` (a failure injected there)."""
    calls = [0]

    def f(*args):
        k = calls[0]
        calls[0] += 1
        return value if k == at else real(*args)

    return f


@pytest.mark.parametrize("at", [0, 3, 7])
def test_a_nonfinite_evaluation_ends_the_run_where_it_does_serially(monkeypatch, at):
    """Evaluation number `at` reports non-finite metrics: the threaded run stops at the same row with the same
    status and step as the serial one, although its training had gone on meanwhile."""
    cfg = SimConfig(**{**SMALL, **CONFIGS["interference"]})
    out = {}
    for threads in (1, 2):
        monkeypatch.setattr(grpo, "_eval_reduce", _failing(grpo._eval_reduce, at, False))
        out[threads] = run(cfg, threads=threads)
        monkeypatch.undo()
    assert out[1].status == "diverged" and out[1].reason == "non-finite metrics"
    assert out[1].table["m"].size == at
    _identical(out[1], out[2])


@pytest.mark.parametrize("at", [0, 4])
def test_a_training_divergence_ends_the_run_where_it_does_serially(monkeypatch, at):
    """Training call number `at` (toward evaluation point at + 1) diverges: the rows before it, evaluated on
    the other threads, are those of the serial run, and nothing after."""
    cfg = SimConfig(**{**SMALL, **CONFIGS["interference"]})
    out = {}
    for threads in (1, 2):
        monkeypatch.setattr(grpo, "train_kernel", _failing(grpo.train_kernel, at, grpo.BAD_GRAD))
        out[threads] = run(cfg, threads=threads)
        monkeypatch.undo()
    assert out[1].status == "diverged" and out[1].reason == "non-finite gradient"
    assert out[1].table["m"].size == at + 1
    _identical(out[1], out[2])


def test_chunks_in_any_order_give_the_cache_of_one_pass():
    """`_eval_problems` over chunks c_first, c_first + c_step, ...: the chunks of two interleaved passes
    fill the cache as one pass over all of them (each chunk touches only its own problems)."""
    from sandbox.runner import prepare

    st = prepare(SimConfig(**{**SMALL, **CONFIGS["interference"]}))
    G = st.config.d + st.config.d_val
    args = (*st.policy.args(), st.problems.lens, st.logp0, st.theta, st.config.n, st.config.k)
    caches = []
    for parts in ([(0, 1)], [(1, 2), (0, 2)], [(2, 3), (0, 3), (1, 3)]):
        cache, cstamp = np.zeros((G, grpo.N_CACHE)), np.full(G, -1, dtype=np.int64)
        for c_first, c_step in parts:
            assert grpo._eval_problems(*args, cache, cstamp, st.row_t, True, c_first, c_step)
        caches.append(cache)
    assert _bits(caches[0]) == _bits(caches[1]) == _bits(caches[2])
