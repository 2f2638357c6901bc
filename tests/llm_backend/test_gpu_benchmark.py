"""benchmarks/gpu.py, the device script (the tiny LM on CUDA, SmolLM2 with vLLM on the GPU), and the tiny LM's
device handling.

On a CPU machine (CI): its help works, and without a CUDA device it exits 2 with one line on stderr, writing
nothing. The tiny LM's forward builds every table on its inputs' device (checked on torch's `meta` device,
which fails on any CPU tensor mixed in). The tests marked `gpu` run on a CUDA machine only.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "gpu.py"


def _script(*args, env=None, timeout=120):
    full = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    return subprocess.run([sys.executable, str(SCRIPT), *args], cwd=ROOT, env=full, capture_output=True,
                          text=True, timeout=timeout)


def test_help_names_the_options():
    proc = _script("--help")
    assert proc.returncode == 0, proc.stderr
    for option in ("--out", "--max-seconds", "--ns", "--budget", "--no-vllm"):
        assert option in proc.stdout


def test_without_cuda_it_exits_2_with_one_line_and_writes_nothing(tmp_path):
    out = tmp_path / "gpu.json"
    proc = _script("--out", str(out), env={"CUDA_VISIBLE_DEVICES": ""})  # no device, even on a GPU machine
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("no CUDA device: ")
    assert proc.stdout == ""
    assert not out.exists() and not any(tmp_path.iterdir())


def test_the_tiny_lm_forward_builds_its_tables_on_the_inputs_device():
    from llm_backend.model import load_model, resolve_model
    from llm_backend.tiny.model import rope_tables

    model = load_model(resolve_model("tiny")).to("meta")
    cos, sin = rope_tables(model.config, torch.arange(8, device="meta"))
    assert cos.device.type == sin.device.type == "meta"
    ids = torch.zeros(2, 8, dtype=torch.long, device="meta")
    pos = torch.arange(8, device="meta").expand(2, 8)
    mask = torch.ones(2, 1, 8, 8, dtype=torch.bool, device="meta")  # the packed layout's (B, 1, L, L) form
    for kw in ({}, {"position_ids": pos, "attention_mask": mask}):
        assert model(ids, **kw).logits.shape == (2, 8, model.config.vocab_size)


needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


@pytest.mark.gpu
@needs_cuda
def test_the_kv_engine_on_cuda_draws_what_it_draws_on_the_cpu():
    from llm_backend import tasks
    from llm_backend.config import config_for
    from llm_backend.model import load_model, load_tokenizer, resolve_model
    from llm_backend.problems import load_problems
    from llm_backend.tiny.sampler import KVEngine

    path = resolve_model("tiny")
    tok = load_tokenizer(path)
    train, _ = load_problems(config_for("tiny", dataset="easy"))
    prompts = [tasks.build_prompt(tok, p.question) for p in train[:64]]
    ros = [KVEngine(load_model(path, dev), tok, device=dev).generate(prompts, 16, 10, 1.0, seed=3, compact=c)
           for dev, c in (("cpu", False), ("cuda", False), ("cuda", True))]
    for ro in ros[1:]:  # the same uniforms on both devices; other kernels, so near ties may flip
        same = sum(a == b for a, b in zip(ros[0].token_ids, ro.token_ids, strict=True)) / len(ro.token_ids)
        assert same >= 0.99


@pytest.mark.gpu
@needs_cuda
def test_the_script_measures_a_short_tiny_run(tmp_path):
    out = tmp_path / "gpu.json"
    proc = _script("--out", str(out), "--no-vllm", "--ns", "4", "--budget", "256", "--max-seconds", "200",
                   timeout=260)
    assert proc.returncode == 0, proc.stderr[-2000:]
    res = json.loads(out.read_text())
    assert res["gpu"] and res["torch"] == torch.__version__
    (run,) = res["tiny"]["runs"]
    assert run["n"] == 4 and run["rollouts_per_s"] > 0 and run["steps"] == 256 // (4 * 16)
