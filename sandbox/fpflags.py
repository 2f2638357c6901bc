"""The CPU's floating-point status flags, to detect subnormal arithmetic (slow on x86); a diagnostic only.

x86 arithmetic that reads a subnormal operand or produces an underflowing result takes a slow path (a
microcode assist on Intel, tens to hundreds of cycles), so a simulator whose state decays into the subnormal
range gets slower the longer a run lasts. The SSE control/status register MXCSR records such events in
sticky flags: DE (a subnormal operand was read) and UE (a result underflowed). `subnormal_events` clears
them, runs a function in this thread and reports them; the kernels flush tiny values to zero explicitly
(sandbox/grpo.py `TINY`), and tests/sandbox/test_sim_subnormal.py checks with this module that a long run
raises neither flag. `flush_to_zero` sets the FTZ / DAZ modes of this thread, only to measure what
subnormals cost (benchmarks/sim_profile.py): results never depend on it.

glibc's fegetenv / fesetenv (through ctypes) read and write MXCSR of the calling thread; Linux x86-64 only.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util

DE, UE = 0x02, 0x10
"""MXCSR status bits: denormal operand, underflow."""
FTZ, DAZ = 0x8000, 0x0040
"""MXCSR control bits: flush (underflowing results) to zero, denormal operands are zero."""
_STATUS = 0x3F


class _FEnv(ctypes.Structure):
    """glibc's fenv_t on x86-64: the x87 environment (28 bytes), then MXCSR."""

    _fields_ = [("x87", ctypes.c_uint16 * 14), ("mxcsr", ctypes.c_uint32)]


_libm = ctypes.CDLL(ctypes.util.find_library("m") or "libm.so.6")


def mxcsr() -> int:
    """MXCSR of the calling thread."""
    env = _FEnv()
    if _libm.fegetenv(ctypes.byref(env)) != 0:
        raise OSError("fegetenv failed")
    return int(env.mxcsr)


def set_mxcsr(value: int) -> None:
    """Write MXCSR of the calling thread (the x87 environment is kept)."""
    env = _FEnv()
    _libm.fegetenv(ctypes.byref(env))
    env.mxcsr = value & 0xFFFF
    if _libm.fesetenv(ctypes.byref(env)) != 0:
        raise OSError("fesetenv failed")


def subnormal_events(fn, *args, **kwargs) -> tuple[object, int]:
    """(fn(*args, **kwargs), the DE | UE flags it raised in this thread: 0 if no subnormal was read and no
    result underflowed). The flags are cleared before the call; MXCSR's other flags are restored after."""
    before = mxcsr()
    set_mxcsr(before & ~_STATUS)
    try:
        out = fn(*args, **kwargs)
    finally:
        raised = mxcsr() & (DE | UE)
        set_mxcsr(before)
    return out, raised


@contextlib.contextmanager
def flush_to_zero():
    """FTZ and DAZ on in this thread for the duration (a measurement aid: what subnormals cost)."""
    before = mxcsr()
    set_mxcsr(before | FTZ | DAZ)
    try:
        yield
    finally:
        set_mxcsr(before)
