"""isocompute.contract, the vocabulary both engines share: the allocator spec grammar accepts and
refuses what the two engines' copies did, with the same messages (checked against the pre-refactor code),
the eval schedule is numpy's log-spaced one bit for bit, and budget, lr and status rules say what the code
does."""

from __future__ import annotations

import ast
import json
import math
from pathlib import Path

import numpy as np
import pytest
from pre_refactor import run_old

from isocompute.contract import allocspec, budget, lr, schedule, status
from isocompute.contract.columns import CURVE_COLUMNS
from llm_backend import allocators as la
from sandbox import allocators as sa

GOOD = (
    "fixed", "knapsack", "knapsack:nmin=1,nmax=16,prior=0.3,ema=0.5", "knapsack:oracle=1", "knapsack:nmax=5",
    "dynamic-sampling", "dynamic-sampling:rounds=2", "dynamic-sampling:rounds=3", "skip-zero-var",
    "skip-zero-var:p=0.8,streak=2", "skip-zero-var:p=1", "skip-zero-var:streak=2", "skip-zero-var:p=0.9",
    "schedule:double@0.25", "schedule:double@0.5,0.25", "schedule:double@0.25,0.5",
    "schedule:zv@0.6,window=4,nmax=128", "schedule:zv@0.3,window=2", "schedule:zv@0.5,window=4", "variance",
    "variance:oracle=1", "variance:nmin=2,nmax=16", "gvm", "gvm:oracle=1", "ada", "ada:rounds=2,chunk=4",
)
"""Every spec the existing tests run (tests/sandbox/test_sim_allocators.py, tests/test_allocator_parity.py,
tests/llm_backend/test_llm_allocators.py, the former tests/studies/test_allocator_specs.py)."""
BAD = (
    "nope", "", " knapsack :nmin=2", "fixed:1", "fixed:x=1", "knapsack:nmin=9", "knapsack:x=1",
    "knapsack:nmin=a", "knapsack:nmin", "knapsack:prior=2", "knapsack:p=1", "dynamic-sampling:rounds=0",
    "skip-zero-var:p=2", "skip-zero-var:streak=0", "schedule:triple@0.5", "schedule:double@1.5",
    "schedule:double@a", "schedule:double@0.1,0.2,0.3,0.4,0.5,0.6", "schedule:double", "schedule:zv@1.5",
    "schedule:zv@x", "schedule:zv@0.5,window=0", "schedule:zv@0.5,foo=1", "ada:chunk=16", "ada:rounds=0",
    "ada:chunk=2.5", "variance:nmin=9", "variance:nmax=4.5", "variance:ema=0", "gvm:beta=0.5", "gvm:alpha=-1",
    "gvm:prior=-1",
)
NS = (2, 4, 8)

OLD = """
import json
from llm_backend import allocators as la
from sandbox import allocators as sa

def outcome(parse, spec, n):
    try:
        return ["ok", parse(spec, n)]
    except ValueError as e:
        return ["error", str(e)]

out = {}
for spec in SPECS:
    for n in NS:
        sim = outcome(sa.parse, spec, n)
        if sim[0] == "ok":
            sim[1] = [int(sim[1][0]), sim[1][1].tolist()]
        out[f"{spec}|{n}"] = {"sim": sim, "llm": outcome(la.parse, spec, n), "label": sa.label(spec, n)}
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def before() -> dict:
    """What the pre-refactor parsers of both engines did with every spec of GOOD and BAD at each n of NS."""
    code = f"SPECS = {list(GOOD + BAD)!r}\nNS = {list(NS)!r}\n" + OLD
    return json.loads(run_old(code, env={"OMP_NUM_THREADS": "1", "NUMBA_NUM_THREADS": "1"}))


def outcome(parse, spec: str, n: int) -> list:
    try:
        return ["ok", parse(spec, n)]
    except allocspec.AllocatorError as e:
        return ["error", str(e)]


def llm_form(s: allocspec.AllocSpec) -> list:
    """An AllocSpec as the pre-refactor llm parser returned it: (name, parameters)."""
    if s.kind == "schedule:double":
        return ["schedule", {f"f{j}": f for j, f in enumerate(s.fractions)}]
    return [s.kind, s.params]


ADDED = ("pilot-commit", "dynamo")
"""Allocators added after the refactor: the lists of names in unknown-name errors end with them."""


def before_additions(out: list) -> list:
    """An outcome as it read before ADDED existed (their names cut from an error's list of names)."""
    if out[0] == "error":
        return ["error", out[1].replace(", " + ", ".join(ADDED), "")]
    return out


def test_specs_parse_and_fail_as_the_engines_copies_did(before):
    for spec in GOOD + BAD:
        for n in NS:
            old = before[f"{spec}|{n}"]
            sim = before_additions(outcome(sa.encode, spec, n))
            if sim[0] == "ok":
                sim[1] = [sim[1][0], sim[1][1].tolist()]
            assert sim == old["sim"], (spec, n)
            llm = before_additions(outcome(la.parse, spec, n))
            if llm[0] == "ok":
                llm[1] = llm_form(llm[1])
            assert llm == old["llm"], (spec, n)
            assert allocspec.label(spec, n) == old["label"]


@pytest.mark.parametrize("spec", GOOD)
def test_every_tested_spec_parses_to_a_spec_the_simulator_encodes(spec):
    s = allocspec.parse(spec, 4)
    code, params = sa.encode(spec, 4)
    assert code == sa.CODES[s.kind] and params.shape == (sa.N_PARAMS,)
    assert allocspec.parse(spec, 4) == s


def test_bad_specs_raise_one_line_allocator_errors():
    for spec in BAD:
        with pytest.raises(allocspec.AllocatorError) as e:
            allocspec.parse(spec, 8)
        assert "\n" not in str(e.value)


def test_llm_backend_runs_what_it_implements_and_names_the_rest():
    for spec in GOOD:
        kind = allocspec.parse(spec, 4).kind
        if kind in ("variance", "gvm", "ada", "schedule:zv") or "oracle=1" in spec:
            with pytest.raises(allocspec.AllocatorError, match="llm backend"):
                la.make(spec, 4, 4)
        else:
            assert la.make(spec, 4, 4).name == kind


ADDED_GOOD = ("pilot-commit", "pilot-commit:pilot=3,lower=0,upper=0.5,evict=2,rounds=4", "dynamo",
              "dynamo:nmin=2,nmax=16,floor=0.05,master=0.9")
"""Specs of the allocators added after the refactor (no pre-refactor parser to compare them with)."""


@pytest.mark.parametrize("spec", ADDED_GOOD)
def test_added_specs_parse_the_same_on_both_engines(spec):
    s = allocspec.parse(spec, 8)
    code, params = sa.encode(spec, 8)
    assert code == sa.CODES[s.kind] and params.shape == (sa.N_PARAMS,)
    assert params[: len(sa.LAYOUT[s.kind])].tolist() == [s.params[k] for k in sa.LAYOUT[s.kind]]
    assert la.parse(spec, 8) == s and la.make(spec, 8, 4).name == s.kind
    assert allocspec.split_specs(f"knapsack,{spec},ada") == ["knapsack", spec, "ada"]


def test_split_specs_keeps_spec_arguments_together():
    assert allocspec.split_specs("knapsack,schedule:double@0.25,0.5,variance:nmin=2,nmax=16,ada,"
                                 "schedule:zv@0.5,window=4") == [
        "knapsack", "schedule:double@0.25,0.5", "variance:nmin=2,nmax=16", "ada", "schedule:zv@0.5,window=4"]
    assert allocspec.split_specs("knapsack, dynamic-sampling") == ["knapsack", "dynamic-sampling"]


def test_label_names_fixed_runs_by_their_group_size():
    assert allocspec.label("fixed", 8) == "fixed-n8" and allocspec.label(" knapsack ", 8) == "knapsack"


def numpy_eval_steps(m: int, n_evals: int) -> list[int]:
    """The simulator's pre-refactor spelling (sandbox/runner.py before the contract existed)."""
    pts = np.unique(np.round(np.geomspace(1, m, num=n_evals)).astype(np.int64))
    return np.concatenate([[0], pts[(pts >= 1) & (pts <= m)]]).astype(np.int64).tolist()


def test_eval_steps_equal_numpys_log_spacing():
    for n_evals in (2, 3, 4, 5, 8, 12, 16, 32, 64):
        for m in [*range(1, 1500), *np.random.default_rng(0).integers(1500, 2**30, 200).tolist()]:
            assert schedule.eval_steps(m, n_evals) == numpy_eval_steps(m, n_evals), (m, n_evals)


def test_eval_steps_edges_of_the_llm_backend():
    assert schedule.eval_steps(3, 1) == [0, 3]
    assert schedule.eval_steps(8, 3) == [0, 1, 3, 8]
    assert schedule.eval_steps(100, 5) == [0, 1, 3, 10, 32, 100]
    assert schedule.eval_steps(0, 4) == [0]


def test_the_simulators_table_has_the_curve_columns():
    import sandbox

    cfg = sandbox.SimConfig(d=16, d_val=8, bp=4, n=4, budget=2**9, n_evals=4, snapshots=False)
    assert tuple(sandbox.run(cfg).table) == CURVE_COLUMNS


def test_steps_rule_text_is_what_steps_computes():
    expr = budget.STEPS_RULE.split("=", 1)[1]
    for b, bp, n, n_est in ((2**20, 32, 8, 0), (1000, 3, 7, 2), (255, 8, 4, 0), (2**30, 1, 2, 4)):
        named = {"budget": b, "bp": bp, "n": n, "n_est": n_est}
        assert eval(expr, {}, named) == budget.steps(b, bp, n, n_est)


def test_run_configs_share_the_budget_rule_and_its_help_text():
    from llm_backend.config import LLMConfig
    from sandbox import SimConfig
    from studies.config import RunConfig

    assert budget.STEPS_RULE in RunConfig.field_help()["budget"]
    assert SimConfig(n=4, bp=8, n_est=2, budget=1000).steps == budget.steps(1000, 8, 4, 2) == 20
    assert RunConfig(n=4, bp=8, n_est=2, budget=1000).steps == 20
    assert LLMConfig(n=4, bp=8, budget=1000, engine="hf").steps == budget.steps(1000, 8, 4) == 31


def test_effective_lr_rules():
    assert lr.effective_lr(0.1, "constant", 512, 256) == 0.1
    assert lr.effective_lr(0.1, "linear", 512, 256) == 0.1 * 2.0
    assert lr.effective_lr(1e-5, "sqrt", 128, 64) == 1e-5 * 2.0**0.5
    assert math.isclose(lr.effective_lr(1e-5, "sqrt", 16, 64), 5e-6)


def test_store_statuses_of_engine_results():
    assert status.FINISHED == (status.DONE, status.DIVERGED)


STDLIB_LOADED = ("__future__", "dataclasses", "math", "os", "pathlib", "sys", "time", "threading", "typing",
                 "collections", "hashlib")
"""Modules the interpreter has loaded at start-up anyway, and hashlib, imported only inside
cache.invalidate_stale_numba when an engine loads its kernels."""


def test_contract_is_pure_python():
    """No numpy, torch or pandas and nothing of ours (only stdlib modules that Python has loaded anyway):
    every engine may import it, and it imports fast."""
    root = Path(allocspec.__file__).parent
    for path in sorted(root.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module] if isinstance(node, ast.ImportFrom) and node.module else [])
            for name in names:
                top = name.split(".")[0]
                ours = name.startswith("isocompute.contract")
                assert top in STDLIB_LOADED or ours, (path.name, name)
