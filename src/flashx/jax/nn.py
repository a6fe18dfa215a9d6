"""`flashx.jax.dot_product_attention`: jax.nn's signature and semantics, flashx's kernel."""
from __future__ import annotations

from typing import Optional, Union

import jax
import jax.numpy as jnp
import numpy as np

from .. import core
from .attention import _run

_IMPLEMENTATIONS = (None, "xla", "cudnn")  # jax.nn's choices: flashx's kernel runs in their place

# The core validates under its own argument names; core.errors_named re-raises its errors under
# this function's (query, not q). The layout is the drop-in's choice, not the caller's: dropped from messages.
_CORE_NAMES = {"q": "query", "k": "key", "v": "value", "causal": "is_causal", "window": "local_window_size",
               "seqused_q": "query_seq_lengths", "seqused_k": "key_value_seq_lengths", " (layout 'bnhd')": ""}


def dot_product_attention(
    query: jax.Array,
    key: jax.Array,
    value: jax.Array,
    bias: Optional[jax.Array] = None,
    mask: Optional[jax.Array] = None,
    *,
    scale: Optional[float] = None,
    is_causal: bool = False,
    query_seq_lengths: Optional[jax.Array] = None,
    key_value_seq_lengths: Optional[jax.Array] = None,
    local_window_size: Optional[Union[int, tuple]] = None,
    implementation: Optional[str] = None,
    return_residual: bool = False,
) -> Union[jax.Array, tuple[jax.Array, jax.Array]]:
    """Drop-in for jax.nn.dot_product_attention, jit-compatible and differentiable (bias too).

    query (B, T, N, H), key and value (B, S, K, H) with N a multiple of K (GQA), or all three
    without B (T, N, H), as jax.nn takes them. bias and mask (bool, True takes part) broadcast to
    (B, N, T, S). is_causal and local_window_size (w or (left, right)) are top-left aligned, as in
    jax.nn. query_seq_lengths and key_value_seq_lengths: integer (B,), jax.Array or NumPy. Query
    rows past query_seq_lengths are padding: flashx returns 0 there, as it does for rows that see
    no key (key_value_seq_lengths 0; jax.nn, whose mask is a finite value, averages value's rows
    there). implementation
    (jax.nn's None, 'xla' or 'cudnn') is accepted and ignored: flashx's kernel runs. With
    return_residual, also the logsumexp (B, T, N) (or (T, N)) in key's dtype, without gradient,
    as jax.nn returns it; -inf on rows that see no key.
    """
    if implementation not in _IMPLEMENTATIONS:
        raise ValueError(f"implementation must be one of {_IMPLEMENTATIONS} (jax.nn's), got {implementation!r}")
    core.check_flag("return_residual", return_residual)
    unbatched = all(isinstance(x, jax.Array) and x.ndim == 3 for x in (query, key, value))
    if unbatched:  # jax.nn's (T, N, H): a batch of one
        query, key, value = (x[None] for x in (query, key, value))
    window = None
    if local_window_size is not None:
        if isinstance(local_window_size, int) and not isinstance(local_window_size, bool):
            if local_window_size < -1:  # checked here: the core's message would show the pair
                raise ValueError(f"local_window_size must be an int >= -1 (-1: unbounded) or (left, right), got {local_window_size}")
            window = (local_window_size, local_window_size)
        elif isinstance(local_window_size, (tuple, list)):
            window = tuple(local_window_size)
        else:
            raise ValueError(f"local_window_size must be an int or (left, right), got {local_window_size!r}")
    lengths = {}
    for name, field, lens in (("query_seq_lengths", "SEQUSED_Q", query_seq_lengths),
                              ("key_value_seq_lengths", "SEQUSED_K", key_value_seq_lengths)):
        if lens is not None:
            if isinstance(lens, np.ndarray):  # jax.nn takes NumPy lengths (jnp.asarray) too
                lens = jnp.asarray(lens)
            if not isinstance(lens, jax.Array) or not jnp.issubdtype(lens.dtype, jnp.integer):
                got = lens.dtype if isinstance(lens, jax.Array) else type(lens).__name__
                raise TypeError(f"{name} must be an integer array (jax.Array or NumPy) of shape (B,), got {got}")
            lengths[field] = lens.astype(jnp.int32)
    options = core.CallOptions(causal=is_causal, scale=scale, window=window, bottom_right=False)
    with core.errors_named(_CORE_NAMES):  # (a GQA decode step packs its heads there, as attention's)
        out, lse = _run(query, key, value, bias, dict(MASK=mask, **lengths), options, True)
    if unbatched:
        out, lse = out[0], lse[0]
    if not return_residual:
        return out
    residual = jax.lax.stop_gradient(jnp.swapaxes(lse, -1, -2).astype(key.dtype))  # (..., N, T) -> (..., T, N)
    return out, residual
