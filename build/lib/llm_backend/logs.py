"""Third-party logging off stdout: `--json` prints exactly one JSON object there (docs/DESIGN.md CLI
contracts).

vLLM configures its own "vllm" logger at import time with a handler on sys.stdout at INFO level
(vllm/envs.py: VLLM_LOGGING_STREAM defaults to "ext://sys.stdout"), and native code may print during engine
start-up, so we (1) point vLLM's stream at stderr and quiet it before it is imported, (2) re-point handlers
of loggers already configured, and (3) start engines with file descriptor 1 redirected to 2.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys

_THIRD_PARTY = ("vllm", "transformers", "torch", "accelerate", "datasets", "urllib3", "filelock", "trl")


def quiet_logging(verbose: bool = False) -> None:
    """Send vLLM / transformers / torch logging to stderr; WARNING and above unless `verbose` (INFO).

    Safe to call before or after those libraries are imported, and more than once (the last call wins).
    """
    level = logging.INFO if verbose else logging.WARNING
    os.environ["VLLM_LOGGING_STREAM"] = "ext://sys.stderr"
    os.environ["VLLM_LOGGING_LEVEL"] = logging.getLevelName(level)
    os.environ["TRANSFORMERS_VERBOSITY"] = "info" if verbose else "error"
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    for name in _THIRD_PARTY:
        lg = logging.getLogger(name)
        lg.setLevel(level if name != "transformers" or verbose else logging.ERROR)
        for h in lg.handlers:
            if isinstance(h, logging.StreamHandler) and getattr(h, "stream", None) is sys.stdout:
                h.setStream(sys.stderr)
    if "transformers" in sys.modules:
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_info() if verbose else hf_logging.set_verbosity_error()


@contextlib.contextmanager
def stdout_to_stderr():
    """Redirect file descriptor 1 (and sys.stdout) to stderr inside the block: native prints included."""
    sys.stdout.flush()
    try:
        saved = os.dup(1)
    except OSError:  # no real fd 1 (e.g. an embedded interpreter): Python-level redirect only
        with contextlib.redirect_stdout(sys.stderr):
            yield
        return
    try:
        os.dup2(2, 1)
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)
