"""Launching a plan's kernels: KernelCall, and the runners that skip Triton's per-call dispatch.

A flashx kernel takes ~75 runtime arguments. Triton's `kernel[grid](...)` binds and specializes
every one of them on each call, which costs more host time than a short sequence's kernel runs
on the GPU. Within one plan, all scalar arguments and constexprs are fixed, so the only things
Triton specializes on that can still change are the device and each array's dtype and 16-byte
alignment. `CompiledRunners` keeps, per plan launch and per such key, the runner of the kernel
Triton compiled on the first call, and later calls go straight to it. (This path skips Triton's
check that the global values a kernel read have not changed since it compiled: flashx's kernels
read none, and a mask_mod's or score_mod's globals must stay fixed anyway.) Every launch that
may compile does so under flashx's stage hook (compile_hook: device-built descriptors in one slot).
"""
from __future__ import annotations

import functools
import inspect
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Mapping, Optional, Sequence

from . import compile_hook, runtime

_INTERPRETER_LOCK = threading.RLock()  # one interpreted launch at a time (KernelCall.launch)


@functools.lru_cache(maxsize=None)
def kernel_params(kernel: Any) -> tuple:
    """(runtime argument names without the outputs, constexpr names) of a kernel, from its signature."""
    import triton.language as tl

    params = list(inspect.signature(kernel.fn).parameters.values())
    constexprs = tuple(p.name for p in params if p.annotation is tl.constexpr)
    runtime_names = [p.name for p in params if p.annotation is not tl.constexpr]
    # Every flashx kernel lists its constexprs last: a runner takes all arguments in that order.
    if [p.name for p in params] != runtime_names + list(constexprs):
        raise TypeError(f"{kernel.fn.__name__}: constexpr parameters must come after all others")
    # Outputs are the trailing upper-case pointers after the last scalar (jax-triton's order).
    while runtime_names and runtime_names[-1].isupper():
        runtime_names.pop()
    return tuple(runtime_names), constexprs


def _specialization(array: Any) -> tuple:
    """What Triton specializes a kernel on for one array argument: its dtype and 16-byte
    alignment; for a TMA descriptor (block_shape, base), its block and its array's."""
    if hasattr(array, "block_shape"):
        return (tuple(array.block_shape),) + _specialization(array.base)
    return (array.dtype, array.data_ptr() % 16 == 0)


class CompiledRunners:
    """Runners of one memoized launch, by (device, dtype and 16-byte alignment of each array)."""

    def __init__(self) -> None:
        self._runners: dict = {}
        self.enabled = not runtime.INTERPRETER

    @staticmethod
    def key(arrays: Sequence[Any]) -> tuple:
        from triton.runtime import driver

        return (driver.active.get_current_device(),) + tuple(_specialization(a) for a in arrays)

    def get(self, key: tuple) -> Any:
        return self._runners.get(key)

    def __bool__(self) -> bool:
        """Whether any runner is kept (the launch has run, or compile_together built it)."""
        return bool(self._runners)

    def remember(self, key: tuple, compiled: Any, grid: tuple) -> None:
        """Keep compiled[grid], the public runner of a CompiledKernel; if this Triton has none,
        stop trying (every call then takes Triton's usual path)."""
        try:
            self._runners[key] = compiled[grid]
        except (TypeError, AttributeError, KeyError):
            self.enabled = False


def _allocator_variable() -> Optional[Any]:
    """The context variable that holds the allocator Triton's launcher asks global scratch of
    (triton.set_allocator sets it; Triton 3.6 and 3.9 keep it there), or None in a Triton without one."""
    try:
        from triton.runtime._allocation import _allocator
    except ImportError:
        return None
    return _allocator if hasattr(_allocator, "set") and hasattr(_allocator, "reset") else None


_ALLOCATOR = _allocator_variable()


def scratch_allocator_settable() -> bool:
    """Whether KernelCall.launch can give a kernel's global scratch an allocator of its own (else a
    launcher must pass host descriptors: flashx never replaces the process's allocator)."""
    return _ALLOCATOR is not None


# Not frozen, though never changed after it is made: a frozen dataclass's __init__ costs ~5x a
# slotted one's, and one is made a launch (host time a call is what limits short sequences).
@dataclass(slots=True)
class KernelCall:
    """One launch: kernel, grid, runtime arguments (inputs and scalars), output names, constexprs, options.

    Frontends launch it as kernel(*inputs, *args, *outputs): `inputs` are only those arrays
    not already bound in `args` (the block map's STATE); outputs come last (jax-triton's order).
    `arrays` are the arrays bound in `args` but the placeholders of absent inputs (a plan's
    calls all leave out the same inputs, and bind the same placeholder: runners need not look at
    it); `runners`, when given, is shared by every call of one plan launch (see CompiledRunners).
    `writes`: the outputs this launch writes (the others it takes but leaves alone; empty: all of
    them).
    """

    kernel: Any
    grid: tuple
    args: tuple
    outputs: tuple
    constexprs: Mapping[str, Any]
    options: Mapping[str, Any]
    arrays: tuple = ()
    runners: Optional[CompiledRunners] = None
    writes: tuple = ()

    def launch(self, outputs: Sequence[Any], inputs: Sequence[Any] = (), allocator: Optional[Any] = None) -> None:
        """Launch with Triton's own launcher on arrays it accepts (torch tensors). allocator:
        (size, alignment, stream) -> a buffer with data_ptr(), which Triton's launcher asks for
        the global scratch of a kernel that builds its own TMA descriptors (DEVICE_DESCRIPTORS),
        in place of triton.set_allocator's for this launch only (see scratch_allocator_settable)."""
        if allocator is None and not runtime.INTERPRETER:
            self._launch(outputs, inputs)
            return
        if runtime.INTERPRETER:
            # Triton's interpreter is not thread-safe: launches from several threads at once (a
            # server's workers, XLA's host callbacks) gave wrong outputs, silently.
            with _INTERPRETER_LOCK:
                self._launch_with(outputs, inputs, allocator)
            return
        self._launch_with(outputs, inputs, allocator)

    def _launch_with(self, outputs: Sequence[Any], inputs: Sequence[Any], allocator: Optional[Any]) -> None:
        """_launch with `allocator` the one Triton's launcher sees during it (None: the process's)."""
        if allocator is None:
            self._launch(outputs, inputs)
            return
        token = _ALLOCATOR.set(allocator)
        try:
            self._launch(outputs, inputs)
        finally:
            _ALLOCATOR.reset(token)

    def _launch(self, outputs: Sequence[Any], inputs: Sequence[Any]) -> None:
        runners = self.runners
        keeps_runners = runners is not None and runners.enabled
        arrays = (*inputs, *self.arrays, *outputs)
        if keeps_runners and runners:  # the hot path: Triton's driver is up, and no cache dir is read
            runner = runners.get(runners.key(arrays))
            if runner is not None:
                runner(*inputs, *self.args, *outputs, *self.constexprs.values())
                return
        # No runner (yet): Triton binds, specializes (compiling if needed, through flashx's stage
        # hook) and launches. Its driver, which a first call starts, builds a module in the cache dir.
        runtime.repair_triton_cache_dir()
        runtime.warn_once_if_interpreted()
        with compile_hook.installed():
            compiled = self.kernel[self.grid](*inputs, *self.args, *outputs, **self.constexprs, **self.options)
        if keeps_runners:
            runners.remember(runners.key(arrays), compiled, self.grid)


def compile_together(launches: Sequence[tuple]) -> None:
    """Compile side by side the kernels of several launches, each (KernelCall, outputs, inputs),
    that have no runner yet (a plan's first launches), and keep their runners for the launches to use.

    A first backward launches two or three kernels that Triton would compile one after another:
    each a compile (MLIR passes and ptxas) and a launcher (a C module built by the system
    compiler) that mostly run outside the GIL. Here the compiles go through Triton's
    AsyncCompileMode on a thread pool, so the first call waits for about the slowest compile
    instead of the sum; the launchers are then built and loaded one after another on this thread.
    (Built on the pool, a kernel's runner twice came back with another kernel's launcher, each time
    in a process's first backward, between the two kernels built side by side: "function takes
    exactly 109 arguments (165 given)"; every launcher module is named "__triton_launcher".) Launches
    that already have a runner, calls without runners (the interpreter) and Tritons without
    AsyncCompileMode are left to their first launch, which compiles as before. Errors are raised
    here, as the launch would have raised them.
    """
    import triton

    runtime.repair_triton_cache_dir()  # before a key starts Triton's driver (see KernelCall._launch)
    pending = []
    for call, outputs, inputs in launches:
        # Later launches (warm, the hot path) skip the key; one with new alignments compiles at
        # its launch as before.
        if first_launch(call):
            key = call.runners.key((*inputs, *call.arrays, *outputs))
            pending.append((call, key, (*inputs, *call.args, *outputs)))
    async_mode = getattr(triton, "AsyncCompileMode", None)
    if len(pending) < 2 or async_mode is None or _async_compile_active():
        return
    # The hook is installed for the whole block: the pool's threads compile under it.
    with compile_hook.installed():
        with ThreadPoolExecutor(max_workers=len(pending), thread_name_prefix="flashx-compile") as pool:
            with async_mode(pool):
                # warmup compiles without launching; in this mode it hands the compile to the pool.
                kernels = [call.kernel.warmup(*args, grid=call.grid, **call.constexprs, **call.options)
                           for call, _, args in pending]
        # Leaving the mode finished every compile; a kernel Triton had compiled already (a new
        # plan, same specialization) came back as is.
        for (call, key, _), kernel in zip(pending, kernels):
            call.runners.remember(key, kernel.result() if hasattr(kernel, "result") else kernel, call.grid)


def first_launch(call: KernelCall) -> bool:
    """Whether this is the first launch of a plan's call (no runner kept yet), where runners are kept."""
    runners = call.runners
    return runners is not None and runners.enabled and not runners


def _async_compile_active() -> bool:
    """Whether the caller already compiles in an AsyncCompileMode (only one may be active)."""
    try:
        from triton.runtime._async_compile import active_mode
    except ImportError:
        return True
    return active_mode.get() is not None
