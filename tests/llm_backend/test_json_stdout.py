"""`isocompute run --backend llm --json` prints exactly one JSON object on stdout although vLLM logs to stdout
by default; the check itself lives in tests/test_cli_json.py."""

from __future__ import annotations

import pytest

from tests.test_cli_json import isocompute, one_json_object


@pytest.mark.llm
@pytest.mark.vllm
def test_llm_run_json_is_one_object_with_vllm(model_path):
    pytest.importorskip("vllm")
    # one GRPO step (budget 4 = bp 2 x n 2) and evaluations at m = 0 and 1: vLLM starts, samples, syncs
    r = isocompute("run", "--backend", "llm", "--dataset", "arith", "--n", "2", "--bp", "2", "--budget", "4",
                   "--n-evals", "2", "--d-val", "2", "--k", "1", "--option", "engine=vllm",
                   "--option", "max_new_tokens=4", "--json")
    assert r.returncode == 0, r.stderr[-2000:]
    obj = one_json_object(r.stdout)
    assert obj["status"] == "done" and obj["config"]["backend"] == "llm" and obj["steps"] == 1
