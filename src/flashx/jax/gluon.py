"""Gluon kernels through jax-triton's `triton_call`.

jax-triton builds a kernel with Triton's tl frontend (ASTSource), which cannot compile Gluon.
What it hands jaxlib, though, is only PTX, a name, the warp count and the shared memory, so its
builder is wrapped: Gluon functions compile through GluonASTSource (every worker partition's
warps counted in the launch), everything else goes to jax-triton's own builder unchanged.
benchmarks/gluon_jax_probe.py showed the mechanism on the H200, warp-specialized kernels included.
A kernel that needs Triton's global scratch (TMA descriptors built on the device) gets it from its
DESCRIPTOR_SCRATCH output (_scratch_in_argument): jaxlib passes no scratch
(tuning.GLUON_DEVICE_DESCRIPTORS; first run on the H200 2026-11-30).
"""
import functools
import os
import sys
import threading

from .. import core

_installed = None
_builds = []  # the compile caches of the builders _wrap made (one, once installed)


def compiled_kernel_count() -> int:
    """Kernels flashx's builder has compiled in this process (jax-triton's own, apart, are in
    jax_triton.triton_lib._COMPILED_KERNEL_CACHE)."""
    return sum(cache.cache_info().currsize for cache in _builds)


def _wrap(original):
    from jax._src.lib import gpu_triton
    from triton.experimental.gluon._runtime import GluonASTSource

    @functools.lru_cache(maxsize=None)
    def compile_gluon(fn, signature: tuple, constexprs: tuple, attrs: tuple, num_warps: int, num_ctas: int, cc: int):
        names = fn.arg_names
        source = GluonASTSource(fn, dict(signature), {(names.index(k),): v for k, v in constexprs},
                                {index: [list(a) for a in attr] for index, attr in attrs})
        compiled = compile_to_ptx(source, cc, num_warps)
        md = compiled.metadata
        ptx = compiled.asm["ptx"]
        if md.global_scratch_size:
            ptx = _scratch_in_argument(ptx, md.name, fn.arg_names, dict(signature), md.global_scratch_size)
        return gpu_triton.TritonKernel(md.name, md.num_warps, num_ctas, md.shared, ptx, "", cc)

    _builds.append(compile_gluon)

    def build(backend_init_func, platform, fn, arg_dtypes, scalar_args, *, num_warps, num_stages, num_ctas,
              compute_capability, enable_fp_fusion, metaparams, dump):
        if not (hasattr(fn, "is_gluon") and fn.is_gluon()):
            return original(backend_init_func, platform, fn, arg_dtypes, scalar_args, num_warps=num_warps,
                            num_stages=num_stages, num_ctas=num_ctas, compute_capability=compute_capability,
                            enable_fp_fusion=enable_fp_fusion, metaparams=metaparams, dump=dump)
        cc = compute_capability or gpu_triton.get_compute_capability(0)
        constexprs = dict(metaparams)
        # jax-triton passes no scalar equal to 1: the kernel takes those as constexprs.
        constexprs.update({fn.arg_names[i]: 1 for i, _, v in scalar_args if v == 1})
        signature = {fn.arg_names[i]: t for i, t in enumerate(arg_dtypes)}
        signature.update({name: "constexpr" for name in constexprs})
        # Arrays are 16-byte aligned (jax-triton assumes so for its own kernels too); integers
        # that are multiples of 16 are marked so, as Triton's own launcher (torch's) does.
        attrs = {(i,): (("tt.divisibility", 16),) for i, t in enumerate(arg_dtypes) if t.startswith("*")}
        attrs.update({(i,): (("tt.divisibility", 16),) for i, _, v in scalar_args
                      if type(v) is int and v != 0 and v % 16 == 0 and fn.arg_names[i] not in constexprs})
        kernel = compile_gluon(fn, tuple(signature.items()), tuple(constexprs.items()), tuple(attrs.items()),
                               num_warps or 4, num_ctas, cc)
        return kernel, {index: [list(a) for a in attr] for index, attr in attrs.items()}

    build.wraps_for_gluon = original
    return build


SCRATCH_ARGUMENT = "DESCRIPTOR_SCRATCH"

# Marks compile_to_ptx's entries in Triton's cache key, so that a PTX-only kernel (no cubin) and
# a full compile of the same source never share a cache entry.
PTX_ONLY_KEY = "FLASHX_PTX_ONLY"


def compile_to_ptx(source, cc: int, num_warps: int):
    """Triton's compile of `source` (an ASTSource or GluonASTSource) for sm_`cc`, up to PTX only.

    jaxlib assembles a kernel's PTX itself (at its first launch), so Triton's own ptxas run
    (0.3-1.5 s a Gluon kernel on the H200, NOTES v0.22) would be thrown away. Triton's cache still
    serves later processes, under a key of its own (PTX_ONLY_KEY). Returns the CompiledKernel:
    metadata and asm["ptx"]; its asm["cubin"] is empty. flashx's stage hook
    (core.compile_hook) drops the cubin stage and is installed only for the compile."""
    from triton.backends.compiler import GPUTarget
    from triton.compiler import compiler as triton_compiler

    env_vars = {**triton_compiler.get_cache_invalidating_env_vars(), PTX_ONLY_KEY: "1"}
    with core.compile_hook.installed(ptx_only=True):
        return triton_compiler.compile(source, target=GPUTarget("cuda", cc, 32), options=dict(num_warps=num_warps),
                                       _env_vars=env_vars)


def descriptor_scratch_bytes(call: core.KernelCall) -> int:
    """The size of a DEVICE_DESCRIPTORS launch's DESCRIPTOR_SCRATCH output: one program's slot where
    the kernel shares it (core.compile_hook.SHARED_SLOT_KERNELS), else a slot for every program of call.grid."""
    shared = call.kernel.__name__ in core.compile_hook.SHARED_SLOT_KERNELS
    return core.plan.descriptor_scratch_bytes((1,) if shared else call.grid)


def _scratch_in_argument(ptx: str, kernel_name: str, arg_names, signature: dict, scratch_bytes: int) -> str:
    """A kernel's PTX with its global scratch taken from its SCRATCH_ARGUMENT output instead.

    Triton gives a kernel that needs global scratch (TMA descriptors built on the device) a hidden
    pointer parameter after its own, which Triton's launcher fills and jaxlib's does not. Here the
    kernel reads its scratch base from SCRATCH_ARGUMENT (an output the caller sized with
    plan.descriptor_scratch_bytes), rounded up to 128 bytes, a tensor map's alignment. Triton
    offsets each program's scratch by its linear program id x scratch_bytes; in
    core.compile_hook.SHARED_SLOT_KERNELS that offset is taken off the base first, so all programs
    share one slot.
    signature: name -> Triton type or "constexpr"; only non-constexpr arguments are PTX parameters."""
    runtime_names = [name for name in arg_names if signature[name] != "constexpr"]
    if SCRATCH_ARGUMENT not in runtime_names:
        raise ValueError(f"{kernel_name} needs {scratch_bytes} bytes of global scratch a program, which jax-triton "
                         f"does not pass, and has no {SCRATCH_ARGUMENT} argument to take it from")
    if scratch_bytes > core.tuning.GLUON_DESCRIPTOR_BYTES:
        raise ValueError(f"{kernel_name} needs {scratch_bytes} bytes of global scratch a program; "
                         f"{SCRATCH_ARGUMENT} is sized for {core.tuning.GLUON_DESCRIPTOR_BYTES}")
    argument, hidden = runtime_names.index(SCRATCH_ARGUMENT), len(runtime_names)
    entry = core.compile_hook.kernel_entry(ptx, kernel_name)
    if entry is None or entry.group(1).count(".param") != hidden + 2:
        raise ValueError(f"{kernel_name}'s PTX does not have {hidden} parameters and Triton's two hidden ones")
    load = core.compile_hook.pointer_load(kernel_name, hidden)

    def from_argument(match) -> str:
        register = match.group(1)
        loaded = (f"ld.param.b64 {register}, [{kernel_name}_param_{argument}];\n\t"
                  f"add.s64 {register}, {register}, 127;\n\tand.b64 {register}, {register}, -128;")
        if kernel_name not in core.compile_hook.SHARED_SLOT_KERNELS:
            return loaded
        return loaded + core.compile_hook.program_offset_taken_off(register, scratch_bytes)

    rewritten, loads = load.subn(from_argument, ptx)
    body = rewritten[entry.end():]
    if loads == 0 or f"{kernel_name}_param_{hidden}]" in body:
        raise ValueError(f"{kernel_name}'s PTX reads its global scratch other than by ld.param")
    return rewritten


def import_jax_triton():
    """Import jax_triton (it needs a GPU build of JAX), keeping this process's TRITON_CACHE_DIR.

    Importing jax_triton sets TRITON_CACHE_DIR to "", which breaks every later plain Triton
    launch (the torch frontend's) and would drop a cache folder the user chose; flashx's Gluon
    kernels compile through Triton and use that folder too. The value from before the import
    comes back; where jax_triton was imported before flashx could keep it, the empty value is
    removed (Triton then uses its default folder)."""
    before = os.environ.get("TRITON_CACHE_DIR")
    import jax_triton

    if before:
        os.environ["TRITON_CACHE_DIR"] = before
    core.runtime.repair_triton_cache_dir()
    start_specializer_without_torch()
    return jax_triton


class _TorchRefusedHere:
    """A meta path finder that refuses `import torch` to the thread it was made in (others, and
    every other module, go on to the usual finders)."""

    def __init__(self) -> None:
        self.thread = threading.get_ident()

    def find_spec(self, name, path=None, target=None):
        if (name == "torch" or name.startswith("torch.")) and threading.get_ident() == self.thread:
            raise ModuleNotFoundError("flashx: torch refused while Triton's specializer starts", name=name)
        return None


_specializer_lock = threading.Lock()
_specializer_started = False  # set once start_specializer_without_torch has done its work


def start_specializer_without_torch() -> None:
    """Have Triton's argument specializer set itself up now, without importing torch.

    jax-triton specializes every tl kernel's arguments with Triton's native_specialize_impl,
    whose first call (Triton 3.6) imports torch, where it is installed, for a fast path on
    torch.Tensor: 1-5 s of a JAX process's first compile that JAX never uses (4.9 s on the H200's
    image, NOTES v0.23). Made first while `import torch` fails in this thread (other threads may
    import it meanwhile), the setup skips that path; torch tensors, if a later kernel gets them,
    still specialize (on Triton's path for any object with data_ptr). Where torch is imported
    already the import costs nothing and nothing is done; Tritons whose setup does not import
    torch (3.9) are not affected. Once done (or found needless), later calls return at once."""
    global _specializer_started
    with _specializer_lock:
        needless = _specializer_started or "torch" in sys.modules
        _specializer_started = True
        if needless:
            return
        try:
            from triton._C.libtriton import native_specialize_impl
            from triton.backends.compiler import BaseBackend
        except ImportError:
            return
        refuse = _TorchRefusedHere()
        sys.meta_path.insert(0, refuse)
        try:
            native_specialize_impl(BaseBackend, 1, False, True, True)
        except Exception:  # noqa: BLE001 (then the first real call sets it up, as before)
            pass
        finally:
            sys.meta_path.remove(refuse)


def install() -> bool:
    """Teach jax-triton's builder Gluon, once; False where this jax-triton's internals differ."""
    global _installed
    if _installed is None:
        try:
            import_jax_triton()
            from jax_triton import triton_lib

            if not hasattr(triton_lib.get_or_create_triton_kernel, "wraps_for_gluon"):
                triton_lib.get_or_create_triton_kernel = _wrap(triton_lib.get_or_create_triton_kernel)
            _installed = True
        except (ImportError, AttributeError):
            _installed = False
    return _installed
