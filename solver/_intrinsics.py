"""``sqrt`` for Numba kernels as the processor's square-root instruction (``llvm.sqrt.f64``).

Numba lowers ``math.sqrt`` to a call of the C library's ``sqrt`` and leaves it to LLVM to turn
that into the instruction, which LLVM does only where it can prove the argument is not negative
(the library call must set ``errno`` for a negative one). It proves that for ``d0 * d0 + d1 *
d1`` but not for ``d0 ** 2 + d1 ** 2``, nor for ``a - b``: there every square root was a full
call, with the loop's registers saved around it (measured: docs/design/solver.md). IEEE 754
square roots are correctly rounded, so the result is the same to the bit (a negative argument
gives NaN, as ``math.sqrt`` does under ``error_model="numpy"``).
"""

from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.extending import intrinsic


@intrinsic
def sqrt(typingctx, x):
    """Square root as a float64 (NaN for a negative argument) of a real or integer number;
    callable from Numba code only."""
    if not isinstance(x, (types.Float, types.Integer, types.Boolean)):
        return None

    def codegen(context, builder, signature, args):
        value = context.cast(builder, args[0], signature.args[0], types.float64)
        fn = builder.module.declare_intrinsic("llvm.sqrt", [ir.DoubleType()])
        return builder.call(fn, [value])

    return types.float64(x), codegen
