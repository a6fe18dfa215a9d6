"""flashx attention for PyTorch tensors: eager, autograd and torch.compile through torch.library ops."""
from __future__ import annotations

import contextlib
import dataclasses
import functools
from typing import Any, NamedTuple, Optional, Sequence, Union

import torch
from torch.autograd import forward_ad

from .. import core
from . import distributed as _distributed
from . import nested as _nested

# Tensor inputs by kernel argument name, in the order the ops take them.
# BIAS travels as its own op argument (it may need a gradient); these go as one list, and ALiBi's
# slopes, where they take a gradient, once more as an argument of their own (autograd sees into
# no list that holds None).
_OPTIONAL_INPUTS = (
    "SLOPES", "MASK", "CU_SEQLENS_Q", "CU_SEQLENS_K", "SEQUSED_Q", "SEQUSED_K", "DROPOUT_SEED",
    "MAP_COUNTS", "MAP_INDICES", "MAP_T_COUNTS", "MAP_T_INDICES", "BLOCK_TABLE",
)
_SLOPES_AT = _OPTIONAL_INPUTS.index("SLOPES")  # ALiBi's slopes, the one list entry that may take a gradient
# attention()'s tensor keywords by kernel argument name.
_KERNEL_NAME = {keyword: name for name, keyword in core.plan.ARRAY_KEYWORDS.items()}


# The plan asks the CUDA driver (through ctypes, which Dynamo cannot trace) for facts that hold
# for the process: its first call, if traced, runs them at trace time and keeps their results.
torch.compiler.assume_constant_result(core.runtime.multiprocessor_count)
torch.compiler.assume_constant_result(core.runtime.hopper_gluon)

# torch.library ops take tensors and plain values only: the options travel as plain values, and
# Python objects (mask_mod, score_mod, score_mod_grad, a block mask's spec) as a key into this
# registry. Registering mutates it, which torch.compile cannot trace; the objects are registered
# at their first eager use (or by create_block_mask), after which compiled code only reads it.
_function_keys: dict = {}
_functions: list = []
# The same keys by the objects' ids, for compiled code: Dynamo cannot hash a @triton.jit function
# (on a GPU host it is a TritonKernelVariable), but from torch 2.13 it takes its id(). _functions
# keeps every registered object alive, so an id is never reused for another.
_function_ids: dict = {}
_DYNAMO_TAKES_TRITON_IDS = torch.__version__ >= (2, 13)
_EAGER_FIRST = ("flashx under torch.compile: call attention once eagerly with these mask_mod/score_mod/block_mask "
                "objects first (or build the block mask with create_block_mask outside the compiled region)")


def _function_objects(options: core.CallOptions) -> tuple:
    return (options.mask_mod, options.score_mod, options.score_mod_grad, options.block_mask)


def _object_ids(objects: tuple) -> tuple:
    return tuple(None if o is None else id(o) for o in objects)


def _function_key(options: core.CallOptions) -> int:
    """The registry key of the options' objects, registering them at their first (eager) use; -1 for none."""
    objects = _function_objects(options)
    if all(o is None for o in objects):
        return -1
    key = _function_keys.get(objects)
    if key is None:
        if torch.compiler.is_compiling():
            raise RuntimeError(_EAGER_FIRST)
        key = _function_keys[objects] = len(_functions)
        _functions.append(objects)
        _function_ids[_object_ids(objects)] = key
    return key


def _compiled_function_key(options: core.CallOptions) -> int:
    """_function_key inside torch.compile, which touches the objects only by `is None` and id():
    on a GPU host Dynamo cannot hash a @triton.jit function (torch 2.13), nor type it or take its
    id() (2.11; NOTES v0.50 item 4)."""
    objects = _function_objects(options)
    if all(o is None for o in objects):
        return -1
    if options.mask_mod is not None and options.block_mask is None:
        raise RuntimeError("flashx under torch.compile: build the block mask with create_block_mask outside "
                           "the compiled region and pass block_mask= (not mask_mod=)")
    functions = options.mask_mod is not None or options.score_mod is not None or options.score_mod_grad is not None
    if functions and not _DYNAMO_TAKES_TRITON_IDS:
        raise RuntimeError(
            f"flashx under torch.compile: torch {torch.__version__}'s Dynamo cannot read a @triton.jit "
            "score_mod/mask_mod passed inside the compiled region (torch 2.13 can): call flashx outside it, "
            "or for a mask pass only a block_mask from create_block_mask")
    key = _function_ids.get(_object_ids(objects))
    if key is None:
        raise RuntimeError(_EAGER_FIRST)
    return key


def _source_key() -> int:
    """A hash of flashx's Python sources, an argument of both ops (below 2**56: an int64).

    torch.compile's caches (AOTAutograd's, Inductor's FX graph cache, on disk across processes)
    key a compiled graph on the graph Dynamo traced, which holds the forward op's call but not the
    backward flashx's autograd formula traces for it (the backward op's arguments, the gradients'
    reductions): after a flashx upgrade a cached backward could call the backward op as the old
    version did (seen in session 69: a schema error) or reduce as it did. With this key in the
    forward op's call, new sources make a new graph, and a fresh compile."""
    import hashlib
    import pathlib

    digest = hashlib.sha256()
    try:
        for path in sorted(pathlib.Path(__file__).resolve().parent.parent.rglob("*.py")):
            digest.update(path.read_bytes())
    except OSError:  # sources not on disk (a zipped install): the version stands in
        digest.update(getattr(__import__("flashx"), "__version__", "").encode())
    return int.from_bytes(digest.digest()[:7], "little")


_SOURCE_KEY = _source_key()


def _encode(options: core.CallOptions, functions_key: Optional[int] = None) -> tuple:
    """The op arguments that carry options: causal, scale, layout, window, softcap, max_seqlen_q,
    max_seqlen_k, bottom_right, dropout_p, float32_precision, functions_key (given: the registry's
    key of the options' objects, from _compiled_function_key; else looked up eagerly, as the op
    checks in tests/test_torch.py call it), and the sources' key (_source_key), which only keys
    compiled graphs."""
    window = None if options.window is None else [int(w) for w in options.window]
    if functions_key is None:
        functions_key = _function_key(options)
    return (options.causal, options.scale, options.layout, window, options.softcap,
            options.max_seqlen_q, options.max_seqlen_k, options.bottom_right, options.dropout_p,
            options.float32_precision, functions_key, _SOURCE_KEY)


def _decode(causal, scale, layout, window, softcap, max_seqlen_q, max_seqlen_k, bottom_right, dropout_p,
            float32_precision, functions_key, source_key: Optional[int] = None) -> core.CallOptions:
    mask_mod, score_mod, score_mod_grad, block_mask = _functions[functions_key] if functions_key >= 0 else (None,) * 4
    return core.CallOptions(
        causal=causal, scale=scale, layout=layout, window=None if window is None else tuple(window), softcap=softcap,
        max_seqlen_q=max_seqlen_q, max_seqlen_k=max_seqlen_k, mask_mod=mask_mod, score_mod=score_mod,
        score_mod_grad=score_mod_grad, block_mask=block_mask, bottom_right=bottom_right, dropout_p=dropout_p,
        float32_precision=float32_precision,
    )


@functools.lru_cache(maxsize=None)
def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


@functools.lru_cache(maxsize=None)
def _device_name(device: torch.device) -> str:
    return str(device)


def _spec(name: str, x: Any, required: bool = False, dtype_name=_dtype_name, device_name=_device_name,
          ) -> Optional[core.ArraySpec]:
    if x is None and not required:
        return None
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if x.layout is not torch.strided:  # a sparse tensor reports strides of 0 and has no dense storage
        raise TypeError(f"{name} must be a dense (strided) torch.Tensor, got layout {x.layout}")
    return core.ArraySpec(tuple(x.shape), x.stride(), dtype_name(x.dtype), device_name(x.device))


# Where Dynamo traces a plan: the cached helpers unwrapped (Dynamo traces through a cache anyway,
# with a UserWarning at each cached function it meets).
_UNCACHED = dict(dtype_name=_dtype_name.__wrapped__, device_name=_device_name.__wrapped__)


def _plan(q, k, v, bias, tensors: Sequence[Optional[torch.Tensor]], options: core.CallOptions,
          traced: bool = False) -> core.AttentionPlan:
    """The (cached) plan of one call. Runs on every call, in the ops too: kept lean, as host time
    per call is what limits short sequences. traced: in code Dynamo traces, planned uncached."""
    names = _UNCACHED if traced else {}
    specs = {name: _spec(core.plan.ARRAY_KEYWORDS.get(name, name), x, **names)
             for name, x in zip(_OPTIONAL_INPUTS, tensors) if x is not None}
    if bias is not None:
        specs["BIAS"] = _spec("bias", bias, **names)
    return core.plan_call(options, _spec("q", q, True, **names), _spec("k", k, True, **names),
                          _spec("v", v, True, **names), specs, cached=not traced)


def _on_device(t: torch.Tensor):
    # Triton launches on the current CUDA device: make it the tensors' (entering torch.cuda.device
    # costs host time a call even when it is already current).
    if t.is_cuda and t.get_device() != torch.cuda.current_device():
        return torch.cuda.device(t.device)
    return contextlib.nullcontext()


def _placeholder(t: torch.Tensor) -> torch.Tensor:
    """Stands in for an absent optional input; the kernel never reads it. Only the ops'
    implementations call this (never traced), so one tensor per device serves every call."""
    return _placeholder_on(t.device)


@functools.lru_cache(maxsize=None)
def _placeholder_on(device: torch.device) -> torch.Tensor:
    # Kept for the process: allocating it costs host time on every call. No elements, so no
    # memory (a null pointer, which Triton's launcher takes): one kept from the allocator's pool
    # would pin a CUDA graph's pool where the process's first call runs in one (reduce-overhead).
    return torch.empty(0, dtype=torch.int32, device=device)


@functools.lru_cache(maxsize=None)
def _scratch_allocator(device: torch.device):
    """Triton's launcher asks this for the global scratch of a kernel that builds its TMA
    descriptors on the device: a buffer from torch's caching allocator on the current stream
    (512-byte aligned, more than the 128 a tensor map needs), freed as the call returns."""
    prototype = torch.empty(0, dtype=torch.int8, device=device)

    def allocate(size: int, alignment: int, stream: Any) -> torch.Tensor:
        return prototype.new_empty(size)
    return allocate


@torch.library.custom_op("flashx::attention_forward", mutates_args=())
def _forward_op(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, bias: Optional[torch.Tensor], slopes: Optional[torch.Tensor],
    tensors: list[Optional[torch.Tensor]], causal: bool, scale: Optional[float], layout: str,
    window: Optional[list[int]], softcap: Optional[float], max_seqlen_q: Optional[int],
    max_seqlen_k: Optional[int], bottom_right: bool, dropout_p: float, float32_precision: str, functions_key: int,
    source_key: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """slopes: ALiBi's slopes again (the kernels read them in tensors) where they take a gradient,
    else None: autograd sees no tensor inside a list that holds None."""
    options = _decode(causal, scale, layout, window, softcap, max_seqlen_q, max_seqlen_k, bottom_right, dropout_p,
                      float32_precision, functions_key)
    return _forward_impl(_plan(q, k, v, bias, tensors, options), q, k, v, bias, tensors)


def _forward_impl(plan: core.AttentionPlan, q, k, v, bias, tensors, backward_ahead: bool = False,
                  slopes_grad: bool = False, needs: tuple = (True, True)) -> tuple[torch.Tensor, torch.Tensor]:
    """backward_ahead: autograd records this call (without a bias gradient; with the slopes' where
    slopes_grad; needs: (need_dq, need_dkdv), see _needs); at the plan's first forward the
    backward's kernels then compile side by side with the forward's."""
    # q.new_empty: q's device and dtype without parsing them again (host time a call).
    fill = q.new_zeros if plan.varlen else q.new_empty  # varlen padding rows belong to no sequence
    out = fill(plan.out_shape)
    lse = fill(plan.lse_shape, dtype=torch.float32)
    if plan.needs_launch and not q.is_meta:  # meta tensors: shapes only, as torch's own ops give
        arrays = {"Q": q, "K": k, "V": v, "BIAS": bias}
        if tensors is not _NO_TENSORS:  # a dense call's list: all absent (building the dict costs host time)
            arrays.update(zip(_OPTIONAL_INPUTS, tensors))
        with _on_device(q):
            descriptors = plan.either_descriptors if core.launch.scratch_allocator_settable() else "host"
            # The Gluon forward copies 16 bytes (cp.async or TMA): a view that starts off a boundary takes tl.
            gluon = (plan.gluon_forward_tile(descriptors) is not None
                     and (q.data_ptr() | k.data_ptr() | v.data_ptr()) % 16 == 0)
            placeholder = _placeholder(q)
            outputs = dict(O=out, LSE=lse)
            if not gluon:  # a portable forward split over the keys passes partial results between its launches
                for name, shape in plan.scratch_shapes.items():
                    outputs[name] = arrays[name] = q.new_empty(shape, dtype=torch.float32)
            calls = plan.forward_calls(arrays, placeholder, gluon=gluon, descriptors=descriptors)
            # The Gluon kernel's DESCRIPTOR_SCRATCH: unused here (host descriptors, or device ones in
            # the global scratch Triton's launcher asks _scratch_allocator for).
            launches = [(call, plan.launch_outputs(call, outputs, placeholder), ()) for call in calls]
            if backward_ahead and plan.needs_backward_launch and core.launch.first_launch(calls[0]) and _differentiable(plan):
                try:
                    core.launch.compile_together(launches + _backward_stand_in_launches(
                        plan, q, k, v, out, lse, bias, tensors, slopes_grad, needs))
                except Exception:  # noqa: BLE001 (work ahead only: each launch compiles, and reports, its own kernel)
                    pass
            for call, bound, _ in launches:
                call.launch(bound, allocator=_scratch_allocator(q.device) if call.constexprs.get("DEVICE_DESCRIPTORS") else None)
    return out, lse


def _differentiable(plan: core.AttentionPlan) -> bool:
    try:
        plan.check_backward()
    except NotImplementedError:  # raised, with its message, when the backward is asked for
        return False
    return True


def _backward_stand_in_launches(plan: core.AttentionPlan, q, k, v, out, lse, bias, tensors,
                                slopes_grad: bool = False, needs: tuple = (True, True)) -> list:
    """The launches a backward of this forward will most likely make, for compile_together: dO
    stands in as `out` (same shape, dtype and, usually, strides) with no lse gradient. Triton
    specializes an output only on its dtype and 16-byte alignment, so q, k, v and lse stand in
    for the gradients and row statistics (nothing is launched on them). A backward that differs
    (dO of other strides, an lse gradient) compiles at its own launch, as it would have."""
    no_bias_grad = torch.zeros((0,), dtype=torch.float32, device=q.device)  # also the slopes' parts' stand-in
    return _backward_launches(plan, out, None, q, k, v, out, lse, bias, tensors, False,
                              dict(DK=k, DV=v, DQ=q, DBIAS=no_bias_grad), (lse, lse), slopes_grad, *needs)


@_forward_op.register_fake
def _(q, k, v, bias, slopes, tensors, *encoded):
    plan = _plan(q, k, v, bias, tensors, _decode(*encoded))
    return q.new_empty(plan.out_shape), q.new_empty(plan.lse_shape, dtype=torch.float32)


@torch.library.custom_op("flashx::attention_backward", mutates_args=())
def _backward_op(
    dout: torch.Tensor, dlse: Optional[torch.Tensor], q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
    out: torch.Tensor, lse: torch.Tensor, bias: Optional[torch.Tensor], tensors: list[Optional[torch.Tensor]],
    bias_grad: bool, slopes_grad: bool, need_dq: bool, need_dkdv: bool, causal: bool, scale: Optional[float],
    layout: str, window: Optional[list[int]], softcap: Optional[float], max_seqlen_q: Optional[int],
    max_seqlen_k: Optional[int], bottom_right: bool, dropout_p: float, float32_precision: str, functions_key: int,
    source_key: int,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    options = _decode(causal, scale, layout, window, softcap, max_seqlen_q, max_seqlen_k, bottom_right, dropout_p,
                      float32_precision, functions_key)
    return _backward_impl(_plan(q, k, v, bias, tensors, options), dout, dlse, q, k, v, out, lse, bias, tensors, bias_grad,
                          slopes_grad, need_dq, need_dkdv)


def _gradient_shapes(plan: core.AttentionPlan, bias_grad: bool, slopes_grad: bool, need_dq: bool,
                     need_dkdv: bool) -> tuple:
    """The backward op's outputs' shapes, dq, dk, dv, then dBias or the slopes' parts: core's
    gradient_shapes, (0,) for those no launch writes (an op returns tensors, never None)."""
    shapes = plan.gradient_shapes(bias_grad, slopes_grad, need_dq, need_dkdv)
    return tuple(shapes[name] or (0,) for name in ("DQ", "DK", "DV", "DBIAS"))


def _backward_impl(plan: core.AttentionPlan, dout, dlse, q, k, v, out, lse, bias, tensors, bias_grad: bool,
                   slopes_grad: bool = False, need_dq: bool = True, need_dkdv: bool = True) -> tuple:
    """(dq, dk, dv, and dBias or the slopes' parts, float32), shaped as _gradient_shapes says."""
    # The kernels write every gradient row but varlen's padding rows, which belong to no sequence.
    # x.new_empty: x's device and dtype without parsing them again (host time a call, as the forward's).
    zeroed = plan.varlen or not plan.needs_backward_launch
    *shapes, score_shape = _gradient_shapes(plan, bias_grad, slopes_grad, need_dq, need_dkdv)
    dq, dk, dv = ((x.new_zeros if zeroed else x.new_empty)(shape) for x, shape in zip((q, k, v), shapes))
    dbias = q.new_zeros(score_shape, dtype=torch.float32)
    if plan.needs_backward_launch and not q.is_meta:
        row_stats = tuple(q.new_empty(plan.row_stats_shape, dtype=torch.float32) for _ in range(2))
        with _on_device(q):
            launches = _backward_launches(plan, dout, dlse, q, k, v, out, lse, bias, tensors, bias_grad,
                                          dict(DK=dk, DV=dv, DQ=dq, DBIAS=dbias), row_stats, slopes_grad,
                                          need_dq, need_dkdv)
            core.launch.compile_together(launches)  # a first backward's kernels compile side by side
            for call, bound, _ in launches:
                call.launch(bound)
    return dq, dk, dv, dbias


def _backward_launches(plan: core.AttentionPlan, dout, dlse, q, k, v, out, lse, bias, tensors, bias_grad: bool,
                       gradients: dict, row_stats: tuple, slopes_grad: bool = False, need_dq: bool = True,
                       need_dkdv: bool = True) -> list:
    """The backward's launches, each (KernelCall, bound outputs, ()): the row statistics into
    row_stats (delta, lse_log2), and the gradients into `gradients` (DK, DV, DQ, DBIAS)."""
    stats = dict(zip(core.ROW_STATS_OUTPUTS, row_stats))
    arrays = dict(zip(_OPTIONAL_INPUTS, tensors), Q=q, K=k, V=v, BIAS=bias, O=out, DO=dout, LSE=lse,
                  DLSE=None if dlse is None else dlse.contiguous(),
                  **{core.ROW_STATS_INPUTS[name]: x for name, x in stats.items()})
    # The Gluon backward kernels copy 16 bytes: views that start off a boundary take tl.
    gluon = any(plan.gluon_backward_tiles("host")) and all(x.data_ptr() % 16 == 0 for x in (q, k, v, dout))
    calls = plan.backward_calls(arrays, _placeholder(q), bias_grad, _spec("grad_out", dout), gluon=gluon,
                                descriptors="host", slopes_grad=slopes_grad, need_dq=need_dq, need_dkdv=need_dkdv)
    # The Gluon dK/dV kernel's DESCRIPTOR_SCRATCH: unused here (host descriptors).
    outputs = {**gradients, **stats}
    return [(call, plan.launch_outputs(call, outputs, _placeholder(q)), ()) for call in calls]


@_backward_op.register_fake
def _(dout, dlse, q, k, v, out, lse, bias, tensors, bias_grad, slopes_grad, need_dq, need_dkdv, *encoded):
    plan = _plan(q, k, v, bias, tensors, _decode(*encoded))
    dq, dk, dv, score = _gradient_shapes(plan, bias_grad, slopes_grad, need_dq, need_dkdv)
    return q.new_empty(dq), k.new_empty(dk), v.new_empty(dv), q.new_empty(score, dtype=torch.float32)


def _needs(qkv_need_grad) -> tuple:
    """(need_dq, need_dkdv) from autograd's needs_input_grad of q, k and v: a backward where k
    and v take no gradient (a frozen encoder's, a cache's) runs no dK/dV pass, and one where q
    takes none no dQ pass (unless a bias or the slopes need its programs)."""
    need_q, need_k, need_v = qkv_need_grad
    return bool(need_q), bool(need_k or need_v)


def _save_for_backward(ctx, q, k, v, out, lse, bias, tensors, bias_grad: bool, slopes_grad: bool) -> None:
    """What every autograd path (the op's, the eager Function's, torch.func's) keeps for the backward."""
    ctx.save_for_backward(q, k, v, out, lse, bias, *tensors)
    ctx.bias_grad, ctx.slopes_grad = bias_grad, slopes_grad
    ctx.set_materialize_grads(False)  # an unused lse gets no zero gradient to read


def _setup_context(ctx, inputs, output):
    q, k, v, bias, slopes, tensors, *encoded = inputs
    _save_for_backward(ctx, q, k, v, *output, bias, tensors, bias is not None and bias.requires_grad,
                       slopes is not None and slopes.requires_grad)
    ctx.encoded = encoded


def _input_grads(plan: core.AttentionPlan, backward, grad_out, grad_lse, out, bias, slopes, bias_grad: bool,
                 slopes_grad: bool, need_dq: bool, need_dkdv: bool) -> tuple:
    """(dq, dk, dv, dbias, dslopes) from `backward` (the op, or its implementation in eager calls;
    it takes need_dq and need_dkdv), None where not needed."""
    plan.check_backward()
    if grad_out is None:  # only lse was used
        grad_out = torch.zeros_like(out)
    dq, dk, dv, score_grad = backward(grad_out, grad_lse)
    dq, dk, dv = (dq if need_dq else None), (dk if need_dkdv else None), (dv if need_dkdv else None)
    grad_bias = grad_slopes = None
    if bias_grad:
        # dBias was written for the full (B, Hq, Nq, Nkv) score; sum it over the broadcast axes.
        axes = plan.bias_reduce_axes
        grad_bias = (score_grad.sum(dim=axes, keepdim=True) if axes else score_grad).reshape(bias.shape).to(bias.dtype)
    elif slopes_grad:
        grad_slopes = score_grad.sum(dim=plan.slopes_reduce_axes).reshape(slopes.shape)
    return dq, dk, dv, grad_bias, grad_slopes


def _backward(ctx, grad_out, grad_lse, backward_op=_backward_op):
    q, k, v, out, lse, bias, *tensors = ctx.saved_tensors
    plan = _plan(q, k, v, bias, tensors, _decode(*ctx.encoded))
    need_dq, need_dkdv = _needs(ctx.needs_input_grad[:3])
    grads = _input_grads(
        plan, lambda g, gl: backward_op(g, gl, q, k, v, out, lse, bias, tensors, ctx.bias_grad, ctx.slopes_grad,
                                        need_dq, need_dkdv, *ctx.encoded),
        grad_out, grad_lse, out, bias, tensors[_SLOPES_AT], ctx.bias_grad, ctx.slopes_grad, need_dq, need_dkdv,
    )
    return grads + (None,) * (1 + len(ctx.encoded))


_forward_op.register_autograd(_backward, setup_context=_setup_context)


def _under_functorch() -> bool:
    """Whether a torch.func transform (vmap, grad, ...) is active: its calls go through
    _TransformedAttention, not the eager shortcut."""
    return torch._C._functorch.maybe_current_level() is not None


class _TransformedAttention(torch.autograd.Function):
    """The ops under torch.func transforms (grad, vmap and their compositions), which need an
    autograd.Function with setup_context (the ops' own autograd has none) and a vmap rule: generated
    here, it vmaps the ops inside, which have theirs (_vmap_rule). The ops' autograd formula."""

    generate_vmap_rule = True

    @staticmethod
    def forward(q, k, v, bias, slopes, tensors, *encoded):
        return _forward_op(q, k, v, bias, slopes, tensors, *encoded)

    setup_context = staticmethod(_setup_context)

    @staticmethod
    def backward(ctx, grad_out, grad_lse):
        return _backward(ctx, grad_out, grad_lse, _TransformedBackward.apply)


class _TransformedBackward(torch.autograd.Function):
    """The backward op under torch.func, whose grad records every backward (it may be nested).
    A second derivative raises: flashx has none. (The op's own autograd stand-in, torch's, is a
    Function functorch refuses; computed without a record, the outer derivative would be 0.)"""

    generate_vmap_rule = True

    @staticmethod
    def forward(*args):
        return _backward_op(*args)

    @staticmethod
    def setup_context(ctx, inputs, output):
        pass

    @staticmethod
    def backward(ctx, *grads):
        raise NotImplementedError(core.plan.NO_SECOND_DERIVATIVE)


class _NoSecondDerivative(torch.autograd.Function):
    """The eager backward's gradients where autograd records it (create_graph=True) and the
    gradients depend on something that requires grad (the inputs, or the incoming gradient):
    differentiating them raises. Without it they would come back as constants, and a second
    derivative through them (a gradient penalty) silently wrong. anchor: one tensor that requires
    grad, so that the gradients get this record."""

    @staticmethod
    def forward(ctx, anchor, *grads):
        return tuple(g.detach() for g in grads)

    @staticmethod
    def backward(ctx, *grads):
        raise NotImplementedError(core.plan.NO_SECOND_DERIVATIVE)


def _vmap_rule(op, batch_first: tuple, bias_at: int, tensors_at: int, options_at: int, mapped_outputs,
               dense_at: tuple = ()):
    """A torch.func.vmap rule for `op`: where core.folds_mapped_axis allows, the mapped axis folds
    into the batch axis of the op's batch-first tensors (positions batch_first) and out of its
    first `mapped_outputs` outputs (an int, or a function of the op's arguments; the rest, dBias's
    empty stand-in, come back unmapped): one launch. Otherwise the op runs one mapped slice at a
    time and its outputs are stacked. The
    tensors at dense_at (the backward's out and lse, which it reads as the forward wrote them)
    are made contiguous: an unmapped one folds by expand + reshape, at batch 1 a view of stride 0
    (torch.func.jacrev maps only the cotangents), and a slice of a mapped one may be strided."""

    def dense(call_args) -> list:
        return [x.contiguous() if i in dense_at and x is not None else x for i, x in enumerate(call_args)]

    def rule(info, in_dims, *args):
        size = info.batch_size
        tensors, tensor_dims = args[tensors_at], in_dims[tensors_at]
        optional = {name: (_slice_shape(x, d), d is not None)
                    for name, x, d in zip(_OPTIONAL_INPUTS, tensors, tensor_dims) if x is not None}
        if args[bias_at] is not None:
            optional["BIAS"] = (_slice_shape(args[bias_at], in_dims[bias_at]), in_dims[bias_at] is not None)
        if core.folds_mapped_axis(_decode(*args[options_at:]), optional):
            args = list(args)
            for i in batch_first:
                if args[i] is not None:
                    x = args[i].movedim(in_dims[i], 0) if in_dims[i] is not None else args[i].expand(size, *args[i].shape)
                    args[i] = x.reshape(size * x.shape[1], *x.shape[2:])
            outputs = op(*dense(args))
            mapped = mapped_outputs if isinstance(mapped_outputs, int) else mapped_outputs(args)
            unfolded = tuple(o.view(size, o.shape[0] // size, *o.shape[1:]) for o in outputs[:mapped])
            return unfolded + tuple(outputs[mapped:]), (0,) * mapped + (None,) * (len(outputs) - mapped)

        def select(x, d, i):
            if isinstance(x, list):
                return [select(t, e, i) for t, e in zip(x, d)]
            return x.select(d, i) if d is not None else x
        slices = [op(*dense([select(x, d, i) for x, d in zip(args, in_dims)])) for i in range(size)]
        return tuple(torch.stack(outputs) for outputs in zip(*slices)), (0,) * len(slices[0])
    return rule


def _slice_shape(x: torch.Tensor, mapped_dim: Optional[int]) -> tuple:
    return tuple(s for i, s in enumerate(x.shape) if i != mapped_dim)


# Positions in the ops' arguments: forward (q, k, v, bias, slopes, tensors, *options), backward (dout,
# dlse, q, k, v, out, lse, bias, tensors, bias_grad, slopes_grad, need_dq, need_dkdv, *options). The backward's fourth
# output is mapped where it holds the slopes' per-batch parts (slopes_grad), which fold as dQ does.
_forward_op.register_vmap(_vmap_rule(_forward_op, (0, 1, 2), 3, 5, 6, mapped_outputs=2))
_backward_op.register_vmap(_vmap_rule(_backward_op, (0, 1, 2, 3, 4, 5, 6), 7, 8, 13,
                                      mapped_outputs=lambda args: 4 if args[10] else 3, dense_at=(5, 6)))


# Autograd's own vmap (is_grads_batched) wraps cotangents in legacy batched tensors.
_is_legacy_batched = getattr(torch._C._functorch, "is_legacy_batchedtensor", lambda tensor: False)


class _EagerAttention(torch.autograd.Function):
    """The ops' implementation and gradients, called directly in eager mode.

    A torch.library op's dispatch costs tens of microseconds of host time per call, more than a
    short sequence's kernel runs; eager calls skip it, torch.compile traces the ops.
    """

    @staticmethod
    def forward(ctx, plan, q, k, v, bias, slopes, tensors):
        # tensors (offsets, slopes, block maps): one argument, not one each, as autograd's
        # per-argument bookkeeping costs host time; autograd sees none of them. slopes: ALiBi's
        # slopes again, where they take a gradient (else None).
        bias_grad = bias is not None and ctx.needs_input_grad[4]
        out, lse = _forward_impl(plan, q, k, v, bias, tensors, backward_ahead=not bias_grad,
                                 slopes_grad=slopes is not None, needs=_needs(ctx.needs_input_grad[1:4]))
        _save_for_backward(ctx, q, k, v, out, lse, bias, tensors, bias_grad, slopes is not None)
        ctx.plan = plan
        return out, lse

    @staticmethod
    def backward(ctx, grad_out, grad_lse):
        if any(g is not None and _is_legacy_batched(g) for g in (grad_out, grad_lse)):
            # Batched cotangents from autograd's own vmap: the kernels need the tensors' storage.
            raise NotImplementedError(
                "flashx's backward takes no batched gradients (torch.autograd.grad(is_grads_batched=True), "
                "torch.autograd.functional.jacobian(vectorize=True)): use torch.func.vjp under torch.func.vmap, "
                "or torch.func.jacrev")
        q, k, v, out, lse, bias, *tensors = ctx.saved_tensors
        plan = ctx.plan
        need_dq, need_dkdv = _needs(ctx.needs_input_grad[1:4])
        grads = _input_grads(
            plan, lambda g, gl: _backward_impl(plan, g, gl, q, k, v, out, lse, bias, tensors, ctx.bias_grad,
                                               ctx.slopes_grad, need_dq, need_dkdv),
            grad_out, grad_lse, out, bias, tensors[_SLOPES_AT], ctx.bias_grad, ctx.slopes_grad, need_dq, need_dkdv,
        )
        if torch.is_grad_enabled():  # create_graph=True
            anchor = next((t for t in (grad_out, grad_lse, q, k, v, bias, tensors[_SLOPES_AT])
                           if t is not None and t.requires_grad), None)
            if anchor is not None:
                present = [g for g in grads if g is not None]
                marked = iter(_NoSecondDerivative.apply(anchor, *present))
                grads = tuple(None if g is None else next(marked) for g in grads)
        return (None,) + grads + (None,)


def _packed_group(q, k, tensors: dict, options: core.CallOptions, bias) -> int:
    """core.packed_query_heads of a call, asked only of one-query GQA shapes (a shape check first:
    every call passes here)."""
    seq_axis, heads_axis = (2, 1) if options.layout == "bhnd" else (1, 2)
    if not (type(q) is torch.Tensor and q.dim() == 4 and q.shape[seq_axis] == 1 and isinstance(k, torch.Tensor)
            and k.dim() == 4 and k.shape[heads_axis] < q.shape[heads_axis]):
        return 1
    optional = [name for name, x in tensors.items() if x is not None] + (["BIAS"] if bias is not None else [])
    return core.packed_query_heads(options, q.shape, k.shape, optional)


def _run_packed(q, k, v, tensors: dict, options: core.CallOptions, return_lse: bool, bias, group: int,
                dense_key: Optional[tuple]):
    """_run of a one-query GQA call as `group` query rows of each kv head (core.packed_query_heads),
    without causal, on the views of _packed_call; out and lse viewed back. dense_key: a plain
    call's key (attention's), under which _DENSE_PLANS then keeps the packed call's plan
    (_PackedPlan), so that its next call goes straight to _run_packed_eager."""
    packed = dataclasses.replace(options, causal=False, layout="bhnd")
    rows, k, v = _packed_call(q, k, v, group, options.layout)
    key = _dense_key(rows, k, v, False, options.scale, "bhnd", options.window, options.softcap,
                     options.float32_precision) if dense_key else None
    plan = _DENSE_PLANS.get(key) if key is not None else None
    if plan is not None:
        out, lse = _run_eager(plan, rows, k, v, None, _NO_TENSORS, True)
    else:
        out, lse = _run(rows, k, v, tensors, packed, True, bias, dense_key=key)
        plan = _DENSE_PLANS.get(key) if key is not None else None
    if plan is not None:
        _keep_dense_plan(dense_key, _PackedPlan(group, plan))
    return _unpacked(q, out, lse, return_lse)


class _PackedPlan(NamedTuple):
    """_DENSE_PLANS' entry for a plain call that runs packed (_run_packed): its GQA group and the
    packed call's plan."""

    group: int
    plan: core.AttentionPlan


def _run_packed_eager(packed: _PackedPlan, q, k, v, layout: str, return_lse: bool):
    """A plain packed call again (attention's fast path): _run_packed with its plan known."""
    out, lse = _run_eager(packed.plan, *_packed_call(q, k, v, packed.group, layout), None, _NO_TENSORS, True)
    return _unpacked(q, out, lse, return_lse)


def _packed_call(q, k, v, group: int, layout: str) -> tuple:
    """The packed call's arrays, views all, in "bhnd" whatever the caller's layout: q (B, 1, Hq, D),
    or "bhnd" (B, Hq, 1, D), as (B, Hkv, g, D); "bnhd" k and v (B, N, Hkv, D) (paged: (pages, P,
    Hkv, D)) transposed, which the kernels read as before (same memory, same order). Its out (B,
    Hkv, g, Dv) is then q's out as a view in either layout: in "bnhd" a packed out of (B, g, Hkv,
    Dv) would interleave the heads and cost a copy a call (a launch, in a decode step's few us)."""
    rows = q.reshape(q.shape[0], q.shape[1] * q.shape[2] // group, group, q.shape[-1])
    if layout == "bnhd":
        k, v = k.transpose(1, 2), v.transpose(1, 2)
    return rows, k, v


def _unpacked(q, out, lse, return_lse: bool):
    """The packed call's out (B, Hkv, g, Dv) and lse (B, Hkv, g) in q's shape, views: out (B, 1,
    Hq, Dv) or "bhnd" (B, Hq, 1, Dv); lse (B, Hq, 1)."""
    out = out.reshape(*q.shape[:-1], out.shape[-1])
    lse = lse.reshape(q.shape[0], -1, 1)
    return (out, lse) if return_lse else out


def _dropout_seed(device: torch.device) -> torch.Tensor:
    """A fresh seed for one call's dropout, from torch's generator of the device (torch.manual_seed
    repeats it): int32 core.plan.DROPOUT_SEED_SHAPE. The backward reads it back, so it redraws nothing."""
    return torch.randint(-2**31, 2**31, core.plan.DROPOUT_SEED_SHAPE, dtype=torch.int32, device=device)


def _run(
    q, k, v, tensors: dict, options: core.CallOptions, return_lse: bool, bias: Optional[torch.Tensor] = None,
    dense_key: Optional[tuple] = None,
):
    """Validate (naming the argument) before any dispatch, build mask_mod's block map if the
    plan asks for one, then call the op (eager: its implementation). dense_key: where to keep
    the plan for _DENSE_PLANS. A one-query GQA call runs packed (_run_packed)."""
    group = _packed_group(q, k, tensors, options, bias)
    if group > 1:
        try:
            return _run_packed(q, k, v, tensors, options, return_lse, bias, group, dense_key)
        except (ValueError, TypeError):
            if not torch.compiler.is_compiling():
                # The packed call's message shows q regrouped, (B, g, Hkv, D): the call as given
                # raises the same check's message with the caller's shapes.
                _plan(q, k, v, bias, [tensors.get(name) for name in _OPTIONAL_INPUTS], options)
            raise
    if core.check_dropout_p(options.dropout_p) > 0 and isinstance(q, torch.Tensor):
        tensors = dict(tensors, DROPOUT_SEED=_dropout_seed(q.device))
    tensor_list = [tensors.get(name) for name in _OPTIONAL_INPUTS]
    if torch.compiler.is_compiling():
        functions_key = _compiled_function_key(options)
        # Planned without the functions, which Dynamo cannot inspect: the plan here only validates
        # shapes (the op plans again with them, from the registry); they were checked eagerly.
        _plan(q, k, v, bias, tensor_list, dataclasses.replace(options, mask_mod=None, score_mod=None,
                                                             score_mod_grad=None), traced=True)
        out, lse = _forward_op(q, k, v, bias, _differentiated_slopes(tensor_list), tensor_list,
                               *_encode(options, functions_key))
        return (out, lse) if return_lse else out
    plan = _plan(q, k, v, bias, tensor_list, options)
    # An eager call registers its mask_mod / score_mod objects, so that compiled code may pass
    # them later (the eager path itself never encodes them; before NOTES v0.49 a score_mod used
    # eagerly first still failed under torch.compile).
    _function_key(options)
    if plan.auto_block_mask is not None:
        built = _build_block_mask(plan.auto_block_mask, q.device)
        options = dataclasses.replace(options, block_mask=built.spec)
        tensors = {**tensors, **built.kernel_arrays()}
        tensor_list = [tensors.get(name) for name in _OPTIONAL_INPUTS]
        plan = _plan(q, k, v, bias, tensor_list, options)
    if dense_key is not None:
        _keep_dense_plan(dense_key, plan)
    if _under_functorch():
        out, lse = _TransformedAttention.apply(q, k, v, bias, _differentiated_slopes(tensor_list), tensor_list,
                                               *_encode(options))
        return (out, lse) if return_lse else out
    return _run_eager(plan, q, k, v, bias, tensor_list, return_lse)


def _differentiated_slopes(tensor_list: list) -> Optional[torch.Tensor]:
    """ALiBi's slopes where they require grad, else None: the ops and autograd Functions take them
    again as an argument of their own, as autograd sees no tensor inside a list."""
    slopes = tensor_list[_SLOPES_AT]
    return slopes if slopes is not None and slopes.requires_grad else None


def _run_eager(plan: core.AttentionPlan, q, k, v, bias, tensor_list: list, return_lse: bool):
    slopes = _differentiated_slopes(tensor_list)
    if torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad
                                    or (bias is not None and bias.requires_grad) or slopes is not None):
        out, lse = _EagerAttention.apply(plan, q, k, v, bias, slopes, tensor_list)
    else:  # nothing to differentiate: no autograd node
        if forward_ad._current_level >= 0:  # inside a dual level (forward-mode AD): a cheap check first
            _refuse_tangents(q, k, v, bias, tensor_list[_SLOPES_AT])
        out, lse = _forward_impl(plan, q, k, v, bias, tensor_list)
    return (out, lse) if return_lse else out


def _refuse_tangents(*tensors) -> None:
    """Forward-mode AD (torch.autograd.forward_ad) has no formula here: an input with a tangent
    raises, as torch's SDPA does, rather than giving an output without one (a zero tangent).
    Inputs that require grad reach torch's own refusal through _EagerAttention."""
    if any(t is not None and forward_ad.unpack_dual(t).tangent is not None for t in tensors):
        raise NotImplementedError("flashx has no forward-mode derivative (jvp): torch.autograd.forward_ad "
                                  "and torch.func.jvp / jacfwd are not supported; use reverse mode")


# Plans of plain calls (no optional arrays, functions or varlen sizes), by what they depend on:
# each tensor's sizes, strides, dtype and device, and the options with their types (True == 1,
# yet only a bool passes validation). Such a call skips building the specs and options that key
# the plan cache: host time per call is what limits short sequences. The first call of a key
# takes the validating path and fills it.
_DENSE_PLANS: dict = {}
_DENSE_PLANS_MAX = 512
core.plan.register_plan_holder(_DENSE_PLANS.clear)


def _keep_dense_plan(key: tuple, plan) -> None:
    if len(_DENSE_PLANS) >= _DENSE_PLANS_MAX:
        _DENSE_PLANS.clear()
    _DENSE_PLANS[key] = plan


_NO_TENSORS = [None] * len(_OPTIONAL_INPUTS)


def _dense_key(q, k, v, causal, scale, layout, window, softcap, float32_precision) -> Optional[tuple]:
    if not (isinstance(q, torch.Tensor) and isinstance(k, torch.Tensor) and isinstance(v, torch.Tensor)):
        return None  # the validating path names the argument
    if window is not None:
        if type(window) not in (tuple, list):
            return None
        window = (tuple(window), tuple(map(type, window)))
    if q.layout is not torch.strided or k.layout is not torch.strided or v.layout is not torch.strided:
        return None  # the validating path names the argument
    key = (q.shape, q.stride(), q.dtype, q.device, k.shape, k.stride(), k.dtype, k.device,
           v.shape, v.stride(), v.dtype, v.device, causal, type(causal), scale, type(scale), layout, type(layout),
           window, softcap, type(softcap), float32_precision, type(float32_precision))
    try:
        hash(key)
    except TypeError:  # an unhashable option: the validating path reports it
        return None
    return key


def _autocast(*tensors):
    """The tensors cast to torch.autocast's dtype where it is on for the first one's device (floating
    ones only), as autocast casts scaled_dot_product_attention's inputs; else as they are."""
    q = tensors[0]
    if not isinstance(q, torch.Tensor) or not torch.is_autocast_enabled(q.device.type):
        return tensors
    dtype = torch.get_autocast_dtype(q.device.type)
    return tuple(x.to(dtype) if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in tensors)


def _block_mask_tensors(block_mask: Optional[core.BlockMask]) -> dict:
    if block_mask is None:
        return {}
    if not isinstance(block_mask, core.BlockMask) or not isinstance(block_mask.counts, torch.Tensor):
        got = type(block_mask).__name__ if not isinstance(block_mask, core.BlockMask) else "one of flashx.jax's"
        raise TypeError(f"block_mask must come from flashx.torch.create_block_mask, got {got}")
    return block_mask.kernel_arrays()


def _build_block_mask(spec: core.BlockMaskSpec, device: torch.device) -> core.BlockMask:
    arrays = {name: torch.empty(shape, dtype=torch.int8 if name == "state" else torch.int32, device=device)
              for name, shape in spec.shapes.items()}
    (first, _), (second, _) = core.block_map_calls(spec)
    if spec.num_q_blocks and spec.num_kv_blocks and device.type != "meta":
        with _on_device(arrays["state"]):
            first.launch((arrays["state"], arrays["counts"], arrays["indices"]))
            second.launch((arrays["t_counts"], arrays["t_indices"]), inputs=(arrays["state"],))
    else:
        for name in ("counts", "t_counts"):
            arrays[name].zero_()
    return core.BlockMask(spec, arrays["counts"], arrays["indices"], arrays["t_counts"], arrays["t_indices"])


def create_block_mask(
    mask_mod: Any, B: Optional[int], H: Optional[int], Nq: int, Nkv: int, *,
    causal: bool = False, window: Optional[tuple] = None, device: Union[str, torch.device] = "cuda",
    blocks: Optional[tuple] = None,
) -> core.BlockMask:
    """A reusable block map of mask_mod (with causal/window folded in), built on `device`.

    mask_mod(b, h, q_idx, kv_idx) -> bool is a @triton.jit function; B or H None means the
    mask does not depend on that index. Pass the result as `block_mask=` to `attention` with
    the same sizes, causal and window; empty blocks are never loaded, full blocks skip the mask.
    blocks: (BLOCK_M, BLOCK_N) tiles of the map, which the attention kernels then use.
    """
    spec = core.plan_block_mask(mask_mod, B, H, Nq, Nkv, causal=causal, window=window, blocks=blocks)
    device = _block_mask_device(device)
    # Registered now, so that compiled code finds it by id() (_compiled_function_key) without an
    # eager call first.
    _function_key(core.CallOptions(block_mask=spec))
    return _build_block_mask(spec, device)


def _block_mask_device(device: Any) -> torch.device:
    """create_block_mask's device, checked before anything is allocated on it."""
    try:
        device = torch.device(device)
    except (RuntimeError, TypeError) as err:
        raise ValueError(f"device must be a torch.device or a device string, got {device!r}") from err
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError("create_block_mask builds on device 'cuda' (the default), but CUDA is not available here: "
                         "pass device= the device of the tensors it will mask (e.g. 'cpu')")
    return device


def attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    causal: bool = False,
    scale: Optional[float] = None,
    layout: str = "bnhd",
    window: Optional[tuple] = None,
    alibi_slopes: Optional[torch.Tensor] = None,
    softcap: Optional[float] = None,
    cu_seqlens_q: Optional[torch.Tensor] = None,
    cu_seqlens_k: Optional[torch.Tensor] = None,
    max_seqlen_q: Optional[int] = None,
    max_seqlen_k: Optional[int] = None,
    mask_mod: Any = None,
    score_mod: Any = None,
    score_mod_grad: Any = None,
    block_mask: Optional[core.BlockMask] = None,
    deterministic: bool = False,
    return_lse: bool = False,
    dropout_p: float = 0.0,
    seqused_q: Optional[torch.Tensor] = None,
    seqused_k: Optional[torch.Tensor] = None,
    block_table: Optional[torch.Tensor] = None,
    float32_precision: str = "tf32x3",
) -> Union[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
    """Fused softmax(score(q, k)) v, differentiable in q, k, v and alibi_slopes.

    Args:
        q: (B, Nq, Hq, D) for layout "bnhd", (B, Hq, Nq, D) for "bhnd"; varlen: (total_q, Hq, D).
        k: (B, Nkv, Hkv, D), Hq a multiple of Hkv (GQA/MQA: q head h reads kv head h // (Hq // Hkv)).
        v: (B, Nkv, Hkv, Dv).
        causal: bottom-right aligned: query i sees key j iff j <= i + Nkv - Nq.
        scale: defaults to 1 / sqrt(D).
        layout: "bnhd" or "bhnd"; any strides are accepted, no copy is made.
        window: (left, right): query i sees key j iff i' - left <= j <= i' + right, i' = i + Nkv - Nq;
            -1 leaves a side unbounded; with causal, right = 0.
        alibi_slopes: float32 (Hq,) or (B, Hq): score -= slope * |i' - j|; differentiable (slopes
            that require grad get their gradient, as q, k and v do).
        softcap: score = softcap * tanh(score / softcap).
        cu_seqlens_q, cu_seqlens_k: int32 (B + 1,) offsets of packed sequences, with max_seqlen_q/k.
        mask_mod: @triton.jit (b, h, q_idx, kv_idx) -> bool; a block map skips empty blocks.
        score_mod: @triton.jit (score, b, h, q_idx, kv_idx) -> score; score_mod_grad gives its
            derivative in score, for the backward.
        block_mask: from `create_block_mask`, reused across calls.
        deterministic: accepted for FlashAttention parity; flashx's backward uses no atomics, so its
            gradients are bitwise reproducible either way.
        return_lse: also return the float32 log-sum-exp, (B, Hq, Nq) (varlen: (Hq, total_q)).
        dropout_p: each attention weight is dropped with this probability and the rest scaled by
            1 / (1 - dropout_p), as in FlashAttention and SDPA; a fresh mask each call, drawn from
            torch's generator on q's device (torch.manual_seed repeats it); lse keeps every weight.
        seqused_q, seqused_k: int32 (B,): only the first seqused_q[b] query rows and seqused_k[b]
            keys of batch b (of sequence b, varlen) take part, the rest are padding (output 0);
            causal and windows align on these lengths (a KV cache's filled length: seqused_k).
        block_table: int32 (B, pages_per_seq): k and v are a paged KV cache, (pages, page_size,
            Hkv, D) ("bhnd": (pages, Hkv, page_size, D)), and batch b's keys are the pages
            block_table[b] names, in order (Nkv = pages_per_seq * page_size; seqused_k cuts each);
            with varlen q, cu_seqlens_q alone (no cu_seqlens_k). Forward only: no gradient flows
            through a paged call.
        float32_precision: how float32 inputs are multiplied (16-bit inputs ignore it):
            "tf32x3" (three tf32 tensor-core products per dot, float32's accuracy: errors against
            float64 of "ieee"'s order), "ieee" (full float32 products on the CUDA cores: 2-5x slower),
            "bf16x3" (three bf16 products per dot, XLA's BF16_BF16_F32_X3: ~1e-5 relative error,
            2-3x faster than "tf32x3" at D <= 128) or "tf32" (one tf32 product: ~1e-3 relative
            error, ~2x faster than "tf32x3").

    The score is q.k * scale -> score_mod -> softcap -> alibi -> masks, in that order.
    Returns out in q's layout and dtype, last dim Dv; and lse if return_lse. Under torch.autocast
    q, k and v are cast to its dtype first, as torch's scaled_dot_product_attention is.
    """
    if torch._C._is_any_autocast_enabled() or torch.compiler.is_compiling():  # one cheap call eagerly
        q, k, v = _autocast(q, k, v)
    core.check_flag("deterministic", deterministic)
    core.check_flag("return_lse", return_lse)
    if not (type(q) is type(k) is type(v) is torch.Tensor) and (
            _distributed.any_dtensor(q, k, v) or _nested.any_nested(q, k, v)):
        keywords = dict(causal=causal, scale=scale, layout=layout, window=window, softcap=softcap,
                        max_seqlen_q=max_seqlen_q, max_seqlen_k=max_seqlen_k, mask_mod=mask_mod, score_mod=score_mod,
                        score_mod_grad=score_mod_grad, block_mask=block_mask, dropout_p=dropout_p,
                        float32_precision=float32_precision)
        tensors = dict(alibi_slopes=alibi_slopes, cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k,
                       seqused_q=seqused_q, seqused_k=seqused_k, block_table=block_table)
        if _nested.any_nested(q, k, v):
            return _nested.attention_on_nested(attention, q, k, v, {**keywords, **tensors}, return_lse)
        options = _distributed.core_options(keywords)
        return _distributed.attention_on_dtensors(
            attention, lambda q, k, v, named: _plan(q, k, v, None, [named.get(n) for n in _OPTIONAL_INPUTS], options,
                                                    traced=torch.compiler.is_compiling()),
            q, k, v, keywords, tensors, return_lse)
    dense_key = None
    if (alibi_slopes is None and cu_seqlens_q is None and cu_seqlens_k is None and max_seqlen_q is None
            and max_seqlen_k is None and seqused_q is None and seqused_k is None and block_table is None
            and mask_mod is None and score_mod is None and score_mod_grad is None
            and block_mask is None and type(dropout_p) is float and dropout_p == 0.0
            and not torch.compiler.is_compiling() and not _under_functorch()):
        dense_key = _dense_key(q, k, v, causal, scale, layout, window, softcap, float32_precision)
        plan = _DENSE_PLANS.get(dense_key) if dense_key is not None else None
        if type(plan) is _PackedPlan:  # a GQA decode step (core.packed_query_heads)
            return _run_packed_eager(plan, q, k, v, layout, return_lse)
        if plan is not None:
            return _run_eager(plan, q, k, v, None, _NO_TENSORS, return_lse)
    options = core.CallOptions(
        causal=causal, scale=scale, layout=layout, window=tuple(window) if isinstance(window, list) else window,
        softcap=softcap, max_seqlen_q=max_seqlen_q, max_seqlen_k=max_seqlen_k,
        mask_mod=mask_mod, score_mod=score_mod, score_mod_grad=score_mod_grad,
        block_mask=block_mask.spec if isinstance(block_mask, core.BlockMask) else block_mask, dropout_p=dropout_p,
        float32_precision=float32_precision,
    )
    # Offsets, lengths and page tables are read as dense vectors: a strided view costs one tiny copy.
    tensors = {_KERNEL_NAME[keyword]: x.contiguous() if isinstance(x, torch.Tensor) and keyword != "alibi_slopes" else x
               for keyword, x in (("alibi_slopes", alibi_slopes), ("cu_seqlens_q", cu_seqlens_q),
                                  ("cu_seqlens_k", cu_seqlens_k), ("seqused_q", seqused_q), ("seqused_k", seqused_k),
                                  ("block_table", block_table)) if x is not None}
    tensors.update(_block_mask_tensors(block_mask))
    return _run(q, k, v, tensors, options, return_lse, dense_key=dense_key)
