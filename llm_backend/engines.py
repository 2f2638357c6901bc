"""Rollout engines behind one interface: vLLM in-process (weights synced after every step) and HF generate.

Both return, per sample (prompt-major order: sample i*n + j is the j-th rollout of prompt i), the completion
token ids, the decoded text and the per-token log-probs of the sampled tokens under the engine's *sampling*
distribution (logits / temperature, full vocabulary), so the trainer's log-probs at the same temperature
are comparable token by token (the mismatch that truncated importance sampling corrects, docs/DESIGN.md).
"""

from __future__ import annotations

import logging
import os
import time

from llm_backend.rollouts import Rollouts

log = logging.getLogger(__name__)
"""Phase lines of engine start-up (the CLI shows them on stderr): a vLLM start takes minutes on a CPU."""

ENGINES = ("vllm", "hf", "kv")
"""kv: batched KV-cache sampling of the tiny LMs (llm_backend/tiny/sampler.py)."""
DTYPES = ("float32", "bfloat16")


def derive_seed(*parts) -> int:
    """A 32-bit engine seed derived from (seed, step, purpose, ...): explicit randomness, no global state, so
    a run resumed at step s draws what the uninterrupted run drew after s."""
    import numpy as np

    ints = [
        p if isinstance(p, int) else int.from_bytes(str(p).encode()[:8].ljust(8, b"\0"), "little")
        for p in parts
    ]
    return int(np.random.SeedSequence(ints).generate_state(1)[0])


def generate_groups(engine, prompts: list[str], ns: list[int], max_new_tokens: int, temperature: float = 1.0,
                    top_p: float = 1.0, seed: int = 0) -> Rollouts:
    """Rollouts with n_i samples of prompt i (allocators), prompt-major with `sizes` = ns.

    Equal n_i: exactly engine.generate(prompts, n, ..., seed) (the uniform path). Otherwise one generate call
    per distinct n_i (ascending), seeded from (seed, n_i), its outputs put back in prompt order; both engines
    keep their one-n interface.
    """
    import numpy as np

    if len(prompts) != len(ns):
        raise ValueError(f"{len(prompts)} prompts but {len(ns)} group sizes")
    if len(set(ns)) <= 1:
        ro = engine.generate(prompts, ns[0] if ns else 1, max_new_tokens, temperature, top_p, seed=seed)
        ro.sizes = list(ns)
        return ro
    t0 = time.perf_counter()
    parts: dict[int, list] = {}
    for k in sorted(set(ns)):
        idx = [i for i, v in enumerate(ns) if v == k]
        sub_seed = int(np.random.SeedSequence([int(seed), int(k)]).generate_state(1)[0])
        ro = engine.generate([prompts[i] for i in idx], k, max_new_tokens, temperature, top_p, seed=sub_seed)
        for j, i in enumerate(idx):
            sl = slice(j * k, (j + 1) * k)
            parts[i] = [ro.prompt_ids[sl], ro.token_ids[sl], ro.logprobs[sl], ro.texts[sl]]
    out = Rollouts([], [], [], [], 0, sizes=list(ns))
    for i in range(len(prompts)):
        pid, tid, lps, txt = parts[i]
        out.prompt_ids += pid
        out.token_ids += tid
        out.logprobs += lps
        out.texts += txt
    out.seconds = time.perf_counter() - t0
    return out


def _guard_llvmlite_against_vllm_module_scan() -> None:
    """Let vLLM's kernel-override scan of sys.modules survive an imported numba.

    vLLM (vllm/triton_utils/dispatcher.py) calls `vars(value).get("kernel")` on every module attribute that
    has a `__dict__`. llvmlite's `ffi.lib` has __slots__ and a `__getattr__` that wraps any name as a C
    function, so `lib.__dict__` is a function wrapper and the scan crashes ("'_lib_fn_wrapper' object has no
    attribute 'get'") whenever numba was imported first (seen in the full test session). Registering an
    empty dict under that name makes the scan read `{}`; no C function is called `__dict__`.
    """
    import sys

    ffi = sys.modules.get("llvmlite.binding.ffi")
    fntab = getattr(getattr(ffi, "lib", None), "_fntab", None)
    if isinstance(fntab, dict):
        fntab["__dict__"] = {}  # replaces a wrapper cached by an earlier hasattr(lib, "__dict__")


def vllm_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("vllm") is not None


def autocast(device: str, dtype: str):
    """bf16 autocast on `device` for dtype "bfloat16", a no-op context for "float32"."""
    import contextlib

    import torch

    if dtype == "float32":
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.split(":")[0], dtype=torch.bfloat16)


class HFEngine:
    """transformers `generate` on the trainer's own module (no sync needed: it *is* the policy).

    dtype="bfloat16" generates under bf16 autocast (AMX / tensor-core matmuls); the float32 weights stay.
    """

    name = "hf"

    def __init__(self, model, tokenizer, device: str = "cpu", batch_size: int = 64, dtype: str = "float32"):
        if dtype not in DTYPES:
            raise ValueError(f"unknown dtype {dtype!r}; choose one of {', '.join(DTYPES)}")
        self.model, self.tok, self.device, self.batch_size = model, tokenizer, device, batch_size
        self.dtype = dtype

    def sync_weights(self, model) -> float:
        self.model = model
        return 0.0

    def generate(
        self,
        prompts: list[str],
        n: int,
        max_new_tokens: int,
        temperature: float = 1.0,
        top_p: float = 1.0,
        seed: int = 0,
    ) -> Rollouts:
        import torch

        t0 = time.perf_counter()
        tok = self.tok
        eos = tok.eos_token_id
        out = Rollouts([], [], [], [], n)
        was_training = self.model.training
        self.model.eval()
        gen = torch.Generator(device="cpu")
        gen.manual_seed(int(seed))
        per_call = max(1, self.batch_size // n)
        try:
            for start in range(0, len(prompts), per_call):
                chunk = prompts[start : start + per_call]
                # generate draws from the global RNG; seed it per call from our own generator (explicit seeds)
                torch.manual_seed(int(torch.randint(0, 2**62, (1,), generator=gen)))
                tok.padding_side = "left"
                enc = tok(chunk, return_tensors="pt", padding=True, add_special_tokens=False).to(self.device)
                with torch.no_grad(), autocast(self.device, self.dtype):
                    res = self.model.generate(
                        **enc,
                        do_sample=temperature > 0,
                        temperature=temperature if temperature > 0 else None,
                        top_p=top_p,
                        top_k=0,
                        max_new_tokens=max_new_tokens,
                        num_return_sequences=n,
                        output_scores=True,
                        return_dict_in_generate=True,
                        pad_token_id=tok.pad_token_id,
                    )
                plen = enc["input_ids"].shape[1]
                seqs = res.sequences[:, plen:]  # (len(chunk)*n, T)
                # scores: T tensors (len(chunk)*n, V) after the temperature / top-p processors
                logp = torch.stack([torch.log_softmax(s.float(), -1) for s in res.scores], 1)
                tok_lp = logp.gather(-1, seqs.unsqueeze(-1)).squeeze(-1)
                for r in range(seqs.shape[0]):
                    ids = seqs[r].tolist()
                    if eos in ids:
                        ids = ids[: ids.index(eos) + 1]  # keep the EOS: sampling chose it
                    p_ids = enc["input_ids"][r // n][enc["attention_mask"][r // n].bool()].tolist()
                    out.prompt_ids.append(p_ids)
                    out.token_ids.append(ids)
                    out.logprobs.append(tok_lp[r, : len(ids)].tolist())
                    out.texts.append(tok.decode(ids, skip_special_tokens=True))
        finally:
            self.model.train(was_training)
        out.seconds = time.perf_counter() - t0
        return out

    def close(self) -> None:
        pass


class VLLMEngine:
    """vLLM in the same process (V1 multiprocessing off, "uni" executor) so weights can be reloaded in place.

    docs/LLM_NOTES.md: gpu_memory_utilization is the share of CPU memory reserved on a CPU build (0.92 fails;
    at 0.2 only 0.03 GiB is left for the KV cache after 1.7 GiB of weights and activations: default 0.35);
    per-request seeds crash on the CPU, so `generate` seeds torch's global generator per call instead.
    dtype="bfloat16" keeps vLLM's weights and KV cache in bf16 (the synced float32 weights are cast): on this
    AMX CPU it generated 2.5x the tokens/s of float32 (benchmarks/llm_rollout.py); the trainer stays float32
    and truncated importance sampling absorbs the larger log-prob mismatch.
    """

    name = "vllm"

    def __init__(
        self,
        model_path: str,
        tokenizer,
        seed: int = 0,
        max_model_len: int = 512,
        gpu_memory_utilization: float = 0.35,
        dtype: str = "float32",
        kv_cache_gib: float | None = 1.0,
        prefix_caching: bool = True,
    ):
        import torch

        from llm_backend.logs import stdout_to_stderr

        os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
        # vLLM logs to stdout at INFO by default; stderr and WARNING unless quiet_logging(verbose=True) said
        os.environ.setdefault("VLLM_LOGGING_STREAM", "ext://sys.stderr")
        os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        # vLLM drops torch to 1 thread "for serving" unless OMP_NUM_THREADS is set; in-process that would
        # also slow the trainer down by 2x on this 2-core machine (measured: 52 vs 100-150 tokens/s).
        os.environ.setdefault("OMP_NUM_THREADS", str(torch.get_num_threads()))
        os.environ.setdefault("VLLM_CPU_NUM_OF_RESERVED_CPU", "0")
        _guard_llvmlite_against_vllm_module_scan()
        self.tok = tokenizer
        self.dtype = getattr(torch, dtype)
        log.info("llm: starting the vLLM engine (%s, %s); its first start on a CPU takes minutes", dtype,
                 os.path.basename(str(model_path)))
        t0 = time.perf_counter()
        with stdout_to_stderr():  # native start-up prints too
            self._start(model_path, seed, max_model_len, gpu_memory_utilization, dtype, kv_cache_gib,
                        prefix_caching)
        log.info("llm: vLLM engine started in %.1f s", time.perf_counter() - t0)

    def _start(self, model_path, seed, max_model_len, gpu_memory_utilization, dtype, kv_cache_gib,
               prefix_caching) -> None:
        from vllm import LLM

        self.llm = LLM(
            model=str(model_path),
            dtype=dtype,
            max_model_len=max_model_len,
            enforce_eager=True,
            gpu_memory_utilization=gpu_memory_utilization,
            distributed_executor_backend="uni",
            seed=seed,
            logprobs_mode="processed_logprobs",
            # the n rollouts of a group (and the chat template shared by all prompts) prefill once
            enable_prefix_caching=prefix_caching,
            # its "Loading safetensors checkpoint shards" bar: shown only where third-party bars are (-v)
            use_tqdm_on_load=os.environ.get("HF_HUB_DISABLE_PROGRESS_BARS") != "1",
            # An explicit KV cache: the fraction above is of the node's *total* memory as vLLM reads it
            # (8.8 GiB at one start, 23.5 GiB at another on this machine), so 0.35 could reserve 8 GiB of
            # a shared machine. 1 GiB holds ~23k tokens of SmolLM2 (46 KB/token): bp*n*len to spare.
            **({"kv_cache_memory_bytes": int(kv_cache_gib * 2**30)} if kv_cache_gib else {}),
        )

    def _runner(self):
        return self.llm.llm_engine.model_executor.driver_worker.worker.model_runner

    def sync_weights(self, model) -> float:
        """Copy the policy's weights into vLLM (reload_weights) and drop cached prefixes; returns seconds."""
        t0 = time.perf_counter()
        state = {k: v.detach().to("cpu", self.dtype) for k, v in model.state_dict().items()}
        # (a bf16 compute copy of the policy has the engine's dtype already: .to is then a no-op)
        self._runner().reload_weights(weights_iterator=iter(state.items()))
        self.llm.reset_prefix_cache()
        return time.perf_counter() - t0

    def generate(
        self,
        prompts: list[str],
        n: int,
        max_new_tokens: int,
        temperature: float = 1.0,
        top_p: float = 1.0,
        seed: int = 0,
    ) -> Rollouts:
        from vllm import SamplingParams

        t0 = time.perf_counter()
        sp = SamplingParams(
            n=n,
            temperature=temperature,
            top_p=top_p,
            top_k=-1 if temperature > 0 else 1,
            max_tokens=max_new_tokens,
            logprobs=0,
        )
        import torch

        # Per-request seeds crash on the CPU, but vLLM's CPU sampler draws from torch's global generator:
        # seeding it per call makes each call reproducible (same prompts + seed -> same tokens, checked in
        # tests), so a resumed run redraws the rollouts it would have drawn, and evaluations at the same
        # seed are paired across runs. fork_rng leaves the caller's generator as it was.
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(int(seed))
            res = self.llm.generate(prompts, sp, use_tqdm=False)
        out = Rollouts([], [], [], [], n)
        for r in res:
            for c in r.outputs:
                ids = list(c.token_ids)
                lps = [float(d[t].logprob) for d, t in zip(c.logprobs, ids, strict=True)]
                out.prompt_ids.append(list(r.prompt_token_ids))
                out.token_ids.append(ids)
                out.logprobs.append(lps)
                out.texts.append(c.text)
        out.seconds = time.perf_counter() - t0
        return out

    def close(self) -> None:
        import gc

        del self.llm
        gc.collect()


_ENGINE_CACHE: dict[tuple, VLLMEngine] = {}


def cached_engine(
    model, tokenizer, model_path: str, seed: int = 0, dtype: str = "float32", **kw
) -> VLLMEngine:
    """The process's vLLM engine for (model_path, dtype, engine options), started on first use.

    vLLM start-up costs seconds and one in-process engine per process is what vLLM supports well, so the
    runs of a sweep with the same model share it (loop.run with engine=None); weights are synced from
    `model` on every hand-out. The engine seed only matters at start-up: generate reseeds per call.
    Engines of other keys are closed first (one engine at a time keeps memory bounded).
    """
    if not vllm_available():
        raise RuntimeError("engine 'vllm' needs vLLM (pip install 'isocompute[vllm]'); or use --engine hf")
    key = (str(model_path), dtype, tuple(sorted(kw.items())))
    eng = _ENGINE_CACHE.get(key)
    if eng is None:
        close_cached_engines()
        eng = _ENGINE_CACHE[key] = VLLMEngine(model_path, tokenizer, seed=seed, dtype=dtype, **kw)
    eng.tok = tokenizer
    eng.sync_weights(model)
    return eng


def close_cached_engines() -> None:
    """Close every cached engine (tests, or before starting one of another model)."""
    while _ENGINE_CACHE:
        _, eng = _ENGINE_CACHE.popitem()
        eng.close()


def make_engine(
    name: str,
    model,
    tokenizer,
    model_path: str,
    seed: int = 0,
    device: str = "cpu",
    dtype: str = "float32",
    **kw,
):
    """Build an engine by name; "vllm" falls back to a one-line error when vLLM is not installed.

    `kw` goes to VLLMEngine only (gpu_memory_utilization, max_model_len, kv_cache_gib).
    """
    if name == "hf":
        return HFEngine(model, tokenizer, device=device, dtype=dtype)
    if name == "kv":
        from llm_backend.tiny.sampler import KVEngine

        return KVEngine(model, tokenizer, device=device, dtype=dtype)
    if name == "vllm":
        if not vllm_available():
            raise RuntimeError(
                "engine 'vllm' needs vLLM (pip install 'isocompute[vllm]'); or use --engine hf"
            )
        eng = VLLMEngine(model_path, tokenizer, seed=seed, dtype=dtype, **kw)
        eng.sync_weights(model)
        return eng
    raise ValueError(f"unknown engine {name!r}; choose one of {', '.join(ENGINES)}")
