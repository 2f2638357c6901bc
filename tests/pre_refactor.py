"""The code as it was before the house refactor (commit PRE_REFACTOR), run on this machine, as the
reference its outputs must equal bit for bit.

A refactor promises that every simulator table and every LLM-backend run is unchanged. Bits pinned on one CPU
do not hold on another (docs/CONTRACTS.md, "Determinism"), so the reference is recomputed here: the tree of
commit PRE_REFACTOR is extracted from this repository's own history (`git archive`) into
`.cache/pre-refactor-<sha>/` (kept between runs so numba's cache of the old kernels is reused), and the old
code runs in a subprocess whose import path starts there. A clone without that commit fails loudly: the
comparison is a test CI must run, not skip.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PRE_REFACTOR = "3ae833a04fe750b3795aedb8f142e4de1e2f3c8c"
"""The last commit before the house refactor changed the layout (main on 2026-12-03)."""

PACKAGES = ("isocompute", "sandbox", "llm_backend", "studies", "paper_figs")


def old_tree() -> Path:
    """The pre-refactor packages, extracted once per machine (atomically: never a half-written tree)."""
    dest = ROOT / ".cache" / f"pre-refactor-{PRE_REFACTOR[:12]}"
    if (dest / ".complete").is_file():
        return dest
    try:
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", PRE_REFACTOR, *PACKAGES],
                                 check=True, capture_output=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        err = getattr(e, "stderr", b"") or b""
        raise RuntimeError(f"cannot read commit {PRE_REFACTOR} from this clone's history (a shallow clone? "
                           f"fetch it with `git fetch --unshallow`): {err.decode().strip() or e}") from None
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=dest.parent, prefix=".extract-"))
    with tempfile.TemporaryFile() as f:
        f.write(archive)
        f.seek(0)
        with tarfile.open(fileobj=f) as tar:
            tar.extractall(tmp, filter="data")
    (tmp / ".complete").write_text(PRE_REFACTOR + "\n")
    try:
        tmp.rename(dest)
    except OSError:  # another process finished first: use its tree
        subprocess.run(["rm", "-rf", str(tmp)], check=False)
    return dest


def run_old(code: str, *, timeout: float = 600, env: dict[str, str] | None = None) -> str:
    """Run `code` (a Python program) against the pre-refactor packages; returns its stdout. The program
    writes whatever it computes to files named in its own text (an npz, a parquet) for the caller to load."""
    tree = old_tree()
    full_env = {**os.environ, **(env or {}), "PYTHONPATH": str(tree)}
    proc = subprocess.run([sys.executable, "-c", code], cwd=tree, env=full_env, capture_output=True,
                          text=True, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"the pre-refactor code failed (exit {proc.returncode}):\n{proc.stderr[-4000:]}")
    return proc.stdout
