"""Latest-only checkpoints of a run, and the part of its config a checkpoint must match to be resumed."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from llm_backend.config import LLMConfig


class Checkpointer:
    """Latest-only checkpoints: model.safetensors + optimizer.pt (weights_only loading) + state.json."""

    def __init__(self, root: str | Path):
        self.root = Path(root)

    def latest(self) -> Path | None:
        if not self.root.exists():
            return None
        done = sorted(
            (p for p in self.root.glob("ckpt-*") if (p / "state.json").exists()),
            key=lambda p: int(p.name.split("-")[1]),
        )
        return done[-1] if done else None

    def save(self, step: int, model, optimizer, state: dict) -> Path:
        import torch
        from safetensors.torch import save_file

        self.root.mkdir(parents=True, exist_ok=True)
        tmp = self.root / f".tmp-ckpt-{step}"
        if tmp.exists():
            shutil.rmtree(tmp)
        tmp.mkdir()
        # clone: tied embeddings share storage, which save_file refuses
        save_file(
            {k: v.detach().cpu().clone().contiguous() for k, v in model.state_dict().items()},
            str(tmp / "model.safetensors"),
        )
        torch.save(optimizer.state_dict(), tmp / "optimizer.pt")
        (tmp / "state.json").write_text(json.dumps(state))  # written last
        final = self.root / f"ckpt-{step}"
        if final.exists():
            shutil.rmtree(final)
        tmp.rename(final)
        for old in self.root.glob("ckpt-*"):
            if old != final:
                shutil.rmtree(old, ignore_errors=True)
        return final

    @staticmethod
    def files(model, optimizer, state: dict) -> dict[str, bytes]:
        """The three files of a checkpoint as bytes (what `save` writes, for a result store to keep):
        model.safetensors, optimizer.pt, state.json."""
        import io

        import torch
        from safetensors.torch import save

        buf = io.BytesIO()
        torch.save(optimizer.state_dict(), buf)
        return {
            "model.safetensors": save({k: v.detach().cpu().clone().contiguous()
                                       for k, v in model.state_dict().items()}),
            "optimizer.pt": buf.getvalue(),
            "state.json": json.dumps(state).encode(),
        }

    @staticmethod
    def load(path: Path, model, optimizer, device: str) -> dict:
        import torch
        from safetensors.torch import load_file

        model.load_state_dict(load_file(str(path / "model.safetensors"), device=str(device)))
        optimizer.load_state_dict(torch.load(path / "optimizer.pt", weights_only=True, map_location=device))
        return json.loads((path / "state.json").read_text())


def config_key(cfg: LLMConfig) -> dict:
    """The config a resumed run must share with the checkpoint (what changes results, no paths or
    memory knobs)."""
    d = cfg.to_dict()
    if not d.get("eval_from"):  # checkpoints of runs from before the absolute grid still resume
        d.pop("eval_from", None)
        d.pop("evals_per_octave", None)
    if d.get("allocator") == "fixed":  # checkpoints of runs from before the field still resume
        del d["allocator"]
    if d.get("warmup_steps") == 0:  # likewise for the warm-up
        del d["warmup_steps"]
    if d.get("tiny_trainer") == "compiled":  # likewise for the trainer (compiled before it was an option)
        del d["tiny_trainer"]
    for k in (
        "checkpoint_dir",
        "checkpoint_every",
        "keep_final",
        "continue_from",
        "engine",
        "device",
        "gpu_memory_utilization",
        "microbatch",
        "micro_tokens",
        "row_tokens",
    ):
        d.pop(k)
    return d
