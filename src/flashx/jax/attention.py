"""flashx attention for JAX arrays: jax-triton's `triton_call` on the GPU, Triton's interpreter on the CPU.

Differentiable through `jax.custom_vjp` (residuals q, k, v, o, lse); works inside `jax.jit`.
"""
from __future__ import annotations

import dataclasses
import functools
import threading
import warnings
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Mapping, Optional, Union

import jax
import jax.numpy as jnp
import numpy as np

from .. import core
from . import gluon as _gluon

_jax_triton = None


def _triton_call(*args, **kwargs):
    """jax_triton.triton_call, imported on first use: it needs a GPU build of JAX."""
    global _jax_triton
    if _jax_triton is None:
        _jax_triton = _gluon.import_jax_triton()
    return _jax_triton.triton_call(*args, **kwargs)


jax.tree_util.register_pytree_node(
    core.BlockMask,
    lambda m: ((m.counts, m.indices, m.t_counts, m.t_indices), m.spec),
    lambda spec, arrays: core.BlockMask(spec, *arrays),
)


def _spec(name: str, x: Any, shapes_only: bool = False) -> core.ArraySpec:
    """x's ArraySpec; shapes_only: x may be a jax.ShapeDtypeStruct (a partitioner's operand)."""
    if not isinstance(x, (jax.Array, jax.ShapeDtypeStruct) if shapes_only else jax.Array):
        raise TypeError(f"{name} must be a jax.Array, got {type(x).__name__}")
    # JAX arrays are dense and row-major; inside jit the backend stands for the device.
    return core.ArraySpec(
        shape=tuple(x.shape), strides=core.dense_strides(x.shape), dtype=str(x.dtype),
        device="cpu" if jax.default_backend() == "cpu" else "cuda",
    )


def _to_torch(a: np.ndarray):
    """A zero-copy torch view of a host buffer, for Triton's interpreter (which runs on torch tensors)."""
    import torch

    a = np.ascontiguousarray(a)
    with warnings.catch_warnings():  # callback buffers are read-only; kernels only write the outputs
        warnings.simplefilter("ignore", UserWarning)
        if a.dtype.name == "bfloat16":  # ml_dtypes' bfloat16 has no DLPack or torch.from_numpy route
            return torch.from_numpy(a.view(np.uint16)).view(torch.bfloat16)
        return torch.from_numpy(a)


def _varying_axes(x) -> frozenset:
    """The shard_map mesh axes along which x varies from device to device (none outside shard_map)."""
    aval = jax.typeof(x)
    manual = getattr(aval, "manual_axis_type", None)  # JAX >= 0.10; before it, aval.vma
    return frozenset(manual.varying if manual is not None else getattr(aval, "vma", ()))


def _varying_over(x, axes: frozenset):
    """x typed as varying along `axes` as well (the shard_map type of a value computed from inputs that vary)."""
    missing = tuple(sorted(axes - _varying_axes(x)))
    if not missing:
        return x
    return jax.lax.pcast(x, missing, to="varying") if hasattr(jax.lax, "pcast") else jax.lax.pvary(x, missing)


def _typed_like(grad, primal):
    """A gradient given its primal's shard_map type: summed over the axes along which it varies
    and the primal does not (the transpose of the kernel taking the primal as varying there),
    cast as varying along those the primal varies along."""
    extra = tuple(sorted(_varying_axes(grad) - _varying_axes(primal)))
    if extra:
        grad = jax.lax.psum(grad, extra)
    return _varying_over(grad, _varying_axes(primal))


# A call builder: (arrays by kernel name, placeholder) -> (KernelCall, extra leading inputs).
CallBuilder = Callable[[Mapping[str, Any], Any], tuple]


# Where a thread is recording launches (_recorded_launches), the list it appends them to.
_recording = threading.local()


def _launch(build: CallBuilder, arrays: Mapping[str, Any], out_types: tuple, zeroed: tuple = ()) -> tuple:
    """Run one kernel on JAX arrays: triton_call on the GPU, a host callback into the interpreter on the CPU.

    zeroed: indices of the outputs that start at zero (the kernel may leave parts unwritten).
    Inside shard_map the outputs vary along every mesh axis an input varies along (neither
    triton_call nor a host callback types them so).
    """
    arrays = {name: a for name, a in arrays.items() if a is not None}
    varying = frozenset().union(*map(_varying_axes, arrays.values()))
    return tuple(_varying_over(out, varying) for out in _launch_kernel(build, arrays, out_types, zeroed))


def _launch_kernel(build: CallBuilder, arrays: Mapping[str, Any], out_types: tuple, zeroed: tuple) -> tuple:
    """_launch's kernel call, on arrays without Nones."""
    recorded = getattr(_recording, "launches", None)
    if recorded is not None:
        recorded.append((build, {n: jax.ShapeDtypeStruct(a.shape, a.dtype) for n, a in arrays.items()},
                         tuple(out_types), tuple(zeroed)))
        return tuple(jnp.zeros(t.shape, t.dtype) for t in out_types)
    if not core.runtime.INTERPRETER:
        call, inputs = build(arrays, jnp.zeros((1,), jnp.int32))
        return tuple(_triton_call(
            *inputs, *call.args, kernel=call.kernel, out_shape=out_types, grid=call.grid,
            zeroed_outputs=tuple(zeroed), **call.options, **call.constexprs,
        ))

    def on_host(host_arrays):
        import torch

        outs = tuple((np.zeros if i in zeroed else np.empty)(t.shape, t.dtype) for i, t in enumerate(out_types))
        call, inputs = build({n: _to_torch(a) for n, a in host_arrays.items()}, torch.zeros(1, dtype=torch.int32))
        call.launch(tuple(map(_to_torch, outs)), inputs=inputs)
        return outs

    return tuple(jax.pure_callback(on_host, out_types, arrays, vmap_method="sequential"))


def _plan(options: core.CallOptions, q, k, v, bias, aux: Mapping[str, Any], shapes_only: bool = False) -> core.AttentionPlan:
    """The call's plan; shapes_only: of jax.ShapeDtypeStructs (a partitioner's operands)."""
    qkv = [_spec(name, x, shapes_only) for name, x in (("q", q), ("k", k), ("v", v))]
    specs = {name: None if x is None else _spec(core.plan.ARRAY_KEYWORDS.get(name, name), x, shapes_only)
             for name, x in dict(aux, BIAS=bias).items()}
    return core.plan_call(options, *qkv, specs)


def _output_types(call: core.KernelCall, types: Mapping[str, Any]) -> tuple:
    """The result types of a launch's outputs: types[name] for those it writes, a one-element
    stand-in for those it takes but leaves alone; a Gluon launch's DESCRIPTOR_SCRATCH, where it
    builds TMA descriptors on the device, sized by gluon.descriptor_scratch_bytes."""
    scratch = _gluon.descriptor_scratch_bytes(call) if "DESCRIPTOR_SCRATCH" in call.writes else 1
    types = dict(types, DESCRIPTOR_SCRATCH=jax.ShapeDtypeStruct((scratch,), jnp.uint8))
    return tuple(types[n] if n in call.writes else jax.ShapeDtypeStruct((1,), types[n].dtype) for n in call.outputs)


def _vmappable(fn: Callable) -> Callable:
    """fn(options, q, k, v, bias, aux, *more) -> arrays, made batchable by jax.vmap (jax-triton's
    launches refuse it). Where core.folds_mapped_axis allows, the mapped axis folds into the
    batch axis of q, k, v and `more` (the backward's out, lse, dout, dlse: all batch first) and
    out of every output: one launch. Otherwise the call runs one mapped slice at a time
    (lax.map). Calls on concrete arrays, outside any transformation, skip the wrapper's tracing."""

    @functools.wraps(fn)
    def call(options: core.CallOptions, *args):
        if not any(isinstance(x, jax.core.Tracer) for x in jax.tree_util.tree_leaves(args)):
            return fn(options, *args)

        @jax.custom_batching.custom_vmap
        def batchable(*args):
            return fn(options, *args)

        @batchable.def_vmap
        def rule(axis_size: int, in_batched, *args):
            q, k, v, bias, aux, *more = args
            optional = {name: (x.shape[int(in_batched[4][name]):], in_batched[4][name]) for name, x in aux.items()}
            if bias is not None:
                optional["BIAS"] = (bias.shape[int(in_batched[3]):], in_batched[3])
            if core.folds_mapped_axis(options, optional):
                def fold(x, mapped):
                    x = x if mapped else jnp.broadcast_to(x, (axis_size, *x.shape))
                    return x.reshape(axis_size * x.shape[1], *x.shape[2:])
                leading = [fold(x, b) for x, b in zip((q, k, v, *more), (*in_batched[:3], *in_batched[5:]))]
                outs = batchable(*leading[:3], bias, aux, *leading[3:])
                outs = jax.tree_util.tree_map(lambda o: o.reshape(axis_size, o.shape[0] // axis_size, *o.shape[1:]), outs)
            else:
                leaves, tree = jax.tree_util.tree_flatten(args)
                mapped = jax.tree_util.tree_leaves(in_batched)

                def one(slices):
                    slices = iter(slices)
                    return batchable(*jax.tree_util.tree_unflatten(tree, [next(slices) if b else x for x, b in zip(leaves, mapped)]))
                outs = jax.lax.map(one, [x for x, b in zip(leaves, mapped) if b])
            return outs, jax.tree_util.tree_map(lambda _: True, outs)

        return batchable(*args)
    return call


@jax.tree_util.register_static
@dataclasses.dataclass(frozen=True)
class _Gradients:
    """Which gradients a backward computes: q's (the dQ pass), k's and v's (the dK/dV pass), the
    bias's (dBias, (B, Hq, Nq, Nkv) written whole, then summed to its shape) and ALiBi's slopes'
    (their per-block parts). Only the custom_vjp's forward rule sees which primals are
    differentiated; it hands the backward one of these as a residual without leaves (static)."""

    q: bool = True
    kv: bool = True
    bias: bool = False
    slopes: bool = False


# --- Auto meshes: XLA's partitioner told how a launch splits ------------------------------------


def _partitioned(backward: bool, wanted: _Gradients = _Gradients()) -> Callable[[Callable], Callable]:
    """A decorator: fn(options, q, k, v, bias, aux) -> (out, lse), or with backward
    fn(options, q, k, v, bias, aux, out, lse, dout, dlse) -> (dq, dk, dv, dbias, each None unless
    `wanted` asks for it[, with wanted.slopes the slopes' per-block parts (B, Hq, blocks), split
    as the batch and heads are]), made
    splittable by XLA over a mesh of Auto axes (jax.jit of arrays with NamedShardings, the
    GSPMD / Shardy default) through jax.experimental.custom_partitioning: each device launches
    fn on its slice as core.device_split says (batch and heads; a split along any other dim
    gathered first; a call that does not split runs whole on every device). Without it XLA
    cannot split a kernel call and runs it on one device, gathering the inputs there. Inside
    shard_map or on one device, fn itself runs; with one device in the process nothing is
    wrapped."""

    def wrap(fn: Callable) -> Callable:
        @functools.wraps(fn)
        def call(options: core.CallOptions, *args):
            if not _partitions():
                return fn(options, *args)
            from jax.experimental.custom_partitioning import custom_partitioning

            shapes = jax.tree_util.tree_map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype), args)
            split_call = custom_partitioning(lambda *a: fn(options, *a))
            split_call.def_partition(
                partition=functools.partial(_partition, fn, options, backward, wanted),
                infer_sharding_from_operands=functools.partial(_infer_shardings, options, backward, wanted),
                sharding_rule=functools.partial(_sharding_rule, options, shapes, backward, wanted),
            )
            return split_call(*args)
        return call
    return wrap


def _optional_shapes(bias, aux: Mapping[str, Any]) -> dict:
    """The call's optional arrays' shapes by kernel name, BIAS included (core.splittable_axes')."""
    return {**{n: tuple(a.shape) for n, a in aux.items()}, **({} if bias is None else {"BIAS": tuple(bias.shape)})}


def _partitions() -> bool:
    """Whether _partitioned wraps launches: with several devices, where launches compile (a host
    callback into the interpreter does not survive custom_partitioning's lowering in JAX 0.10:
    jax-ml/jax#23620); _PARTITION_INTERPRETED lets a test compile such a call, never run it."""
    return jax.device_count() > 1 and (_launches_compile() or _PARTITION_INTERPRETED)


_PARTITION_INTERPRETED = False


def _partition_shardings(options: core.CallOptions, backward: bool, mesh, arg_shapes,
                         wanted: _Gradients = _Gradients()) -> tuple:
    """(split, the operands' shardings, the results') of a partitioned call (_partitioned) whose
    operands come split as arg_shapes' shardings say: those core.device_split takes; all
    replicated where a sharding names no mesh axes (a GSPMDSharding)."""
    named, P = jax.sharding.NamedSharding, jax.sharding.PartitionSpec
    q, k, v, bias, aux, *more = arg_shapes
    whole = named(mesh, P())
    parts_spec = P()  # the slopes' parts (B, Hq, blocks): split as lse's batch and heads
    if not all(isinstance(x.sharding, named) for x in jax.tree_util.tree_leaves(arg_shapes)):
        specs = ({}, whole.spec, whole.spec, whole.spec, {n: whole.spec for n in aux})
    else:
        def axes_of(x, dim):
            spec = x.sharding.spec
            names = spec[dim] if dim < len(spec) else None
            return () if names is None else names if isinstance(names, tuple) else (names,)
        plan = _plan(options, q, k, v, bias, aux, shapes_only=True)
        specs = _device_specs(plan, options, q, k, bias, aux, mesh.shape, axes_of)
        lse_spec = specs[3]  # (B, Hq, Nq), or varlen's (Hq, total): its batch never splits
        parts_spec = P(None, lse_spec[0], None) if plan.varlen else P(lse_spec[0], lse_spec[1], None)
    split, q_spec, kv_spec, lse_spec, aux_specs = specs
    q_s, kv_s, lse_s = named(mesh, q_spec), named(mesh, kv_spec), named(mesh, lse_spec)
    operands = (q_s, kv_s, kv_s, None if bias is None else whole, {n: named(mesh, s) for n, s in aux_specs.items()})
    if backward:
        operands += (q_s, lse_s, q_s, lse_s)
        results = (q_s if wanted.q else None, *((kv_s, kv_s) if wanted.kv else (None, None)),
                   whole if wanted.bias else None)
        if wanted.slopes:
            results += (named(mesh, parts_spec),)
    else:
        results = (q_s, lse_s)
    return split, operands, results


def _partition(fn: Callable, options: core.CallOptions, backward: bool, wanted: _Gradients, mesh, arg_shapes,
               result_shape):
    """custom_partitioning's partition rule of _partitioned: the mesh, each device's call and
    the shardings of results and operands. A backward whose q heads split over k's single head
    (MQA) sums dk and dv over those devices."""
    split, operands, results = _partition_shardings(options, backward, mesh, arg_shapes, wanted)
    summed = tuple(n for n, s in split.items() if backward and s.heads and s.kv_dim is None)

    def on_each_device(*args):
        outs = fn(options, *args)
        if summed and wanted.kv:
            dq, dk, dv, *rest = outs
            outs = (dq, jax.lax.psum(dk, summed), jax.lax.psum(dv, summed), *rest)
        return outs

    return mesh, on_each_device, results, operands


def _infer_shardings(options: core.CallOptions, backward: bool, wanted: _Gradients, mesh, arg_shapes, result_shape):
    """custom_partitioning's result shardings from the operands' (GSPMD; Shardy reads the rule)."""
    return _partition_shardings(options, backward, mesh, arg_shapes, wanted)[2]


def _sharding_rule(options: core.CallOptions, args: tuple, backward: bool, wanted: _Gradients, mesh, operand_types,
                   result_types):
    """Shardy's rule for a partitioned call (_partitioned), in einsum-like factors: the batch
    ("b") and heads ("h"; a GQA q's heads "(h g)", g the group; MQA's "g") pass through where the call splits
    along them (core.splittable_axes); every other dim needs replication. A backward's dk and dv
    lack g: where g splits (MQA), _partition sums them over its devices."""
    q, k, v, bias, aux, *more = args
    plan = _plan(options, q, k, v, bias, aux, shapes_only=True)
    optional = _optional_shapes(bias, aux)
    batch_axis, heads_axis = core.splittable_axes(plan, options, optional) or (None, None)
    group = plan.heads_q // plan.heads_kv if heads_axis is not None else 1
    compound = group > 1 and plan.heads_kv > 1  # Shardy takes no size-1 factor in a compound one
    q_heads = "(h g)" if compound else "g" if group > 1 else "h"
    fresh = []

    def factors(x, named: Mapping[int, str]) -> str:
        def one(dim):
            if dim in named:
                return named[dim]
            fresh.append(f"r{len(fresh)}")
            return fresh[-1]
        return " ".join(one(d) for d in range(len(x.shape)))

    def by_role(x, role):
        if role in ("q", "kv"):
            named = {batch_axis: "b", heads_axis: q_heads if role == "q" else "h"}
        elif role == "lse":  # (B, Hq, Nq), or varlen's (Hq, total)
            named = {0: q_heads} if plan.varlen else {0: "b", 1: q_heads}
        elif role == "slopes" and len(x.shape) == 1:
            named = {0: q_heads}
        elif role == "slope parts":  # (B, Hq, blocks)
            named = {0: "b", 1: q_heads}
        else:
            named = {}
        return factors(x, {d: f for d, f in named.items()
                           if heads_axis is not None and d is not None and (f != "b" or batch_axis is not None)})

    roles = [(q, "q"), (k, "kv"), (v, "kv"), *([] if bias is None else [(bias, "")]),
             *((a, "slopes" if n == "SLOPES" else "") for n, a in aux.items())]
    if backward:
        roles += [(more[0], "q"), (more[1], "lse"), (more[2], "q"), (more[3], "lse")]
        results = [*([(q, "q")] if wanted.q else []), *([(k, "kv"), (v, "kv")] if wanted.kv else []),
                   *([(bias, "")] if wanted.bias else [])]
        if wanted.slopes:
            results.append((jax.ShapeDtypeStruct(plan.slopes_grad_shape, jnp.float32), "slope parts"))
    else:
        results = [(jax.ShapeDtypeStruct(plan.out_shape, q.dtype), "q"), (jax.ShapeDtypeStruct(plan.lse_shape, jnp.float32), "lse")]
    operands = ", ".join(by_role(x, r) for x, r in roles)
    outputs = ", ".join(by_role(x, r) for x, r in results)
    # Shardy wants the special factors in the order the factors first appear.
    appearance = list(dict.fromkeys(f"{operands} {outputs}".translate(str.maketrans("(),", "   ")).split()))
    return (f"{operands} -> {outputs}",
            dict({"g": group} if compound else {}, need_replication_factors=tuple(f for f in appearance if f in fresh)))


@_vmappable
@_partitioned(backward=False)
def _forward(options: core.CallOptions, q, k, v, bias, aux):
    plan = _plan(options, q, k, v, bias, aux)
    out_types = (jax.ShapeDtypeStruct(plan.out_shape, q.dtype), jax.ShapeDtypeStruct(plan.lse_shape, jnp.float32))
    if not plan.needs_launch:
        return tuple(jnp.zeros(t.shape, t.dtype) for t in out_types)
    arrays = dict(aux, Q=q, K=k, V=v, BIAS=bias)
    # varlen padding rows belong to no sequence and are left at zero.
    # The Gluon forward launches through jax-triton's builder taught Gluon (flashx/jax/gluon.py),
    # which also points a TMA tile's descriptors at the DESCRIPTOR_SCRATCH output.
    gluon_ok = plan.gluon_forward_tile(descriptors="device") is not None and _gluon.install()
    types = dict(O=out_types[0], LSE=out_types[1],
                 **{n: jax.ShapeDtypeStruct(shape, jnp.float32) for n, shape in plan.scratch_shapes.items()})
    # One launch, or a split forward's two: the first's partial results are the second's inputs.
    probes = plan.forward_calls({}, None, gluon=gluon_ok, descriptors="device")  # their outputs and grids
    for index, probe in enumerate(probes):
        results = _launch(lambda a, p, index=index: (plan.forward_calls(a, p, gluon=gluon_ok, descriptors="device")[index], ()),
                          arrays, _output_types(probe, types),
                          zeroed=tuple(i for i, n in enumerate(probe.outputs) if n in ("O", "LSE")) if plan.varlen else ())
        arrays.update(zip(probe.outputs, results))
    return arrays["O"], arrays["LSE"]


def _backward_of(wanted: _Gradients, options: core.CallOptions, q, k, v, bias, aux, out, lse, dout, dlse):
    """(dq, dk, dv, dbias), each None unless `wanted` asks for it (the passes nobody reads do not
    run), and with wanted.slopes a fifth: the slopes' parts (core's slopes_grad_shape, float32),
    which _attention_bwd sums into their gradient."""
    plan = _plan(options, q, k, v, bias, aux)
    bias_grad, slopes_grad = wanted.bias, wanted.slopes

    def kept(dq, dk, dv, dbias) -> tuple:
        return (dq if wanted.q else None, dk if wanted.kv else None, dv if wanted.kv else None,
                dbias if bias_grad else None)

    if not plan.needs_backward_launch:
        zeros = kept(jnp.zeros_like(q), jnp.zeros_like(k), jnp.zeros_like(v), None if bias is None else jnp.zeros_like(bias))
        return zeros + ((jnp.zeros(plan.slopes_grad_shape, jnp.float32),) if slopes_grad else ())
    plan.check_backward()
    arrays = dict(aux, Q=q, K=k, V=v, BIAS=bias, O=out, DO=dout, LSE=lse, DLSE=dlse)
    grad_out = _spec("grad_out", dout)

    # The Gluon backward kernels launch through jax-triton's builder taught Gluon (flashx/jax/gluon.py),
    # which also points a TMA dK/dV tile's descriptors at its DESCRIPTOR_SCRATCH output.
    gluon = any(plan.gluon_backward_tiles("device")) and _gluon.install()

    def call(index):
        return lambda a, p: (plan.backward_calls(a, p, bias_grad, grad_out, gluon=gluon, descriptors="device",
                                                 slopes_grad=slopes_grad, need_dq=wanted.q,
                                                 need_dkdv=wanted.kv)[index], ())

    row_stats = jax.ShapeDtypeStruct(plan.row_stats_shape, jnp.float32)
    dbias_type = jax.ShapeDtypeStruct(plan.gradient_shapes(bias_grad, slopes_grad)["DBIAS"] or (1,), jnp.float32)
    types = dict(DK=jax.ShapeDtypeStruct(k.shape, k.dtype), DV=jax.ShapeDtypeStruct(v.shape, v.dtype),
                 DQ=jax.ShapeDtypeStruct(q.shape, q.dtype), DBIAS=dbias_type,
                 **dict.fromkeys(core.ROW_STATS_OUTPUTS, row_stats))
    # Zeroed: varlen padding rows (dK, dV, dQ) belong to no sequence, dBias's key blocks that no
    # query block visits are never written, nor the slopes' parts of query blocks past a sequence.
    zeroed = ("DK", "DV", "DQ", "DBIAS") if plan.varlen else ("DBIAS",)
    grads = {}
    launches = plan.backward_calls({}, None, bias_grad, grad_out, gluon=gluon, descriptors="device",
                                   slopes_grad=slopes_grad, need_dq=wanted.q, need_dkdv=wanted.kv)
    for index, launch in enumerate(launches):
        results = _launch(call(index), arrays, _output_types(launch, types),
                          zeroed=tuple(i for i, n in enumerate(launch.outputs) if n in zeroed and n in launch.writes))
        for name, result in zip(launch.outputs, results):
            if name not in launch.writes:
                continue
            if name in core.ROW_STATS_INPUTS:  # the row statistics: inputs of the launches after it
                arrays[core.ROW_STATS_INPUTS[name]] = result
            else:
                grads[name] = result
    dk, dv, dq, dbias = (grads.get(name) for name in ("DK", "DV", "DQ", "DBIAS"))  # the Gluon launches write no dBias
    if slopes_grad:
        return kept(dq, dk, dv, None) + (dbias,)
    if bias_grad:
        axes = plan.bias_reduce_axes
        dbias = (dbias.sum(axis=axes, keepdims=True) if axes else dbias).reshape(bias.shape).astype(bias.dtype)
    return kept(dq, dk, dv, dbias)


@functools.lru_cache(maxsize=None)
def _backward(wanted: _Gradients) -> Callable:
    """The backward computing the gradients `wanted` says besides dq, dk and dv (_backward_of),
    batchable and splittable over Auto meshes."""
    return _vmappable(_partitioned(backward=True, wanted=wanted)(functools.partial(_backward_of, wanted)))


@functools.partial(jax.custom_vjp, nondiff_argnums=(0,))
def _attention(options: core.CallOptions, q, k, v, bias, aux):
    return _forward(options, q, k, v, bias, aux)


def _recorded_launches(fn: Callable, *args) -> list:
    """The launches fn(*args) would make, in order, each (build, abstract arrays, out_types,
    zeroed), traced abstractly (jax.eval_shape) with no kernel called or compiled."""
    _recording.launches = launches = []
    try:
        jax.eval_shape(fn, *args)
    finally:
        _recording.launches = None
    return launches


def _gradient_launches(plan: core.AttentionPlan, options: core.CallOptions, q, k, v, bias, aux,
                       wanted: _Gradients = _Gradients()) -> list:
    """The launches of a differentiated call, forward then backward (see _recorded_launches):
    the backward's cotangents are dO like out (JAX arrays are dense) and dlse as zeros, as
    jax.custom_vjp passes them."""
    backward = _backward(wanted)
    abstract = jax.tree_util.tree_map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype), (q, k, v, bias, aux))
    out = jax.ShapeDtypeStruct(plan.out_shape, q.dtype)
    lse = jax.ShapeDtypeStruct(plan.lse_shape, jnp.float32)
    launches = _recorded_launches(lambda *a: _forward(options, *a), *abstract)
    if plan.needs_backward_launch:
        launches += _recorded_launches(lambda *a: backward(options, *a), *abstract, out, lse, out, lse)
    return launches


def _lower_launch(launch: tuple) -> None:
    """Lower one recorded launch on its own, which makes jax-triton compile its kernel."""
    build, arrays, out_types, zeroed = launch
    jax.jit(lambda a: _launch(build, a, out_types, zeroed)).lower(arrays)


def _compile_key(launch: tuple) -> tuple:
    """What jax-triton compiles a recorded launch as: kernel, constexprs, options, the dtypes of
    its arrays and outputs, and of each integer only whether it is 1 or a multiple of 16 (its
    value is not compiled in). Two launches that differ only in sequence lengths match."""
    build, arrays, out_types, _ = launch
    call, _ = build(arrays, None)

    def scalar(value):
        if hasattr(value, "dtype"):
            return str(value.dtype)
        if isinstance(value, int) and not isinstance(value, bool):
            return ("int", value == 1, value % 16 == 0)
        return type(value).__name__

    return (call.kernel, repr(sorted(call.constexprs.items())), repr(sorted(call.options.items())),
            tuple(scalar(a) for a in call.args), tuple(str(a.dtype) for a in arrays.values()),
            tuple(str(t.dtype) for t in out_types))


_compiled_ahead: set = set()  # _compile_key of every launch _compile_ahead has lowered


def _launches_compile() -> bool:
    """Whether a launch compiles a kernel (jax-triton, on the GPU), not a host callback into
    Triton's interpreter."""
    return not core.runtime.INTERPRETER


def _compile_ahead(options: core.CallOptions, q, k, v, bias, aux, wanted: _Gradients = _Gradients()) -> None:
    """Compile a differentiated call's kernels (forward and backward) side by side, once per plan
    and only those not compiled ahead before (a new sequence length usually compiles none).

    jax-triton compiles each kernel when its launch is lowered, one after another, and a first
    jax.grad lowers the forward's and the backward's three or four. Triton's compiler mostly runs
    outside the GIL, so each launch is lowered on its own thread first (jax-triton keeps the
    compiled kernel, and flashx/jax/gluon.py the Gluon ones); the trace's own lowering then finds
    them compiled. jaxlib still assembles each kernel's PTX at its first launch, one at a time.
    """
    plan = _plan(options, q, k, v, bias, aux)
    if not _launches_compile() or not plan.first_time("jax compile ahead"):
        return
    launches = []
    for launch in _gradient_launches(plan, options, q, k, v, bias, aux, wanted):
        key = _compile_key(launch)
        if key not in _compiled_ahead:
            _compiled_ahead.add(key)
            launches.append(launch)
    if len(launches) < 2:
        return
    _gluon.import_jax_triton()  # once, before the threads

    def lower(launch: tuple) -> None:
        try:
            _lower_launch(launch)
        except Exception:  # noqa: BLE001 (only ahead of time: the trace's own lowering compiles, and reports, as before)
            pass

    with ThreadPoolExecutor(max_workers=len(launches), thread_name_prefix="flashx-jax-compile") as pool:
        list(pool.map(lower, launches))


def _no_second_derivative(options, primals, tangents):
    raise NotImplementedError(core.plan.NO_SECOND_DERIVATIVE)


def _first_order(fn: Callable) -> Callable:
    """fn(options, ...) as the custom_vjp's rules call it: a second derivative differentiates
    those rules as plain functions, down to the kernels' launches (failing there, unclearly on
    the GPU); this raises first."""
    once = jax.custom_jvp(fn, nondiff_argnums=(0,))
    once.defjvp(_no_second_derivative)
    return once


_first_order_forward = _first_order(_forward)


@functools.lru_cache(maxsize=None)
def _first_order_backward(wanted: _Gradients) -> Callable:
    return _first_order(_backward(wanted))


def _attention_fwd(options, q, k, v, bias, aux):
    # symbolic_zeros: each primal comes as a CustomVJPPrimal, which says whether it is
    # differentiated (perturbed): the backward runs only the passes whose gradients are asked for
    # (a constant k and v cost no dK/dV pass; a constant bias no (B, Hq, Nq, Nkv) float32 dBias).
    wanted = _Gradients(q=q.perturbed, kv=k.perturbed or v.perturbed, bias=bias is not None and bias.perturbed,
                        slopes=aux.get("SLOPES") is not None and aux["SLOPES"].perturbed)
    # jax.grad of NumPy inputs hands this rule their values as NumPy-like literals (JAX 0.10),
    # which attention() itself refuses: make them the jax.Arrays they stand for.
    q, k, v, bias, aux = jax.tree_util.tree_map(lambda x: jnp.asarray(x.value), (q, k, v, bias, aux),
                                                is_leaf=lambda x: isinstance(x, jax.custom_derivatives.CustomVJPPrimal))
    _compile_ahead(options, q, k, v, bias, aux, wanted)
    out, lse = _first_order_forward(options, q, k, v, bias, aux)
    return (out, lse), (q, k, v, bias, aux, out, lse, wanted)


def _attention_bwd(options, residuals, cotangents):
    q, k, v, bias, aux, out, lse, wanted = residuals
    # An unused output's cotangent comes as a SymbolicZero: the kernels take it as zeros.
    dout, dlse = (jnp.zeros(ct.aval.shape, ct.aval.dtype) if isinstance(ct, jax.custom_derivatives.SymbolicZero)
                  else ct for ct in cotangents)
    grads = _first_order_backward(wanted)(options, q, k, v, bias, aux, out, lse, dout, dlse)
    aux_grads = jax.tree_util.tree_map(lambda _: None, aux)
    if wanted.slopes:
        *grads, slope_parts = grads
        axes = _plan(options, q, k, v, bias, aux).slopes_reduce_axes
        aux_grads["SLOPES"] = slope_parts.sum(axis=axes).reshape(aux["SLOPES"].shape)
    dq, dk, dv, dbias = (None if g is None else _typed_like(g, x) for g, x in zip(grads, (q, k, v, bias)))
    return dq, dk, dv, dbias, aux_grads


_attention.defvjp(_attention_fwd, _attention_bwd, symbolic_zeros=True)


def _build_block_mask(spec: core.BlockMaskSpec) -> core.BlockMask:
    shapes = spec.shapes
    types = {n: jax.ShapeDtypeStruct(s, jnp.int8 if n == "state" else jnp.int32) for n, s in shapes.items()}
    if not (spec.num_q_blocks and spec.num_kv_blocks):
        return core.BlockMask(spec, *(jnp.zeros(types[n].shape, jnp.int32) for n in ("counts", "indices", "t_counts", "t_indices")))
    (first, _), (second, _) = core.block_map_calls(spec)
    state, counts, indices = _launch(lambda a, p: (first, ()), {}, (types["state"], types["counts"], types["indices"]))
    t_counts, t_indices = _launch(lambda a, p: (second, (a["STATE"],)), {"STATE": state}, (types["t_counts"], types["t_indices"]))
    return core.BlockMask(spec, counts, indices, t_counts, t_indices)


def create_block_mask(
    mask_mod: Any, B: Optional[int], H: Optional[int], Nq: int, Nkv: int, *,
    causal: bool = False, window: Optional[tuple] = None, blocks: Optional[tuple] = None,
) -> core.BlockMask:
    """A reusable block map of mask_mod (with causal/window folded in); a pytree, so it can
    be built outside jax.jit and passed in.

    mask_mod(b, h, q_idx, kv_idx) -> bool is a @triton.jit function; B or H None means the
    mask does not depend on that index. Pass the result as `block_mask=` to `attention` with
    the same sizes, causal and window; empty blocks are never loaded, full blocks skip the mask.
    """
    return _build_block_mask(core.plan_block_mask(mask_mod, B, H, Nq, Nkv, causal=causal, window=window, blocks=blocks))


def _run(q, k, v, bias, aux: dict, options: core.CallOptions, return_lse: bool):
    """Validate (naming the argument) before tracing any kernel, build mask_mod's block map
    if the plan asks for one, then call the differentiable op (split over the devices where q,
    k, v carry explicit shardings: _split_explicitly)."""
    core.check_flag("return_lse", return_lse)
    plan = _plan(options, q, k, v, bias, aux)
    if plan.auto_block_mask is not None:
        built = _build_block_mask(plan.auto_block_mask)
        options = dataclasses.replace(options, block_mask=built.spec)
        aux = {**aux, **built.kernel_arrays()}
    aux = {n: a for n, a in aux.items() if a is not None}
    attend = functools.partial(_attention_packed_where_it_can, options)
    out, lse = _split_explicitly(attend, plan, options, q, k, v, bias, aux) or attend(q, k, v, bias, aux)
    return (out, lse) if return_lse else out


def _attention_packed_where_it_can(options: core.CallOptions, q, k, v, bias, aux):
    """_attention, a one-query GQA call run as g query rows of each kv head where
    core.packed_query_heads allows: q (B, 1, Hq, D) as (B, g, Hkv, D), or "bhnd" (B, Hq, 1, D) as
    (B, Hkv, g, D), without causal; out and lse viewed back. On each device's slice where
    _split_explicitly splits the call (a reshape of an array split along its heads has no
    sharding of its own in JAX's types)."""
    optional = [*aux, *(["BIAS"] if bias is not None else [])]
    group = core.packed_query_heads(options, q.shape, k.shape, optional)
    if group == 1:
        return _attention(options, q, k, v, bias, aux)
    bnhd = options.layout == "bnhd"
    rows = q.reshape(q.shape[0], q.shape[1] * q.shape[2] // group, group, q.shape[-1])  # (B, Hkv, g, D)
    out, lse = _attention(dataclasses.replace(options, causal=False), jnp.swapaxes(rows, 1, 2) if bnhd else rows,
                          k, v, bias, aux)
    out = (jnp.swapaxes(out, 1, 2) if bnhd else out).reshape(*q.shape[:-1], out.shape[-1])
    return out, lse.reshape(q.shape[0], -1, 1)  # lse (B, Hkv, g) -> (B, Hq, 1)


def _shard_map() -> Callable:
    """jax.shard_map (JAX >= 0.7; jax.experimental's before)."""
    if hasattr(jax, "shard_map"):
        return jax.shard_map
    from jax.experimental.shard_map import shard_map

    return shard_map


def _explicit_names(x) -> frozenset:
    """The Explicit axes (jax.sharding.AxisType) of the mesh x's type is placed on: JAX's
    sharding in types; none for an Auto or Manual mesh, or a JAX without it."""
    mesh = getattr(getattr(jax.typeof(x), "sharding", None), "mesh", None)
    explicit = getattr(getattr(jax.sharding, "AxisType", None), "Explicit", None)
    if mesh is None or explicit is None:
        return frozenset()
    return frozenset(n for n, t in zip(mesh.axis_names, getattr(mesh, "axis_types", ())) if t == explicit)


def _explicit_axes(x, axis: int) -> tuple:
    """The Explicit mesh axes along which x's type splits its `axis` (_explicit_names)."""
    spec = getattr(getattr(jax.typeof(x), "sharding", None), "spec", None)
    if spec is None or axis >= len(spec) or spec[axis] is None:
        return ()
    names = spec[axis] if isinstance(spec[axis], tuple) else (spec[axis],)
    return tuple(n for n in names if n in _explicit_names(x))


def _device_specs(plan: core.AttentionPlan, options: core.CallOptions, q, k, bias, aux: Mapping[str, Any],
                  mesh_shape: Mapping[str, int], axes_of: Callable) -> tuple:
    """How a call splits over a mesh (core.device_split), as PartitionSpecs: (split, q's, k's and
    v's, lse's, {aux name: its}); out and dout take q's, dlse lse's. axes_of(x, dim): the mesh
    axes along which x comes split on dim, major first; a split the call does not take is
    gathered (those dims' specs say None)."""
    P = jax.sharding.PartitionSpec
    optional = _optional_shapes(bias, aux)
    dims = {}  # each mesh axis q or k comes split along, with the dims it splits, in their specs' order
    for role, x in enumerate((q, k)):
        for dim in range(len(x.shape)):
            for name in axes_of(x, dim):
                dims.setdefault(name, [None, None])[role] = dim
    split = core.device_split(plan, options, optional, [(n, mesh_shape[n], *d) for n, d in dims.items()])

    def spec_of(ndim, dim_of):  # the names of the axes that split each dim, major first
        return P(*(tuple(n for n, s in split.items() if dim_of(s) == d) or None for d in range(ndim)))

    q_spec, kv_spec = spec_of(len(q.shape), lambda s: s.q_dim), spec_of(len(q.shape), lambda s: s.kv_dim)
    lse_spec = spec_of(2 if plan.varlen else 3, lambda s: s.lse_dim)
    aux_specs = {n: spec_of(1, lambda s: 0 if s.heads else None) if n == "SLOPES" else P() for n in aux}
    return split, q_spec, kv_spec, lse_spec, aux_specs


def _split_explicitly(attend: Callable, plan: core.AttentionPlan, options: core.CallOptions, q, k, v, bias, aux):
    """attend(q, k, v, bias, aux) -> (out, lse) inside jax.shard_map where the inputs' types place
    them on a mesh with Explicit axes (JAX's sharding in types), over whose devices XLA cannot
    spread a kernel call. Each device attends over the slice core.device_split gives it from the
    axes q and k come split along (batch and heads, where the call splits so), and out and lse
    come back split the same; a split along any other axis is gathered first, and a call that
    does not split runs whole on every device. None off such a mesh (an Auto mesh's calls split
    as _partitioned says)."""
    on_mesh = [x for x in (q, k, v, *([] if bias is None else [bias]), *aux.values()) if _explicit_names(x)]
    if not on_mesh:
        return None
    mesh = jax.typeof(on_mesh[0]).sharding.mesh
    replicated = jax.sharding.PartitionSpec()
    _, q_spec, kv_spec, lse_spec, aux_specs = _device_specs(plan, options, q, k, bias, aux, mesh.shape, _explicit_axes)

    def reshard(x, spec):  # named on the inputs' mesh: the caller need not be inside jax.set_mesh
        return jax.sharding.reshard(x, jax.sharding.NamedSharding(mesh, spec))

    q, k, v = reshard(q, q_spec), reshard(k, kv_spec), reshard(v, kv_spec)
    bias = None if bias is None else reshard(bias, replicated)
    aux = {n: reshard(a, aux_specs[n]) for n, a in aux.items()}
    return _shard_map()(attend, mesh=mesh, in_specs=(q_spec, kv_spec, kv_spec, replicated, aux_specs),
                        out_specs=(q_spec, lse_spec))(q, k, v, bias, aux)


def _block_mask_arrays(block_mask: Optional[core.BlockMask]) -> dict:
    if block_mask is None:
        return {}
    if not isinstance(block_mask, core.BlockMask) or not isinstance(block_mask.counts, jax.Array):
        got = type(block_mask).__name__ if not isinstance(block_mask, core.BlockMask) else "one of flashx.torch's"
        raise TypeError(f"block_mask must come from flashx.jax.create_block_mask, got {got}")
    return block_mask.kernel_arrays()


def attention(
    q: jax.Array,
    k: jax.Array,
    v: jax.Array,
    *,
    causal: bool = False,
    scale: Optional[float] = None,
    layout: str = "bnhd",
    window: Optional[tuple] = None,
    alibi_slopes: Optional[jax.Array] = None,
    softcap: Optional[float] = None,
    cu_seqlens_q: Optional[jax.Array] = None,
    cu_seqlens_k: Optional[jax.Array] = None,
    max_seqlen_q: Optional[int] = None,
    max_seqlen_k: Optional[int] = None,
    mask_mod: Any = None,
    score_mod: Any = None,
    score_mod_grad: Any = None,
    block_mask: Optional[core.BlockMask] = None,
    deterministic: bool = False,
    return_lse: bool = False,
    dropout_p: float = 0.0,
    dropout_key: Optional[jax.Array] = None,
    seqused_q: Optional[jax.Array] = None,
    seqused_k: Optional[jax.Array] = None,
    block_table: Optional[jax.Array] = None,
    float32_precision: str = "tf32x3",
) -> Union[jax.Array, tuple[jax.Array, jax.Array]]:
    """Fused softmax(score(q, k)) v; works eagerly and inside `jax.jit`, differentiable in q, k, v.

    Arguments, shapes and semantics are those of `flashx.torch.attention`:
    q (B, Nq, Hq, D) ["bnhd"] or (B, Hq, Nq, D) ["bhnd"], k (B, Nkv, Hkv, D), v (B, Nkv, Hkv, Dv);
    varlen: (total, H, D) with int32 cu_seqlens_q/k (B + 1,) and static int max_seqlen_q/k.
    causal and window align bottom-right; the score is q.k * scale -> score_mod -> softcap ->
    alibi -> masks. Returns out (q's layout and dtype, last dim Dv) and, if return_lse, the
    float32 lse (B, Hq, Nq) (varlen: (Hq, total_q)). dropout_p > 0 drops each weight with that
    probability (the rest scaled by 1 / (1 - dropout_p)) by a mask drawn from dropout_key (a
    jax.random key, required then): the same key, the same mask. seqused_q / seqused_k (int32
    (B,)) cut each batch's query rows / keys to its own length (padding after); block_table
    (int32 (B, pages_per_seq)) reads k and v as a paged KV cache (pages, page_size, Hkv, D),
    forward only. alibi_slopes ((Hq,) or (B, Hq), float32) are differentiable like q, k and v.
    float32_precision ("tf32x3", "ieee", "bf16x3" or "tf32") says how float32 inputs are
    multiplied, as in `flashx.torch.attention` (16-bit inputs ignore it); unlike JAX's default
    matmul precision on GPUs (one tf32 product), the default keeps float32's accuracy.
    """
    core.check_flag("deterministic", deterministic)
    options = core.CallOptions(
        causal=causal, scale=scale, layout=layout, window=tuple(window) if isinstance(window, list) else window,
        softcap=softcap, max_seqlen_q=max_seqlen_q, max_seqlen_k=max_seqlen_k,
        mask_mod=mask_mod, score_mod=score_mod, score_mod_grad=score_mod_grad,
        block_mask=block_mask.spec if isinstance(block_mask, core.BlockMask) else block_mask, dropout_p=dropout_p,
        float32_precision=float32_precision,
    )
    aux = dict(SLOPES=alibi_slopes, CU_SEQLENS_Q=cu_seqlens_q, CU_SEQLENS_K=cu_seqlens_k, SEQUSED_Q=seqused_q,
               SEQUSED_K=seqused_k, BLOCK_TABLE=block_table, **_block_mask_arrays(block_mask),
               DROPOUT_SEED=_dropout_seed(dropout_p, dropout_key))
    return _run(q, k, v, None, aux, options, return_lse)


def _dropout_seed(dropout_p: Any, key: Optional[jax.Array]) -> Optional[jax.Array]:
    """The call's dropout seed (int32 core.plan.DROPOUT_SEED_SHAPE) from its key, where it drops."""
    if core.check_dropout_p(dropout_p) == 0:
        return None
    if key is None:
        raise ValueError(f"dropout_p={dropout_p} needs dropout_key, a jax.random key (e.g. jax.random.key(0))")
    if not isinstance(key, jax.Array) or not ((jnp.issubdtype(key.dtype, jax.dtypes.prng_key) and key.ndim == 0) or (
            key.dtype == jnp.uint32 and key.shape == (2,))):  # one key: a typed one, or a raw PRNGKey
        raise TypeError(f"dropout_key must be one jax.random key (jax.random.key or PRNGKey), got "
                        f"{getattr(key, 'dtype', type(key).__name__)} {getattr(key, 'shape', '')}")
    bits = jax.random.bits(key, core.plan.DROPOUT_SEED_SHAPE, jnp.uint32)
    return jax.lax.bitcast_convert_type(bits, jnp.int32)
