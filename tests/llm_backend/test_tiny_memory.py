"""llm_backend/memory.py: after `retain_freed_memory`, reallocating the kv engine's cache-sized blocks
faults in no new pages once the heap has grown to hold them (measured in a fresh process, where glibc's
defaults are still in force), and the kv engine sets it."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

PROBE = r"""
import json, resource, torch
from llm_backend.memory import retain_freed_memory

def faults(rounds=20):
    f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(rounds):  # eight 4 MiB caches alive at once, as the kv engine's 1,024-row call holds them
        keep = [torch.empty(1024, 2, 16, 32).fill_(1.0) for _ in range(8)]
        del keep
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0

before = faults()
ok = retain_freed_memory()
faults(4)  # the heap grows to hold them over the first rounds (seen: 1,024 faults in each of rounds 2-3)
print(json.dumps({"before": before, "ok": ok, "after": faults()}))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_freed_cache_blocks_are_reused_without_page_faults():
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True)
    r = json.loads(out.stdout.strip().splitlines()[-1])
    assert r["ok"]
    assert r["before"] > 5_000  # glibc's defaults: pages returned and faulted in again, round after round
    assert r["after"] < r["before"] / 20


def test_the_kv_engine_sets_the_policy(monkeypatch):
    from llm_backend.tiny import sampler
    from llm_backend.tiny.model import SIZES, init_model

    calls = []
    monkeypatch.setattr(sampler, "retain_freed_memory", lambda: calls.append(1) or True)
    sampler.KVEngine(init_model(SIZES["tiny"], 0), tokenizer=None)
    assert calls == [1]
