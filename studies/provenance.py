"""Where a run's numbers came from, recorded in every results directory's manifest and run record: the
versions of the packages that shape them and the git revision of this checkout."""

from __future__ import annotations

import contextlib
import platform
import subprocess
from importlib import metadata
from pathlib import Path


def versions() -> dict[str, str]:
    """Versions of the packages that shape the numbers (recorded in the manifest for reproducibility)."""
    out = {"python": platform.python_version()}
    pkgs = ("isocompute", "numpy", "numba", "scipy", "pandas", "pyarrow", "torch", "transformers", "vllm")
    for pkg in pkgs:
        with contextlib.suppress(metadata.PackageNotFoundError):
            out[pkg] = metadata.version(pkg)
    return out


def git_revision() -> str | None:
    """HEAD of the checkout holding this package (None outside git); '+dirty' is not checked (it is slow)."""
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=Path(__file__).resolve().parent,
                             capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def measured_on(record: dict, path: Path) -> str:
    """The date a benchmark's JSON `record` was measured: its "date" field (written by the benchmarks since
    they carry one), else the date of the commit that last changed `path` (when the file was committed,
    so no later than the measurement's), else 'an unrecorded date'."""
    if record.get("date"):
        return str(record["date"])
    try:
        path = Path(path).resolve()
        out = subprocess.run(["git", "log", "-1", "--format=%ad", "--date=short", "--", path.name],
                             cwd=path.parent, capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        return "an unrecorded date"
    day = out.stdout.strip() if out.returncode == 0 else ""
    return f"{day} (committed)" if day else "an unrecorded date"
