"""Gluon kernels through jax-triton's `triton_call`.

jax-triton builds a kernel with Triton's tl frontend (ASTSource), which cannot compile Gluon.
What it hands jaxlib, though, is only PTX, a name, the warp count and the shared memory, so its
builder is wrapped: Gluon functions compile through GluonASTSource (every worker partition's
warps counted in the launch), everything else goes to jax-triton's own builder unchanged.
benchmarks/gluon_jax_probe.py showed the mechanism on the H200, warp-specialized kernels included.
"""
import functools

from .. import core

_installed = None


def _wrap(original):
    from jax._src.lib import gpu_triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import compile as triton_compile
    from triton.experimental.gluon._runtime import GluonASTSource

    @functools.lru_cache(maxsize=None)
    def compile_gluon(fn, signature: tuple, constexprs: tuple, attrs: tuple, num_warps: int, num_ctas: int, cc: int):
        names = fn.arg_names
        source = GluonASTSource(fn, dict(signature), {(names.index(k),): v for k, v in constexprs},
                                {index: [list(a) for a in attr] for index, attr in attrs})
        compiled = triton_compile(source, target=GPUTarget("cuda", cc, 32), options=dict(num_warps=num_warps))
        md = compiled.metadata
        return gpu_triton.TritonKernel(md.name, md.num_warps, num_ctas, md.shared, compiled.asm["ptx"], "", cc)

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


def install() -> bool:
    """Teach jax-triton's builder Gluon, once; False where this jax-triton's internals differ."""
    global _installed
    if _installed is None:
        try:
            from jax_triton import triton_lib

            core.runtime.repair_triton_cache_dir()  # importing jax_triton empties TRITON_CACHE_DIR
            if not hasattr(triton_lib.get_or_create_triton_kernel, "wraps_for_gluon"):
                triton_lib.get_or_create_triton_kernel = _wrap(triton_lib.get_or_create_triton_kernel)
            _installed = True
        except (ImportError, AttributeError):
            _installed = False
    return _installed
