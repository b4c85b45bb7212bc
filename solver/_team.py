"""Atomics and a cycle counter for Numba kernels, for :mod:`solver.fused`.

Numba has no atomic operations on the CPU, so these are LLVM instructions emitted directly:
``atomic_add`` (sequentially consistent read-modify-write: it publishes every write before it),
``atomic_read`` (an acquire load: writes published before the value read are visible after it),
``spin_pause`` (x86 ``pause``: a spin-wait that leaves the core's pipeline to the other
hyperthread) and ``cycle_counter`` (``llvm.readcyclecounter``, the x86 time-stamp counter, for
timing phases inside one kernel call; on other architectures it may trap, which is why the fused
path is only taken on x86-64: :data:`FUSED_SUPPORTED`).
"""

from __future__ import annotations

import platform

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

#: The fused coloured frame (and these intrinsics' ``pause`` and cycle counter) need x86-64.
FUSED_SUPPORTED = platform.machine().lower() in ("x86_64", "amd64")


def _element_pointer(context, builder, array_type, array, index):
    ary = context.make_array(array_type)(context, builder, array)
    return cgutils.get_item_pointer(context, builder, array_type, ary, [index])


@intrinsic
def atomic_add(typingctx, array, index, value):
    """``array[index] += value`` atomically (int64 array); returns the value before the add."""
    if not (isinstance(array, types.Array) and array.dtype == types.int64 and array.ndim == 1):
        return None
    sig = types.int64(array, types.intp, types.int64)

    def codegen(context, builder, signature, args):
        ptr = _element_pointer(context, builder, signature.args[0], args[0], args[1])
        return builder.atomic_rmw("add", ptr, args[2], "seq_cst")

    return sig, codegen


@intrinsic
def atomic_read(typingctx, array, index):
    """``array[index]`` (int64 array) as an acquire load: never cached in a register by the
    compiler, and every write published before the value it returns is visible after it."""
    if not (isinstance(array, types.Array) and array.dtype == types.int64 and array.ndim == 1):
        return None
    sig = types.int64(array, types.intp)

    def codegen(context, builder, signature, args):
        ptr = _element_pointer(context, builder, signature.args[0], args[0], args[1])
        return builder.load_atomic(ptr, "acquire", 8)

    return sig, codegen


@intrinsic
def spin_pause(typingctx):
    """x86 ``pause``: the body of a spin-wait loop."""
    sig = types.void()

    def codegen(context, builder, signature, args):
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.VoidType(), []), "llvm.x86.sse2.pause")
        builder.call(fn, [])
        return context.get_dummy_value()

    return sig, codegen


@intrinsic
def cycle_counter(typingctx):
    """The CPU's time-stamp counter (``llvm.readcyclecounter``), int64 ticks at a constant rate."""
    sig = types.int64()

    def codegen(context, builder, signature, args):
        fn = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(ir.IntType(64), []), "llvm.readcyclecounter"
        )
        return builder.call(fn, [])

    return sig, codegen


@intrinsic
def compare_exchange(typingctx, array, index, expected, desired):
    """If ``array[index] == expected`` store ``desired`` (atomically, int64 array); returns the
    value found, so the exchange happened exactly when it equals ``expected``."""
    if not (isinstance(array, types.Array) and array.dtype == types.int64 and array.ndim == 1):
        return None
    sig = types.int64(array, types.intp, types.int64, types.int64)

    def codegen(context, builder, signature, args):
        ptr = _element_pointer(context, builder, signature.args[0], args[0], args[1])
        pair = builder.cmpxchg(ptr, args[2], args[3], "seq_cst", "seq_cst")
        return builder.extract_value(pair, 0)

    return sig, codegen


@intrinsic
def call_void(typingctx, address):
    """Call the C function ``void f(void)`` (its return value ignored) at ``address``, an int64:
    the OS's yield, looked up at run time (a pointer baked into the kernel would defeat the cache)."""
    if not isinstance(address, types.Integer):
        return None
    sig = types.void(address)

    def codegen(context, builder, signature, args):
        fnty = ir.FunctionType(ir.VoidType(), [])
        fn = builder.inttoptr(args[0], fnty.as_pointer())
        builder.call(fn, [])
        return context.get_dummy_value()

    return sig, codegen


def yield_function_address() -> int:
    """Address of the OS call that gives up the rest of a thread's time slice: ``sched_yield``
    (POSIX) or ``SwitchToThread`` (Windows); 0 if neither is found (waits then only spin)."""
    import ctypes
    import sys

    try:
        fn = ctypes.windll.kernel32.SwitchToThread if sys.platform == "win32" else ctypes.CDLL(None).sched_yield
    except (AttributeError, OSError):
        return 0
    return int(ctypes.cast(fn, ctypes.c_void_p).value or 0)
