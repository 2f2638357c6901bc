"""Third-party logging goes to stderr (`--json` stdout holds one JSON object), quiet unless verbose."""

from __future__ import annotations

import logging
import os
import sys

from llm_backend import quiet_logging
from llm_backend.logs import stdout_to_stderr


def test_quiet_logging_moves_stdout_handlers_to_stderr_and_sets_levels(monkeypatch):
    for key in ("VLLM_LOGGING_STREAM", "VLLM_LOGGING_LEVEL", "TRANSFORMERS_VERBOSITY"):
        monkeypatch.delenv(key, raising=False)
    lg = logging.getLogger("vllm")
    h = logging.StreamHandler(sys.stdout)  # what vLLM installs at import (vllm/envs.py default)
    lg.addHandler(h)
    try:
        quiet_logging(verbose=False)
        assert h.stream is sys.stderr and lg.level == logging.WARNING
        assert os.environ["VLLM_LOGGING_STREAM"] == "ext://sys.stderr"
        assert os.environ["VLLM_LOGGING_LEVEL"] == "WARNING"
        quiet_logging(verbose=True)
        assert lg.level == logging.INFO and os.environ["VLLM_LOGGING_LEVEL"] == "INFO"
        assert os.environ["VLLM_LOGGING_STREAM"] == "ext://sys.stderr"  # verbose: still stderr
    finally:
        lg.removeHandler(h)
        quiet_logging(verbose=False)


def test_stdout_to_stderr_catches_native_writes(capfd):
    print("before")
    with stdout_to_stderr():
        os.write(1, b"native\n")  # what a C extension printing to fd 1 does
        print("python")
    print("after")
    out, err = capfd.readouterr()
    assert out == "before\nafter\n"
    assert "native" in err and "python" in err
