"""Memory: what one step of a run holds per token (HELD_BYTES_PER_TOKEN, for llm_backend.loop.step_bytes,
checked against the machine before a run starts), and the process's heap policy for the tiny-LM engines:
freed blocks stay in the heap for the next allocation.

Why: glibc's malloc serves blocks above its mmap threshold (128 KiB at start, raised adaptively up to
32 MiB) with fresh mmap pages and returns them to the kernel on free, and memory at the top of the heap
beyond its trim threshold too; the next allocation of that size then pays a page fault on every 4 KiB page
it touches. The kv engine (llm_backend/tiny/sampler.py) allocates its KV caches per call (at 1,024 rows,
eight caches of 4 MiB, written once per step): an evaluation of 634 prompts x 16 samples took ~40,000 page
faults per call with glibc's defaults and none once the heap had grown (8 x 4 MiB written and freed 20
times: ~25,000 faults before, none after, tests/llm_backend/test_tiny_memory.py). It sets M_MMAP_THRESHOLD
to glibc's largest value (32 MiB: larger blocks are still mapped and unmapped) and M_TRIM_THRESHOLD to
1 GiB (a process keeps up to that much freed memory for reuse). Which memory a tensor gets never changes a
float computed in it.
"""

from __future__ import annotations

import ctypes
import ctypes.util

M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 32 * 1024 * 1024
"""glibc's DEFAULT_MMAP_THRESHOLD_MAX on 64-bit: mallopt refuses larger values."""
TRIM_THRESHOLD = 1 << 30

_done: bool | None = None


def retain_freed_memory() -> bool:
    """Set the heap policy above once per process; True where it took effect (glibc), False elsewhere (other C
    libraries: nothing changes)."""
    global _done
    if _done is None:
        try:
            libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
            _done = bool(libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(
                libc.mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))
        except (OSError, AttributeError):
            _done = False
    return _done


HELD_BYTES_PER_TOKEN = 256
"""Memory a step holds per token of its rollouts while it runs, whatever the model: the engine's output (token
ids, log-probs), the step's groups and the training batch's tensors. Measured on the tiny LM (kv engine, one
step of bp 16): 848 MB peak at 65,536 rollouts and 1,495 MB at 262,144 of ~17 tokens each, ~190 bytes per
token beyond the process's own; rounded up. What the engines hold per generation chunk (KV caches) and the
trainer per microbatch (activations, x layers) is bounded by their chunking, not by the step's size, and is
left out."""

