"""What flashx changes in Triton's compiles of its own kernels, through Triton's one stage hook.

Triton lets a single hook (knobs.runtime.add_stages_inspection_hook) see and replace a compile's
pipeline stages. flashx installs `_stage_hook` only while it compiles (`installed`; on Triton >=
3.7 an installed hook is consulted at every launch and keys every kernel's cache), chained after
whatever hook was there before, and changes two things:

- One scratch slot (SHARED_SLOT_KERNELS): a kernel that builds its TMA descriptors on the device
  writes them into Triton's global scratch, a slot a program. Every program of a launch builds
  the same tensor maps (each over a whole array, whatever the program's tiles), so all may write
  them into one slot: the kernel then runs level with host descriptors, where a slot a program
  costs it ~4% (H200, NOTES v0.26, v0.39). Programs rewriting the slot that others read write
  the bytes already there. Compiles for Triton's own launcher (torch's) get `with_one_scratch_slot`;
  PTX-only compiles (JAX's, `ptx_only`) are left for their builder, which points the scratch at an
  argument and takes the same offset off there (flashx/jax/gluon.py).
- PTX only (`ptx_only`): on a thread inside it, the cubin stage (ptxas) yields an empty binary,
  for a builder that assembles the PTX itself (jaxlib).

Triton 3.6's cache key does not see the hook: a one-slot kernel compiled here is cached under the
key of the plain compile. Only flashx compiles these kernels, and always through the hook; a
one-slot kernel launched with a slot a program is still correct (it uses the first).
"""
from __future__ import annotations

import contextlib
import re
import threading
from typing import Optional

# The kernels whose programs share one slot of descriptors (empty: each program its own). Both
# ran so on the H200 from JAX (NOTES v0.27), and the forward from torch (NOTES v0.40; torch's
# dK/dV launches pass host descriptors).
SHARED_SLOT_KERNELS = frozenset({"gluon_attention_forward_kernel", "gluon_attention_dkdv_kernel"})

# A part of Triton's cache key (Triton >= 3.7 asks an installed hook for one): bump it when what
# the hook does changes.
HOOK_KEY = "flashx-one-scratch-slot-1"

_state = threading.local()  # .ptx_only: this thread compiles up to PTX only
_lock = threading.Lock()
_users = 0
_before = None  # the hook installed before flashx's, chained


def kernel_entry(ptx: str, kernel_name: str) -> "Optional[re.Match]":
    """The kernel's .entry line in ptx (group 1: its parameter list), or None."""
    return re.search(rf"\.entry\s+{kernel_name}\s*\(([^)]*)\)", ptx)


def pointer_load(kernel_name: str, index: int) -> "re.Pattern":
    """The PTX load of a kernel's 64-bit parameter `index` into a register (group 1)."""
    return re.compile(rf"ld\.param\.[bu]64\s+(%rd\d+),\s*\[{kernel_name}_param_{index}\];")


def program_offset_taken_off(register: str, scratch_bytes: int) -> str:
    """PTX taking (linear program id) x scratch_bytes off the scratch base in `register`: Triton's
    code adds that offset to the base, so with it taken off first every program's maps land in
    one slot at the base."""
    return ("\n\t{ .reg .b32 %fxs<6>; .reg .b64 %fxs_offset;\n\t"
            "mov.u32 %fxs0, %ctaid.x; mov.u32 %fxs1, %ctaid.y; mov.u32 %fxs2, %ctaid.z;\n\t"
            "mov.u32 %fxs3, %nctaid.x; mov.u32 %fxs4, %nctaid.y;\n\t"
            "mad.lo.s32 %fxs5, %fxs2, %fxs4, %fxs1; mad.lo.s32 %fxs5, %fxs5, %fxs3, %fxs0;\n\t"
            f"mul.wide.s32 %fxs_offset, %fxs5, {scratch_bytes}; sub.s64 {register}, {register}, %fxs_offset; }}")


def with_one_scratch_slot(ptx: str, kernel_name: str, scratch_bytes: int) -> str:
    """A kernel's PTX for Triton's own launcher (which fills the hidden global-scratch parameter,
    the second last) with every program's scratch in one slot."""
    entry = kernel_entry(ptx, kernel_name)
    if entry is None:
        raise ValueError(f"no entry {kernel_name} in this PTX")
    hidden = entry.group(1).count(".param") - 2  # Triton's global scratch, then profile scratch
    load = pointer_load(kernel_name, hidden)
    rewritten, loads = load.subn(lambda m: m.group(0) + program_offset_taken_off(m.group(1), scratch_bytes), ptx)
    if loads == 0:
        raise ValueError(f"{kernel_name}'s PTX does not load its global scratch by ld.param")
    return rewritten


def _one_slot_ptx(make_ptx):
    """Triton's PTX stage, followed by with_one_scratch_slot for SHARED_SLOT_KERNELS that need
    global scratch (metadata "name" and "global_scratch_size" are set by then)."""
    def stage(src, metadata):
        ptx = make_ptx(src, metadata)
        name, scratch = metadata.get("name"), metadata.get("global_scratch_size", 0)
        if scratch and name in SHARED_SLOT_KERNELS:
            return with_one_scratch_slot(ptx, name, scratch)
        return ptx
    return stage


def _stage_hook(*args):
    """The hook (see the module's docstring). Called with a backend's stages (Triton 3.6 and
    later); called with nothing (Triton >= 3.7), it gives its part of the cache key, after the
    earlier hook's."""
    if not args:
        key, digest = _before() if _before is not None else ("", "")
        return key + HOOK_KEY, digest + HOOK_KEY
    if _before is not None:
        _before(*args)
    stages = args[1]
    if getattr(_state, "ptx_only", False):
        if "cubin" in stages:
            stages["cubin"] = lambda module, metadata: b""
    elif "ptx" in stages:
        stages["ptx"] = _one_slot_ptx(stages["ptx"])


@contextlib.contextmanager
def installed(ptx_only: bool = False):
    """flashx's stage hook installed for the duration (threads may nest and overlap: it stays until
    the last leaves, then the earlier hook is back). ptx_only: this thread's compiles stop at PTX."""
    global _users, _before
    from triton import knobs

    with _lock:
        if _users == 0:
            _before = knobs.runtime.add_stages_inspection_hook
            knobs.runtime.add_stages_inspection_hook = _stage_hook
        _users += 1
    outer = getattr(_state, "ptx_only", False)
    _state.ptx_only = ptx_only or outer
    try:
        yield
    finally:
        _state.ptx_only = outer
        with _lock:
            _users -= 1
            if _users == 0:
                knobs.runtime.add_stages_inspection_hook = _before
                _before = None
