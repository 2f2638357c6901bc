"""Resumable results directory (layout in docs/CONTRACTS.md): manifest, one Parquet per run, status records.

Crash safety: every file is written to a temporary name, fsync'ed and renamed with os.replace, and a run's
JSON status record is written last, so its presence means the run's tables are complete. The manifest is a
summary rebuilt from the status records on every open, so a sweep killed with SIGKILL at any moment resumes
by skipping finished runs and loses nothing but the runs in flight. Only the parent process writes here.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import platform
import subprocess
import time
from importlib import metadata
from pathlib import Path
from typing import Any

import pandas as pd

from studies.backends import RunOutput
from studies.config import RunConfig, StudiesError

FINISHED = ("done", "diverged")
_TMP_SUFFIX = ".tmp"


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write `data` to `path` so that readers (and a crash) see either the old file or the whole new one."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}{_TMP_SUFFIX}")
    with open(tmp, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    _fsync_dir(path.parent)


def _fsync_dir(d: Path) -> None:
    fd = os.open(d, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write_json(path: Path, obj: Any) -> None:
    atomic_write_bytes(path, (json.dumps(obj, indent=1, sort_keys=True, default=_jsonable) + "\n").encode())


def atomic_write_parquet(path: Path, df: pd.DataFrame) -> None:
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}{_TMP_SUFFIX}")
    df.to_parquet(tmp, index=False)
    with open(tmp, "rb+") as fh:
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    _fsync_dir(path.parent)


def _jsonable(o: Any) -> Any:
    if hasattr(o, "item"):  # numpy scalars
        return o.item()
    return str(o)


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


class ResultStore:
    """A results directory. `open()` takes an exclusive lock so two sweeps never write the same directory."""

    def __init__(self, root: str | os.PathLike, study: str | None = None):
        self.root = Path(root)
        self.runs_dir = self.root / "runs"
        self.manifest_path = self.root / "manifest.json"
        self.study = study
        self._lock_fh = None
        self.manifest: dict[str, Any] = {}

    # -- lifecycle ------------------------------------------------------------------------------------------
    def open(self) -> ResultStore:
        if self.root.exists() and not self.root.is_dir():
            raise StudiesError(f"{self.root} exists and is not a directory")
        self.runs_dir.mkdir(parents=True, exist_ok=True)
        self._lock_fh = open(self.root / ".lock", "w")  # noqa: SIM115 - held until close()
        try:
            fcntl.flock(self._lock_fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._lock_fh.close()
            self._lock_fh = None
            raise StudiesError(f"another sweep is writing {self.root}; wait or use another --out") from None
        self._remove_temporaries()
        self.manifest = self._read_manifest()
        self._reconcile()
        self.write_manifest()
        return self

    def close(self) -> None:
        if self._lock_fh is not None:
            self._lock_fh.close()
            self._lock_fh = None

    def __enter__(self) -> ResultStore:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _remove_temporaries(self) -> None:
        # Left by a killed writer (we hold the lock, so no live writer owns them).
        for d in (self.root, self.runs_dir):
            for p in d.glob(f".*{_TMP_SUFFIX}"):
                p.unlink(missing_ok=True)

    def _read_manifest(self) -> dict[str, Any]:
        if self.manifest_path.exists():
            try:
                m = json.loads(self.manifest_path.read_text())
            except json.JSONDecodeError:
                m = {}  # impossible with atomic writes, but the status records can rebuild it
        else:
            m = {}
        m.setdefault("study", self.study)
        m.setdefault("created", time.strftime("%Y-%m-%dT%H:%M:%S%z"))
        m.setdefault("runs", {})
        m["git"] = git_revision()
        m["versions"] = versions()
        return m

    def _reconcile(self) -> None:
        """Make the manifest agree with the status records (the source of truth for finished runs)."""
        runs = self.manifest["runs"]
        for rec_path in self.runs_dir.glob("*.json"):
            rec = self._load_record(rec_path)
            if rec is None:
                continue
            entry = runs.setdefault(rec["run_id"], {"config": rec.get("config")})
            entry.update({k: rec.get(k) for k in ("status", "diverged_step", "reason", "rows")})
        for run_id, entry in runs.items():
            if entry.get("status") in FINISHED and not self.record_path(run_id).exists():
                entry["status"] = "pending"  # its record vanished (deleted by hand or --force interrupted)

    # -- paths and queries ----------------------------------------------------------------------------------
    def table_path(self, run_id: str) -> Path:
        return self.runs_dir / f"{run_id}.parquet"

    def pass1_path(self, run_id: str) -> Path:
        return self.runs_dir / f"{run_id}.pass1.parquet"

    def record_path(self, run_id: str) -> Path:
        return self.runs_dir / f"{run_id}.json"

    @staticmethod
    def _load_record(path: Path) -> dict[str, Any] | None:
        try:
            rec = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            return None
        return rec if isinstance(rec, dict) and rec.get("status") in FINISHED and "run_id" in rec else None

    def record(self, run_id: str) -> dict[str, Any] | None:
        """The status record of a finished run, else None."""
        p = self.record_path(run_id)
        return self._load_record(p) if p.exists() else None

    def is_finished(self, run_id: str) -> bool:
        return self.record(run_id) is not None

    def finished_runs(self) -> dict[str, str]:
        """{run_id: status} of every run with a status record ("done" or "diverged"), in run_id order."""
        recs = (self._load_record(p) for p in sorted(self.runs_dir.glob("*.json")))
        return {r["run_id"]: r["status"] for r in recs if r is not None}

    def read_run(self, run_id: str, kind: str = "table") -> pd.DataFrame:
        """The learning-curve table (kind "table") or pass@1 snapshots (kind "pass1") of a finished run."""
        if kind not in ("table", "pass1"):
            raise ValueError(f"kind must be table or pass1, got {kind!r}")
        if not self.is_finished(run_id):
            raise StudiesError(f"run {run_id} is not finished in {self.root}")
        return pd.read_parquet(self.table_path(run_id) if kind == "table" else self.pass1_path(run_id))

    def extra_path(self, run_id: str, name: str) -> Path:
        """A measurement recorded beside a run's table (e.g. name "gns": gradient noise scale), in DIR/extra/
        so that the status-record glob of runs/ never sees it."""
        return self.root / "extra" / f"{run_id}.{name}.json"

    def write_extra(self, run_id: str, name: str, obj: Any) -> None:
        """Record a JSON-able measurement of a finished run beside its table (atomic)."""
        path = self.extra_path(run_id, name)
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_json(path, obj)

    def read_extra(self, run_id: str, name: str) -> Any | None:
        """A measurement written by `write_extra`, or None if there is none."""
        p = self.extra_path(run_id, name)
        try:
            return json.loads(p.read_text()) if p.exists() else None
        except json.JSONDecodeError:
            return None

    # -- writes ---------------------------------------------------------------------------------------------
    def write_manifest(self) -> None:
        atomic_write_json(self.manifest_path, self.manifest)

    def register(self, configs: list[RunConfig]) -> None:
        """Add the sweep's runs to the manifest (status pending unless already finished)."""
        runs = self.manifest["runs"]
        for cfg in configs:
            entry = runs.setdefault(cfg.run_id, {})
            entry["config"] = cfg.to_dict()
            if entry.get("status") not in FINISHED:
                entry["status"] = "pending"
        self.write_manifest()

    def invalidate(self, run_id: str) -> None:
        """Forget a finished run before rerunning it (--force): the record goes first, so a crash never
        leaves old tables marked as new."""
        self.record_path(run_id).unlink(missing_ok=True)
        _fsync_dir(self.runs_dir)
        if run_id in self.manifest["runs"]:
            self.manifest["runs"][run_id]["status"] = "pending"

    def write_run(self, cfg: RunConfig, out: RunOutput, wall_s: float | None = None) -> dict[str, Any]:
        """Store one finished run: tables first, the status record last; then update the manifest."""
        run_id = cfg.run_id
        status = "diverged" if out.status == "diverged" else "done"
        if "run_id" not in out.table.columns or (out.table["run_id"] != run_id).any():
            raise RuntimeError(f"adapter returned a table whose run_id is not {run_id}")
        atomic_write_parquet(self.table_path(run_id), out.table)
        atomic_write_parquet(self.pass1_path(run_id), out.pass1)
        rec = {
            "run_id": run_id,
            "status": status,
            "diverged_step": out.info.get("diverged_step"),
            "reason": out.info.get("reason"),
            "rows": len(out.table),
            "wall_s": wall_s,
            "finished": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "config": cfg.to_dict(),
            "info": {k: v for k, v in out.info.items() if k not in ("diverged_step", "reason")},
            "git": self.manifest.get("git"),
            "versions": self.manifest.get("versions"),
        }
        atomic_write_json(self.record_path(run_id), rec)
        entry = self.manifest["runs"].setdefault(run_id, {"config": cfg.to_dict()})
        entry.update({k: rec[k] for k in ("status", "diverged_step", "reason", "rows")})
        entry.pop("error", None)
        self.write_manifest()
        return rec

    def mark_failed(self, cfg: RunConfig, error: str) -> None:
        """A run that raised: noted in the manifest (not finished, so a rerun retries it)."""
        entry = self.manifest["runs"].setdefault(cfg.run_id, {"config": cfg.to_dict()})
        entry["status"] = "failed"
        entry["error"] = error.strip().splitlines()[-1][:500] if error.strip() else "unknown error"
        self.write_manifest()
