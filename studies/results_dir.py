"""A results directory on disk (layout in docs/CONTRACTS.md), spelled here only, and the readers that verify
it: DIR/manifest.json and, per run, DIR/runs/<run_id> + the suffix of each kind of file; a run's status
record is the truth about it, and a run whose files do not match their record is damaged (left out by
readers, rerun by the next sweep). The writer is studies.store.ResultStore; readers (studies.io, the
reports) use these functions directly, without opening (and locking) a store."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from isocompute.contract.status import FINISHED
from studies.files import file_digest, os_reason

DAMAGED = "damaged"
"""The manifest's status of a run whose files do not match its record (run again by the next sweep); the
other run statuses (DONE, DIVERGED, FINISHED, PENDING, FAILED) are the contract's
(isocompute.contract.status)."""

RUNS = "runs"
MANIFEST = "manifest.json"
RUN_FILES = {"table": ".parquet", "pass1": ".pass1.parquet", "record": ".json"}
"""The layout of a results directory (docs/CONTRACTS.md), spelled here only: DIR/manifest.json and, per
run, DIR/runs/<run_id> + the suffix of each kind of file (learning-curve table, pass@1 snapshots, status
record)."""


class DamagedRunWarning(UserWarning):
    """A finished run's files do not match its record; it is treated as unfinished (rerun, left out)."""


def run_file(runs_dir: Path | str, run_id: str, kind: str) -> Path:
    """The file of one run in a results directory's runs/ folder: kind "table", "pass1" or "record"."""
    return Path(runs_dir) / f"{run_id}{RUN_FILES[kind]}"


def names_text(ids: list[str], most: int = 8) -> str:
    """The first `most` run ids (or lines about runs) of a warning, and how many more there are."""
    return ", ".join(ids[:most]) + (f" and {len(ids) - most} more" if len(ids) > most else "")


def read_manifest(root: Path) -> dict[str, Any] | None:
    """DIR/manifest.json as a dict ({} when absent), or None when it is damaged (not JSON, wrong shape)."""
    path = Path(root) / MANIFEST
    if not path.exists():
        return {}
    try:
        m = json.loads(path.read_bytes().decode())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    if not isinstance(m, dict) or not isinstance(m.get("runs", {}), dict):
        return None
    if not all(isinstance(e, dict) for e in m.get("runs", {}).values()):
        return None
    return m


def load_record(path: Path) -> dict[str, Any] | None:
    """A finished run's status record (runs/<run_id>.json), or None if absent, unreadable, not finished or
    not this file's run (a record copied over from another run)."""
    try:
        rec = json.loads(Path(path).read_bytes().decode())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    if not (isinstance(rec, dict) and rec.get("status") in FINISHED and isinstance(rec.get("run_id"), str)):
        return None
    return rec if Path(path).name == rec["run_id"] + RUN_FILES["record"] else None


def finished_records(root: Path) -> dict[str, dict[str, Any]]:
    """{run_id: record} of every status record of a results directory, in run_id order (unverified)."""
    out = {}
    for p in sorted((Path(root) / RUNS).glob("*" + RUN_FILES["record"])):
        rec = load_record(p)
        if rec is not None:
            out[rec["run_id"]] = rec
    return out


def run_damage(runs_dir: Path, rec: dict[str, Any]) -> str | None:
    """Why a finished run's Parquet files do not match its record, or None if they do.

    Records with a `files` entry carry each file's size and SHA-256 (a truncated, emptied, swapped or
    rewritten file is caught); older records carry only the table's row count, checked from the Parquet
    footer (which a truncated file lacks)."""
    import pyarrow.parquet as pq

    run_id = rec["run_id"]
    paths = {kind: run_file(runs_dir, run_id, kind) for kind in ("table", "pass1")}
    files = rec.get("files")
    for kind, path in paths.items():
        if not path.is_file():
            return f"{kind} file missing"
        if isinstance(files, dict) and isinstance(files.get(kind), dict):
            want = files[kind]
            try:
                got = file_digest(path) if path.stat().st_size == want.get("bytes") else None
            except OSError as e:
                return f"{kind} file unreadable: {os_reason(e)}"
            if got is None:
                return f"{kind} file has {path.stat().st_size} bytes, its record says {want.get('bytes')}"
            if got["sha256"] != want.get("sha256"):
                return f"{kind} file checksum differs from its record"
            continue
        try:  # a record from before checksums: the Parquet footer must be readable and agree on rows
            rows = pq.read_metadata(path).num_rows
        except Exception:  # noqa: BLE001 - pyarrow raises several types for a damaged file
            return f"{kind} file is not a readable Parquet file"
        if kind == "table" and isinstance(rec.get("rows"), int) and rows != rec["rows"]:
            return f"table has {rows} rows, its record says {rec['rows']}"
    return None
