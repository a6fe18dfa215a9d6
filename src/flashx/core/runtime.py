"""Where flashx's Triton kernels run: compiled for the GPU, or through Triton's interpreter.

The choice is made once, at import, and before triton itself is imported: Triton decides when
a function is decorated (its own triton.language helpers included) whether `@triton.jit`
builds a GPU kernel or an interpreted one.
"""
import ctypes
import os
import sys
import warnings

_INTERPRET_ENV = "TRITON_INTERPRET"


def _cuda_gpu_present() -> bool:
    """True when the CUDA driver loads and reports a device (no framework needed to ask)."""
    try:
        libcuda = ctypes.CDLL("libcuda.so.1")
        count = ctypes.c_int(0)
        return libcuda.cuInit(0) == 0 and libcuda.cuDeviceGetCount(ctypes.byref(count)) == 0 and count.value > 0
    except OSError:
        return False


def _choose_interpreter() -> bool:
    if os.environ.get(_INTERPRET_ENV, "0") not in ("", "0"):
        return True
    if _cuda_gpu_present():
        return False
    if "triton" in sys.modules:
        raise ImportError(
            "flashx: no GPU found and triton was imported before flashx, so its kernels cannot run "
            "through Triton's interpreter; set TRITON_INTERPRET=1 or import flashx before triton"
        )
    # No GPU: run the very same kernels through the interpreter rather than fail.
    os.environ[_INTERPRET_ENV] = "1"
    return True


INTERPRETER: bool = _choose_interpreter()
_warned_slow = False


def warn_once_if_interpreted() -> None:
    """One warning per process that kernels run on the CPU interpreter, which is slow."""
    global _warned_slow
    if INTERPRETER and not _warned_slow:
        _warned_slow = True
        warnings.warn(
            "flashx: no GPU in use, kernels run through Triton's interpreter on the CPU "
            "(correct but slow; meant for tests and small shapes)",
            RuntimeWarning,
            stacklevel=3,
        )


def repair_triton_cache_dir() -> None:
    """Undo jax_triton's `TRITON_CACHE_DIR=""`, which breaks every later plain Triton launch.

    jax_triton compiles through its own path and never reads the cache dir, so removing the
    empty value (Triton then uses its default) keeps both frameworks working in one process.
    """
    if os.environ.get("TRITON_CACHE_DIR") == "":
        del os.environ["TRITON_CACHE_DIR"]


_hopper_gluon: "bool | None" = None


def hopper_gluon() -> bool:
    """Whether the forward may take its warp-specialized Gluon kernel (core/gluon_forward.py):
    compiled kernels (not the interpreter) on an sm_90 device, with Triton's Gluon dialect, and
    not switched off with FLASHX_GLUON=0 (read once, on the first call)."""
    global _hopper_gluon
    if _hopper_gluon is None:
        _hopper_gluon = False
        if not INTERPRETER and os.environ.get("FLASHX_GLUON", "1") != "0":
            # The driver's first use compiles its helpers into the cache dir, which an earlier
            # import of jax_triton may have emptied.
            repair_triton_cache_dir()
            try:
                from triton.experimental import gluon  # noqa: F401
                from triton.runtime import driver

                target = driver.active.get_current_target()
                _hopper_gluon = target.backend == "cuda" and target.arch == 90
            except (ImportError, RuntimeError, AttributeError):
                pass
    return _hopper_gluon
