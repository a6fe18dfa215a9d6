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


# cuDeviceGetAttribute's codes (CUDA driver API, cuda.h).
_CU_MULTIPROCESSOR_COUNT = 16
_CU_CAPABILITY_MAJOR = 75
_CU_CAPABILITY_MINOR = 76


def _device_attributes(*codes: int) -> "list[tuple[int, ...]]":
    """The attributes `codes` of every device the CUDA driver shows this process; [] without a driver.

    Asked of libcuda directly: Triton's driver would import torch and make a torch CUDA context,
    which a JAX process neither has nor wants."""
    try:
        libcuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return []
    count = ctypes.c_int(0)
    if libcuda.cuInit(0) != 0 or libcuda.cuDeviceGetCount(ctypes.byref(count)) != 0:
        return []
    devices = []
    for ordinal in range(count.value):
        device = ctypes.c_int(0)
        if libcuda.cuDeviceGet(ctypes.byref(device), ordinal) != 0:
            return []
        values = []
        for code in codes:
            value = ctypes.c_int(0)
            if libcuda.cuDeviceGetAttribute(ctypes.byref(value), code, device) != 0:
                return []
            values.append(value.value)
        devices.append(tuple(values))
    return devices


def _cuda_gpu_present() -> bool:
    """True when the CUDA driver loads and reports a device (no framework needed to ask)."""
    return len(_device_attributes()) > 0


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


def cuda_capabilities() -> "list[tuple[int, int]]":
    """(major, minor) of every device the CUDA driver shows this process; [] without a driver."""
    return _device_attributes(_CU_CAPABILITY_MAJOR, _CU_CAPABILITY_MINOR)


_multiprocessors: "int | None" = None


def multiprocessor_count() -> int:
    """The fewest SMs of any visible device (a persistent grid's size; 1 without a driver)."""
    global _multiprocessors
    if _multiprocessors is None:
        _multiprocessors = min((count for (count,) in _device_attributes(_CU_MULTIPROCESSOR_COUNT)), default=1)
    return _multiprocessors


_hopper_gluon: "bool | None" = None
# The Gluon kernels are written in Triton 3.6's Gluon dialect, which is experimental and changes
# between releases (3.9 removed the cp.async copy they use); other Triton versions run the tl kernels.
GLUON_TRITON = (3, 6)


def triton_version() -> "tuple[int, int]":
    """The installed Triton's (major, minor)."""
    import triton

    major, minor = triton.__version__.split(".")[:2]
    return int(major), int("".join(ch for ch in minor if ch.isdigit()) or 0)


def hopper_gluon() -> bool:
    """Whether the forward may take its warp-specialized Gluon kernel (core/gluon_forward.py):
    compiled kernels (not the interpreter), every visible device sm_90 (a kernel compiled for one
    device may launch on another), Triton GLUON_TRITON's Gluon dialect (with a warning, once, on
    another Triton), and not switched off with FLASHX_GLUON=0. Decided once, on the first call."""
    global _hopper_gluon
    if _hopper_gluon is None:
        _hopper_gluon = False
        if not INTERPRETER and os.environ.get("FLASHX_GLUON", "1") != "0":
            capabilities = cuda_capabilities()
            if capabilities and all(c == (9, 0) for c in capabilities):
                version = triton_version()
                if version != GLUON_TRITON:
                    warnings.warn(
                        f"flashx: its Hopper fast path (Gluon kernels) is written for Triton "
                        f"{'.'.join(map(str, GLUON_TRITON))}; with Triton {'.'.join(map(str, version))} "
                        "every call runs the portable Triton kernels (correct, slower on Hopper)",
                        RuntimeWarning,
                        stacklevel=3,
                    )
                    return False
                try:
                    from triton.experimental import gluon  # noqa: F401

                    _hopper_gluon = True
                except ImportError:
                    pass
    return _hopper_gluon
