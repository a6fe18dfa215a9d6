"""The benchmark scripts measure what the library runs: the figures behind the plan's routes come
from them."""

import importlib
import os
import sys
import types
from pathlib import Path

import numpy as np
import pytest
from triton.experimental import gluon
from triton.experimental.gluon import language as gl

from flashx.core import gluon_forward
from flashx.core import tuning
from flashx.core import runtime

pytest.importorskip("torch")  # the scripts launch through torch
BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def benchmark_module(name: str):
    """A script of benchmarks/ as a module (its folder on the path only while it imports)."""
    sys.path.insert(0, str(BENCHMARKS))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.pop(0)


def test_gluon_tiles_are_the_measured_variants():
    """Each routed Gluon tile is, by name and in every constexpr, the variant that
    benchmarks/gluon_forward_check.py checks against float64 and times (the route's figures in
    core/tuning.py and NOTES come from those runs), at the head dim it is routed for."""
    check = benchmark_module("gluon_forward_check")
    for name, tile in tuning.GLUON_FORWARD_TILES.items():
        measured = check._constexprs(check.VARIANTS[name], causal=False)
        assert {k: measured[k] for k in tile} == tile, name
    for table in (tuning.GLUON_FORWARD_ROUTE, tuning.GLUON_TMA_ROUTE, tuning.GLUON_DEVICE_TMA_ROUTE):
        for (head_dim, _causal), route in table.items():
            assert all(check.VARIANTS[name].head_dim == head_dim for _, name in route if name is not None)


def test_normalized_ptx_keeps_only_what_a_kernel_does():
    """kernel_stats.py --ptx-hash compares two trees' kernels by normalized PTX: register and label
    numbers, comments, line info and parameter declarations (a new unused argument) drop out; an
    instruction does not."""
    kernel_stats = benchmark_module("kernel_stats")
    before = (".visible .entry k(\n\t.param .u64 k_param_0,\n\t.param .u64 k_param_1\n)\n{\n"
              "\tld.param.b64 \t%rd3, [k_param_1];\t// note\n$L__BB0_2:\n\t.loc 1 20 4\n"
              "\tadd.s64 \t%rd4, %rd3, 8;\n\tbra.uni \t$L__BB0_2;\n}\n.section .debug_info { 1 }\n")
    after = (".visible .entry k(\n\t.param .u64 k_param_0,\n\t.param .u64 k_param_1,\n\t.param .u64 k_param_2\n)\n{\n"
             "\tld.param.b64 \t%rd7, [k_param_2];\n$L__BB0_5:\n\t.loc 1 31 4\n"
             "\tadd.s64 \t%rd9, %rd7, 8;\n\tbra.uni \t$L__BB0_5;\n}\n.section .debug_info { 2 }\n")
    assert kernel_stats.normalized_ptx(before) == kernel_stats.normalized_ptx(after)
    assert kernel_stats.normalized_ptx(before) != kernel_stats.normalized_ptx(after.replace("8;", "16;"))


def test_sass_loops_finds_innermost_hot_loops():
    """kernel_stats.py --sass reports the innermost loops of a kernel's SASS with their
    instruction mix: a spin-wait too small to matter, an outer loop around an inner one and a
    wait stub past the kernel's EXIT that branches back into it are left out."""
    kernel_stats = benchmark_module("kernel_stats")

    def sass(lines):
        return "\n".join(f"        /*{address:04x}*/                   {text} ;  /* 0x000fe2000000000 */"
                          for address, text in lines)

    body = [(0x100 + 16 * i, "MUFU.EX2 R1, R2" if i % 2 else "FFMA R3, R4, UR5, -R6") for i in range(20)]
    code = ([(0x00, "S2R R0, SR_TID.X"), (0x10, "SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [UR4], R1"),
             (0x20, "@!P0 BRA 0x10")]  # a spin-wait: two instructions
            + [(0xf0, "HGMMA.64x64x16.F32.BF16 R24, gdesc[UR16], RZ, !UPT")] + body
            + [(0x240, "@P0 BRA 0xf0"), (0x250, "IADD3 R0, R0, 0x1, RZ"), (0x260, "@P1 BRA 0x00"),
               (0x270, "EXIT"), (0x280, "BRA 0x280"), (0x290, "SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [UR4], R1"),
               (0x2a0, "BRA 0x100")])  # a wait stub returning into the loop
    loops = kernel_stats.sass_loops(sass(code), top=3)
    assert loops == [(0xf0, 0x240, 22, [("FFMA", 10), ("MUFU", 10), ("HGMMA", 1)])]


def test_gluon_backward_tiles_are_checked_variants():
    """The plan's Gluon dK/dV and dQ tiles are the variants benchmarks/gluon_backward_check.py
    times ("cp-s2", which its dQ timings also take; "tma-s3" for "dkdv-tma", "tma-s3-persist" for
    "dkdv-tma-persist", "tma-s3-ts-p32" for "dkdv-tma-ts"), with the blocks its launchers pass."""
    check = benchmark_module("gluon_backward_check")
    for name, variant_name in (("dkdv", "cp-s2"), ("dkdv-tma", "tma-s3"), ("dkdv-tma-persist", "tma-s3-persist"),
                               ("dkdv-tma-ts", "tma-s3-ts-p32")):
        tile, variant = tuning.GLUON_DKDV_TILES[name], check.VARIANTS[variant_name]
        assert (tile["TMA"], tile["STAGES"], tile["CONSUMER_REGS"], tile["PRODUCER_REGS"], tile["PERSISTENT"],
                tile["TMA_STORE"]) == (variant["tma"], variant["stages"], variant["cregs"], variant["pregs"],
                                       variant.get("persistent", False), variant.get("tma_store", False))
        assert tile["BLOCK_N"] == 128 and tile["PRODUCER_WARPS"] == 4  # what launch() passes
    variant = check.VARIANTS["cp-s2"]
    dq = tuning.GLUON_DQ_TILES["dq"]
    assert (dq["TMA"], dq["STAGES"], dq["CONSUMER_REGS"], dq["PRODUCER_REGS"]) == (
        variant["tma"], variant["stages"], variant["cregs"], variant["pregs"])
    assert (dq["BLOCK_M"], dq["BLOCK_N"], dq["PRODUCER_WARPS"]) == (128, 64, 4)  # what launch_dq() passes


def test_jax_timing_calls_on_the_same_inputs(monkeypatch):
    """common.time_jax calls the jitted function on the inputs it was given every time, never on
    a previous call's outputs (a fed loop's inputs fell to ~1e-20 within three calls on the
    H200, NOTES v0.45), settles with that same call as the load, compiles before timing, and
    returns the median of its settled rounds."""
    pytest.importorskip("jax")
    import jax.numpy as jnp

    common = benchmark_module("common")
    events = []

    def settle(load=None, wait=None):
        events.append("settle")
        wait(load())
    monkeypatch.setattr(common, "settle", settle)
    monkeypatch.setattr(common, "_DEBUG_TIMING", False)
    monkeypatch.setattr(common, "ROUNDS", 3)
    readings = iter([5.0, 1.0, 3.0])
    monkeypatch.setattr(common, "time_wall", lambda call, wait, warmup_ms, rep_ms: [wait(call()), next(readings)][1])
    rng = np.random.default_rng(0)
    q, k = (jnp.asarray(rng.standard_normal((5, 3)), jnp.float32) for _ in range(2))
    seen = []

    def call(a, b):
        events.append("call")
        seen.append((np.asarray(a).copy(), np.asarray(b).copy()))
        return jnp.tanh(a @ b.T)

    assert common.time_jax(call, (q, k), warmup_ms=1.0, rep_ms=2.0) == 3.0  # the median of the rounds
    # compiled before the first settle; each round: the settle's load, then the timing's call
    assert events == ["call"] + ["settle", "call", "call"] * 3
    assert len(seen) == 7 and all(np.array_equal(a, q) and np.array_equal(b, k) for a, b in seen)


def test_like_for_like_ratio_is_jax_over_torch_back_to_back():
    """The tables' `flashx jax/torch b2b` column: torch's back-to-back time (wall_ms) over JAX's
    loop time, so above 1 where JAX is faster; "-" where torch has no back-to-back timing. The
    prescribed column compares the two systems' do_bench / loop figures instead."""
    common = benchmark_module("common")
    flops = 1e12
    torch_result, jax_result = common.measured(2.0, flops), common.measured(2.0, flops)
    assert common.ratio_back_to_back(jax_result, torch_result) == "-"
    torch_result.wall_ms = 2.2  # back to back, torch takes 10% longer than JAX's loop
    assert common.ratio(jax_result, torch_result) == "1.00"
    assert common.ratio_back_to_back(jax_result, torch_result) == "1.10"
    assert common.ratio_back_to_back(common.Result(reason="failed"), torch_result) == "-"


def test_sdpa_call_runs_the_named_backend():
    """The peers' calls (common.sdpa_call): SDPA on (q, k, v) under the backend named, entered at
    each call. Against float64 on odd GQA shapes (math backend, on the CPU); a backend the CPU
    lacks raises rather than falling back to another."""
    import torch
    from torch.nn.attention import SDPBackend

    common = benchmark_module("common")
    gen = torch.Generator().manual_seed(5)
    q = torch.randn(2, 6, 37, 24, generator=gen)
    k, v = (torch.randn(2, 2, 53, 24, generator=gen) for _ in range(2))
    out = common.sdpa_call(SDPBackend.MATH, q, k, v, is_causal=True, enable_gqa=True)()
    kk, vv = (x.double().repeat_interleave(3, dim=1) for x in (k, v))
    scores = q.double() @ kk.transpose(-1, -2) / 24**0.5
    scores = scores.masked_fill(torch.ones(37, 53, dtype=torch.bool).tril().logical_not(), float("-inf"))
    ref = scores.softmax(-1) @ vv
    assert torch.allclose(out.double(), ref, atol=1e-5)
    with pytest.raises(RuntimeError):
        common.sdpa_call(SDPBackend.CUDNN_ATTENTION, q, k, v, is_causal=True, enable_gqa=True)()


def test_probe_shapes_and_dobench_gap_host_delay():
    """The probes' B,N,H,D,causal shapes (common.parse_shape: ncu_probe.py, dobench_gap.py) and
    dobench_gap.py's host busy-wait (the GPU-side timings run on the H200 only)."""
    import argparse
    import time

    common = benchmark_module("common")
    dobench_gap = benchmark_module("dobench_gap")
    assert common.parse_shape("4,4096,32,64,1") == (4, 4096, 32, 64, True)
    assert common.parse_shape("64,256,16,128,0") == (64, 256, 16, 128, False)
    with pytest.raises(argparse.ArgumentTypeError, match="B,N,H,D,causal"):
        common.parse_shape("4,4096,32,64")
    calls = []
    delayed = dobench_gap.delayed(lambda: calls.append(1) or "out", 3000.0)
    begin = time.perf_counter()
    assert delayed() == "out"
    assert time.perf_counter() - begin >= 3e-3 and calls == [1]


def test_dobench_gap_reading_flush_leaves_the_buffer_and_restores_the_driver():
    """--flush-kinds' reading flush: inside the context the driver's clear_cache reads the buffer
    (its maximum) and leaves it as it was; afterwards the driver's own method is back."""
    torch = pytest.importorskip("torch")
    dobench_gap = benchmark_module("dobench_gap")

    class Driver:
        def clear_cache(self, cache):
            cache.zero_()

    driver = Driver()
    cache = torch.randint(1, 100, (1000,), dtype=torch.int32)
    before = cache.clone()
    with dobench_gap.reading_flush(torch, driver):
        assert driver.clear_cache(cache).item() == before.max().item()
    assert torch.equal(cache, before)
    driver.clear_cache(cache)
    assert not cache.any()


def test_dobench_gap_descriptors_from_routes_the_plan_and_restores_it():
    """--jax-init's descriptors_from: inside it, a plan of 512 keys asks torch's launcher for host
    descriptors from 0 keys and for device ones from 2**30; afterwards (an exception included) the
    plan's own threshold is back."""
    dobench_gap = benchmark_module("dobench_gap")
    from flashx import core

    before = tuning.HOST_DESCRIPTORS_FROM_KEYS
    shape = (64, 512, 16, 128)
    spec = core.ArraySpec(shape, core.dense_strides(shape), "bfloat16", "cuda:0")
    plan = core.plan_call(core.CallOptions(causal=True), spec, spec, spec, {})
    with dobench_gap.descriptors_from(0):
        assert plan.either_descriptors == "host"
    with pytest.raises(RuntimeError):
        with dobench_gap.descriptors_from(1 << 30):
            assert plan.either_descriptors == "device"
            raise RuntimeError("inside")
    assert tuning.HOST_DESCRIPTORS_FROM_KEYS == before


def test_order_probe_samples_the_card_during_a_timing(monkeypatch):
    """order_probe.py --sample-ms: the sampler reads the clock and power on its thread until
    stopped and reports their medians; with no reading to be had (no pynvml) it gives NaNs."""
    import math
    import time

    torch = pytest.importorskip("torch")
    order_probe = benchmark_module("order_probe")
    clocks = iter([1500, 1700, 1600] + [1600] * 1000)
    monkeypatch.setattr(torch.cuda, "clock_rate", lambda: next(clocks))
    monkeypatch.setattr(torch.cuda, "power_draw", lambda: 650_000)  # mW, as pynvml gives it
    sampler = order_probe.CardSampler(period_ms=1.0)
    sampler.start()
    time.sleep(0.05)
    mhz, watts = sampler.stop()
    assert len(sampler.readings) >= 3 and mhz == 1600 and watts == 650

    def no_pynvml():
        raise ModuleNotFoundError("pynvml")

    monkeypatch.setattr(torch.cuda, "clock_rate", no_pynvml)
    sampler.start()
    assert all(math.isnan(x) for x in sampler.stop())


def test_settled_median_settles_before_each_of_the_rounds(monkeypatch):
    """--rounds: each timing follows its own settle(), and the median of the readings is kept; the
    CPU's debug timing takes one; a round count below one is refused."""
    common = benchmark_module("common")
    events = []
    monkeypatch.setattr(common, "settle", lambda load=None, wait=None: events.append("settle"))
    readings = iter([5.0, 1.0, 3.0])

    def measure():
        events.append("time")
        return next(readings)

    monkeypatch.setattr(common, "_DEBUG_TIMING", False)
    monkeypatch.setattr(common, "ROUNDS", 1)
    assert common.set_rounds(3) == 3
    assert common.settled_median(measure) == 3.0
    assert events == ["settle", "time"] * 3
    assert common.rounds_note(3) == "each figure the median of 3 such timings (--rounds)"
    monkeypatch.setattr(common, "_DEBUG_TIMING", True)
    events.clear()
    assert common.settled_median(lambda: 7.0) == 7.0 and events == ["settle"]
    with pytest.raises(ValueError, match="rounds"):
        common.set_rounds(0)


def test_frontends_timed_back_to_back_in_turns(monkeypatch):
    """The like-for-like JAX / torch timing: both frontends' calls back to back by the wall clock,
    each timing after a settle with its own call, the two taking turns round by round (A B, B A,
    A B), JAX compiled first and always called on the inputs it was given; medians per frontend."""
    pytest.importorskip("jax")
    import jax.numpy as jnp

    common = benchmark_module("common")
    events = []
    monkeypatch.setattr(common, "settle", lambda load=None, wait=None: wait(load()))  # the call as the load
    monkeypatch.setattr(common, "_DEBUG_TIMING", False)
    monkeypatch.setattr(common, "ROUNDS", 3)
    readings = {"torch": iter([4.0, 2.0, 3.0]), "jax": iter([9.0, 7.0, 8.0])}

    def time_wall(call, wait, warmup_ms, rep_ms):
        wait(call())
        name = events[-1][1]  # the frontend whose call this is
        assert events[-2] == ("call", name), "settled with another call"
        events.append(("time", name))
        return next(readings[name])
    monkeypatch.setattr(common, "time_wall", time_wall)
    x = jnp.arange(6.0)

    def jax_fn(a):
        assert a is x
        events.append(("call", "jax"))
        return a * 2
    torch_fn = lambda: events.append(("call", "torch")) or "torch"  # noqa: E731
    assert common.time_back_to_back_in_turns(torch_fn, jax_fn, (x,), 1.0, 2.0, device="cpu") == (3.0, 8.0)
    order = [name for kind, name in events if kind == "time"]
    assert order == ["torch", "jax", "jax", "torch", "torch", "jax"]
    assert events[0] == ("call", "jax")  # compiled before the first settle
    assert common.settled_medians_in_turns([]) == []


def test_torch_timings_settle_with_the_timed_call(monkeypatch):
    """time_torch and time_torch_back_to_back load the card with the call they time before each
    round (H200, NOTES v0.46: after the matmul settle, calls ran 8-33% slow until the clock
    climbed back, over 60-200 ms)."""
    import triton.testing

    common = benchmark_module("common")
    loads = []
    monkeypatch.setattr(common, "settle", lambda load=None, wait=None: loads.append(load))
    monkeypatch.setattr(common, "_DEBUG_TIMING", False)
    monkeypatch.setattr(common, "ROUNDS", 2)
    monkeypatch.setattr(triton.testing, "do_bench", lambda fn, warmup, rep, return_mode: 4.0)
    monkeypatch.setattr(common, "time_wall", lambda call, wait, warmup_ms, rep_ms: 6.0)

    def fn():
        return None
    assert common.time_torch(fn, 1.0, 2.0) == 4.0 and loads == [fn, fn]
    loads.clear()
    assert common.time_torch_back_to_back(fn, 1.0, 2.0) == 6.0 and loads == [fn, fn]


def test_settle_load_runs_back_to_back_for_its_time_and_waits_for_the_last_call():
    """common._load_for (settle's loop): one call waited alone, then batches each ended by a wait
    on its last result, until the time is spent."""
    import time

    common = benchmark_module("common")
    calls, waits = [], []

    def load():
        calls.append(1)
        return len(calls)
    begin = time.perf_counter()
    common._load_for(30.0, load, waits.append)
    assert (time.perf_counter() - begin) * 1e3 >= 30.0
    assert waits[0] == 1 and waits[-1] == len(calls) and len(waits) >= 2
    assert waits == sorted(waits) and len(calls) > len(waits)


def test_settle_probe_window_medians():
    """settle_probe.py's windows: each sample counted in the window its start falls in, [lo, hi)."""
    probe = benchmark_module("settle_probe")
    samples = [(0.0, 3.0), (5.0, 1.0), (9.9, 2.0), (10.0, 7.0), (40.0, 5.0)]
    assert probe.window_medians(samples, (0, 10, 25, 60)) == [2.0, 7.0, 5.0]
    assert probe.window_medians(samples, (60, 100)) == [None]
    assert probe.fmt(None) == "-" and probe.fmt(0.2234) == "223.4"


# The Gluon forward's causal persistent walk (core/gluon_forward._causal_walk, which the Gluon
# dK/dV kernel walks too) against its model in benchmarks/walk_balance.py.


@gluon.jit
def _causal_walk_kernel(TILES, COUNTS, num_tiles, num_heads, seqlen, max_tiles, ROWS: gl.constexpr):
    """Each program's count of tiles into COUNTS and its tiles, (query block, head), into TILES
    [programs, max_tiles, 2], walked as the Gluon kernels walk them (persistent, causal)."""
    first, end, step = gluon_forward._tile_walk(num_tiles, seqlen, ROWS, True, True)
    row = TILES + gl.program_id(0) * max_tiles * 2
    gl.store(COUNTS + gl.program_id(0), end)
    n = 0
    for t in range(first, end, step):
        block, head, batch = gluon_forward._tile(t, num_tiles, num_heads, 1, seqlen, ROWS, True, True)
        if n < max_tiles:
            gl.store(row + 2 * n, block)
            gl.store(row + 2 * n + 1, head + batch * num_heads)
        n += 1

WALK_SHAPES = [  # (programs, query blocks a head, heads): the causal shapes and odd ones
    (132, 8, 512), (132, 22, 128), (132, 86, 32), (132, 4, 1024), (132, 128, 16), (132, 23, 131),
    (7, 5, 3), (16, 3, 131), (40, 2, 20), (1, 4, 3), (5, 1, 5), (12, 3, 4),
]


def test_ab_control_times_a_copy_of_the_first_tree(monkeypatch, tmp_path, capsys):
    """ab.py --control adds a copy of the first tree (another path, the same files) as one more
    tree, in the rounds' alternating order, and prints its ratio to the first beside the others."""
    ab = benchmark_module("ab")
    first, second = tmp_path / "head", tmp_path / "new"
    for tree, text in ((first, "head = 1\n"), (second, "new = 2\n")):
        (tree / "flashx").mkdir(parents=True)
        (tree / "flashx" / "__init__.py").write_text(text)
    order, speeds = [], {"head": 100.0, "new": 103.0, "control": 99.0}

    def run_tree(path, cases, label, calls=1, env_vars=None, only=None, graphs=False):
        assert not env_vars and not only and not graphs
        assert (Path(path) / "flashx" / "__init__.py").read_text() == (second if label == "new" else first).joinpath(
            "flashx", "__init__.py").read_text()
        assert label != "control" or Path(path) != first
        order.append(label)
        return {"fwd case": {"tflops": speeds[label]}}

    monkeypatch.setattr(ab, "_run_tree", run_tree)
    assert ab.main([f"head={first}", f"new={second}", "--cases", "d64c", "--rounds", "2", "--control"]) == 0
    assert order == ["head", "new", "control", "control", "new", "head"]
    table = capsys.readouterr().out
    assert "| case | head | new | control | new/head | control/head | spread |" in table
    assert "| fwd case | 100.0 | 103.0 | 99.0 | 1.030 | 0.990 | 0.000 |" in table


def test_ab_env_sets_a_variable_in_one_trees_processes(monkeypatch, tmp_path, capsys):
    """ab.py --env LABEL:VAR=VALUE puts VAR into that tree's worker processes (and its control's
    when it is the first tree) and nowhere else; a label that names no tree is an error."""
    ab = benchmark_module("ab")
    (tmp_path / "flashx").mkdir()
    seen = []

    def fake_run(command, env, **kwargs):
        seen.append((env.get("FLASHX_AB_PROBE"), env["PYTHONPATH"].split(os.pathsep)[0]))
        return types.SimpleNamespace(returncode=0, stdout='RESULTS {"fwd case": {"tflops": 1.0}}', stderr="")

    monkeypatch.setattr(ab.subprocess, "run", fake_run)
    monkeypatch.delenv("FLASHX_AB_PROBE", raising=False)
    assert ab.main([f"plain={tmp_path}", f"probe={tmp_path}", "--env", "probe:FLASHX_AB_PROBE=a=b",
                    "--cases", "d64c"]) == 0
    assert seen == [(None, str(tmp_path)), ("a=b", str(tmp_path))]
    seen.clear()
    assert ab.main([f"probe={tmp_path}", "--env", "probe:FLASHX_AB_PROBE=1", "--cases", "d64c", "--control"]) == 0
    assert [value for value, _ in seen] == ["1", "1"] and seen[1][1] != str(tmp_path)
    with pytest.raises(SystemExit):
        ab.main([f"plain={tmp_path}", "--env", "other:FLASHX_AB_PROBE=1"])
    assert "expected LABEL:VAR=VALUE" in capsys.readouterr().err


def _ab_recording_workers(monkeypatch, tmp_path, case: str):
    """ab.py, a tree at tmp_path, and the list its worker command lines go to (each worker
    answering `case` at 1 TFLOP/s, never run)."""
    ab = benchmark_module("ab")
    (tmp_path / "flashx").mkdir()
    commands = []

    def fake_run(command, env, **kwargs):
        commands.append(command)
        return types.SimpleNamespace(returncode=0, stdout='RESULTS {"%s": {"tflops": 1.0}}' % case, stderr="")

    monkeypatch.setattr(ab.subprocess, "run", fake_run)
    return ab, commands


def test_ab_cuda_graphs_reaches_every_worker(monkeypatch, tmp_path):
    """ab.py --cuda-graphs puts --cuda-graphs on each worker's command line (and only then)."""
    ab, commands = _ab_recording_workers(monkeypatch, tmp_path, "fwd case")
    assert ab.main([f"a={tmp_path}", f"b={tmp_path}", "--cases", "mid", "--cuda-graphs", "--calls", "8"]) == 0
    assert len(commands) == 2 and all("--cuda-graphs" in c and c[c.index("--calls") + 1] == "8" for c in commands)
    commands.clear()
    assert ab.main([f"a={tmp_path}", "--cases", "mid"]) == 0
    assert commands and not any("--cuda-graphs" in c for c in commands)


def test_ab_only_passes_its_strings_to_the_workers_which_keep_matching_cases(monkeypatch, tmp_path):
    """ab.py --only TEXT ... reaches each worker, which times only the cases whose name holds one
    of the strings (and builds no tensors for the others)."""
    ab, commands = _ab_recording_workers(monkeypatch, tmp_path, "bwd case")
    assert ab.main([f"head={tmp_path}", "--cases", "dropout", "--only", "D128 causal dropout 0.1", "x y"]) == 0
    assert commands[0][-3:] == ["--only", "D128 causal dropout 0.1", "x y"]
    names = [ab._case_name(case) for case in ab._dense_cases(["dropout"])]
    kept = [name for name in names if "bwd dense B1 N16384 H16 D128" in name]
    assert kept == ["bwd dense B1 N16384 H16 D128 causal dropout 0.1", "bwd dense B1 N16384 H16 D128 causal dropout 0.0"]
    monkeypatch.syspath_prepend(str(Path(ab.__file__).parent))  # a worker imports its folder's common
    assert ab.worker(["dropout"], only=["no case is named this"]) == {}


def test_ab_paged_cases_count_the_visible_entries():
    """ab.py's paged cases: a chunk of `rows` queries at the end of n keys, causal bottom-right,
    sees what a brute-force mask counts; one query sees every key."""
    ab = benchmark_module("ab")
    for rows, n, causal in ((5, 12, True), (12, 12, True), (1, 12, True), (3, 7, False)):
        query_positions = np.arange(n - rows, n)[:, None]
        visible = int((np.arange(n)[None, :] <= query_positions).sum()) if causal else rows * n
        assert ab._visible(dict(n=n, rows=rows, causal=causal)) == visible
    names = [ab._case_name(case) for case in ab._dense_cases(["paged"])]
    assert "fwd paged 256 B4 Nq512 Nkv4096 H32/8 D128 causal" in names
    assert "fwd paged 256 B8 Nq1 Nkv16384 H32/8 D128" in names
    # mid2's dense chunks: named by their rows and keys; the flat cases by N alone.
    names = [ab._case_name(case) for case in ab._dense_cases(["mid2"])]
    assert "fwd dense B1 Nq128 Nkv8192 H8 D128 causal" in names and "fwd dense B1 N4096 H1 D256" in names


def test_causal_walk_model_hands_out_every_tile_once_and_evenly():
    """The model's walk gives every (block, head) to exactly one program (imbalance raises
    otherwise), and on the issue's causal shapes no program carries more than 2% above the mean
    key blocks (3.1% with the walk before, at D = 64, N = 1k)."""
    walk = benchmark_module("walk_balance")
    for programs, blocks, heads in WALK_SHAPES:
        walk.imbalance("tail", programs, blocks, heads)
    for blocks, heads in ((8, 512), (22, 128), (86, 32), (8, 256), (32, 64), (128, 16)):
        assert walk.imbalance("tail", 132, blocks, heads) < 1.02, (blocks, heads)
    assert walk.imbalance("pairs", 132, 8, 512) > 1.03


@pytest.mark.gpu
@pytest.mark.parametrize("programs, blocks, heads", WALK_SHAPES)
def test_gpu_causal_walk_is_its_model(programs, blocks, heads):
    """What each program of a persistent causal launch walks, (query block, head) in order, read
    from the kernel's own _tile_walk and _tile on the GPU, is what walk_balance.py's model says."""
    import torch

    model = benchmark_module("walk_balance")
    expected = [[model.tail_walk(p, k, programs, blocks, heads)
                 for k in range(model.tail_length(p, programs, blocks, heads))] for p in range(programs)]
    longest = max(len(mine) for mine in expected)
    tiles = torch.full((programs, longest, 2), -1, dtype=torch.int32, device="cuda")
    counts = torch.full((programs,), -1, dtype=torch.int32, device="cuda")
    rows = 64
    seqlen = blocks * rows - 5  # a ragged last block
    # A launch outside flashx's own path: undo jax_triton's TRITON_CACHE_DIR="" (an earlier test's
    # import) as flashx's launches do, or Triton's driver cannot start.
    runtime.repair_triton_cache_dir()
    _causal_walk_kernel[(programs,)](tiles, counts, blocks * heads, heads, seqlen, longest, rows, num_warps=1)
    assert counts.tolist() == [len(mine) for mine in expected]
    got = tiles.tolist()
    for p, mine in enumerate(expected):
        assert [tuple(x) for x in got[p][:len(mine)]] == mine, p


def test_decode_pages_hold_the_cache_in_the_block_tables_order():
    """bench_decode.py's paged cache: sequence b's page j, looked up through the table, is rows
    j * P .. j * P + P - 1 of b's dense cache (so paged and dense systems read the same keys)."""
    import torch

    bench_decode = benchmark_module("bench_decode")
    batch, heads, n, d, page = 3, 2, 32, 4, 8
    cache = torch.randn(batch, heads, n, d)
    order = torch.randperm(batch * n // page)
    pages = bench_decode.paged(cache, page, order)
    table = order.view(batch, n // page)
    for b in range(batch):
        gathered = pages[table[b]].reshape(n, heads, d).permute(1, 0, 2)
        assert torch.equal(gathered, cache[b])


@pytest.mark.skipif(not runtime.INTERPRETER, reason="bench_float32.py's --device cpu pass runs in Triton's interpreter")
def test_bench_float32_debug_pass_reports_times_errors_and_sdpa_ratios(tmp_path):
    """bench_float32.py offers every float32_precision flashx takes, and its CPU pass (tiny shapes,
    the interpreter) writes each system's times and its errors against float64, with SDPA's
    times over flashx's beside them."""
    import json

    from flashx import core

    bench_float32 = benchmark_module("bench_float32")
    assert bench_float32.PRECISIONS == core.FLOAT32_PRECISIONS
    assert bench_float32.main(["--device", "cpu", "--precisions", "bf16x3", "--causal", "yes", "--out", str(tmp_path)]) == 0
    (row,) = json.loads((tmp_path / "float32.json").read_text())["rows"]
    flashx_result, sdpa = row["results"]["flashx bf16x3"], row["results"]["SDPA"]
    for result in (flashx_result, sdpa):
        assert result["fwd_ms"] > 0 and result["fwd_bwd_ms"] > 0
        assert len(result["errors"]) == 4 and max(result["errors"]) < 1e-5  # the interpreter multiplies in full
    table = (tmp_path / "float32.md").read_text()
    ratio = sdpa["fwd_ms"] / flashx_result["fwd_ms"]
    assert f"| {row['D']} | yes | flashx bf16x3 | {flashx_result['fwd_ms']:.3f} |" in table
    assert f"| {ratio:.2f} |" in table


@pytest.mark.skipif(not runtime.INTERPRETER, reason="bench_float32.py's --device cpu pass runs in Triton's interpreter")
def test_bench_float32_times_named_tiles_beside_the_tables(tmp_path):
    """bench_float32.py --tiles adds a system per spec and precision, run with the named tiles
    placed by tune.py (checked against float64 like the others), and leaves the tables as they
    were; a malformed spec is refused by name."""
    import copy
    import json

    bench_float32 = benchmark_module("bench_float32")
    tables = lambda: copy.deepcopy((tuning.FLOAT32_PRECISION_TILES, tuning.FLOAT32_FEW_PROGRAMS_TILES))  # noqa: E731
    before = tables()
    args = ["--device", "cpu", "--precisions", "tf32x3", "--causal", "yes", "--no-sdpa",
            "--tiles", "f=128,32,8,2;q=32,32,4,2", "--out", str(tmp_path)]
    assert bench_float32.main(args) == 0
    assert tables() == before
    (row,) = json.loads((tmp_path / "float32.json").read_text())["rows"]
    names = ["flashx tf32x3", "flashx tf32x3 [f=128,32,8,2;q=32,32,4,2]"]
    assert list(row["results"]) == names
    for name in names:
        assert row["results"][name]["fwd_bwd_ms"] > 0 and max(row["results"][name]["errors"]) < 1e-5
    for bad in ("k=32,32,4", "x=1,2,3,4", "k=1,1,1,1;k=2,2,2,2", "q=a,b,c,d", "f=0,32,8,2"):
        with pytest.raises(SystemExit):
            bench_float32.parse_args(["--tiles", bad])


def test_bench_float32_tiles_reach_the_plan(monkeypatch):
    """Inside bench_float32.tiles_placed the GPU plan of the call takes the named tiles (on causal
    grids small enough for FLOAT32_FEW_PROGRAMS_TILES too, which would otherwise override both),
    and after it the tables' again: the plan cache is cleared on both sides."""
    import torch

    from flashx import core
    from flashx.core import plan as plan_mod

    bench_float32 = benchmark_module("bench_float32")
    monkeypatch.setattr(runtime, "INTERPRETER", False)  # the GPU's tables, not the interpreter's tiles
    monkeypatch.setattr(runtime, "multiprocessor_count", lambda: 132)
    plan_mod.clear_plan_cache()
    shapes = ((2, 2048, 8, 128), (2, 2048, 2, 128))  # 256 forward and dK/dV programs: the small-grid tiles
    q, k = (core.ArraySpec(s, core.dense_strides(s), "float32", "cuda") for s in shapes)
    tiles = lambda: core.plan_call(core.CallOptions(causal=True), q, k, k, {}).tiles  # noqa: E731
    fields = lambda t: (t.block_m, t.block_n, t.num_warps, t.num_stages)  # noqa: E731
    table = tiles()
    named = {"forward": (128, 32, 8, 2), "dkdv": (32, 32, 4, 1)}
    assert fields(table.dkdv) != named["dkdv"] and fields(table.forward) != named["forward"]
    case = dict(shape=shapes[0], q=torch.empty(1, dtype=torch.float32), causal=True, window=None, precision="tf32x3")
    with bench_float32.tiles_placed(named, case):
        inside = tiles()
    assert fields(inside.forward) == named["forward"] and fields(inside.dkdv) == named["dkdv"]
    assert inside.dq == table.dq
    assert tiles() == table
    plan_mod.clear_plan_cache()


@pytest.mark.parametrize("dtype, precision, d", [("bfloat16", "tf32x3", 128), ("float32", "tf32x3", 128),
                                                 ("float32", "bf16x3", 256), ("float32", "ieee", 64)])
def test_tune_puts_each_candidate_where_the_plan_reads_it(monkeypatch, dtype, precision, d):
    """tune.py's candidate for one kernel is the tile the GPU plan then takes for that kernel, the
    other kernels keep the table's, and every table is as before once the candidate is out
    (float32: FLOAT32_PRECISION_TILES, also for a precision without an entry of its own; on a
    small causal grid too, where FLOAT32_FEW_PROGRAMS_TILES would otherwise override it)."""
    import copy
    import dataclasses

    import torch

    tune = benchmark_module("tune")
    monkeypatch.setattr(runtime, "INTERPRETER", False)  # the GPU's tables, not the interpreter's tiles
    monkeypatch.setattr(runtime, "multiprocessor_count", lambda: 132)  # an H200's SMs (no driver here)
    float32 = dtype == "float32"
    itemsize = 4 if float32 else 2
    c = dict(q=torch.empty(1, 1, 1, d, dtype=getattr(torch, dtype)), shape=(1, 4096, 1, d), causal=True, window=None,
             precision=precision)
    tables = lambda: copy.deepcopy((tuning.FLOAT32_PRECISION_TILES, tuning.FLOAT32_FEW_PROGRAMS_TILES,  # noqa: E731
                                    tuning.TUNED_TILES, tuning.SHORT_FORWARD_TILES))
    before = tables()
    for grid in (dict(), dict(grid=tuning.CallGrid(1, 4096, 1, 4096))):  # the second: 128 programs at most
        table_tiles = tuning.tile_config(d, itemsize, True, 4096, None, float32_precision=precision, **grid)
        for kernel in tune.KERNELS:
            options = tune.candidates(tune._table_width(d, float32), kernel, 4096, float32)
            assert options and len(set(options)) == len(options)
            for tiles in options[:3]:
                with tune._tiles_in_table(c, kernel, tiles):
                    got = tuning.tile_config(d, itemsize, True, 4096, None, float32_precision=precision, **grid)
                chosen = getattr(got, kernel)
                assert (chosen.block_m, chosen.block_n, chosen.num_warps, chosen.num_stages) == tiles
                assert dataclasses.replace(got, **{kernel: getattr(table_tiles, kernel)}) == table_tiles
                assert tables() == before


@pytest.mark.skipif(not runtime.INTERPRETER, reason="tune.py's --device cpu pass runs in Triton's interpreter")
def test_tune_float32_debug_pass_checks_and_times_its_candidates(tmp_path):
    """tune.py --dtype float32's CPU pass (tiny shapes, the interpreter) checks its candidates
    against the table's outputs, times them, and prints FLOAT32_PRECISION_TILES entries."""
    import json

    tune = benchmark_module("tune")
    args = ["--device", "cpu", "--dtype", "float32", "--kernels", "dkdv", "--causal", "yes", "--out", str(tmp_path)]
    assert tune.main(args) == 0
    rows = json.loads((tmp_path / "tune.json").read_text())["rows"]
    assert len(rows) == 2 and all(r["why"] is None and r["ms"] > 0 and r["err"] < 1e-4 for r in rows)
    report = (tmp_path / "tune.md").read_text()
    assert "float32 (tf32x3)" in report and "    128: dict(dkdv=KernelTiles(" in report


@pytest.mark.skipif(not runtime.INTERPRETER, reason="tune.py's --device cpu pass runs in Triton's interpreter")
def test_tune_interrupted_reports_what_it_measured(tmp_path, monkeypatch):
    """An interrupt during the sweep (a device call's `timeout -s INT`) ends the measuring, and
    tune.py still writes the candidates measured before it, with their winners."""
    import json

    tune = benchmark_module("tune")
    measured = []

    def measure_then_interrupt(*args, **kwargs):
        if measured:
            raise KeyboardInterrupt
        measured.append(tune_measure(*args, **kwargs))
        return measured[-1]

    tune_measure = tune.measure
    monkeypatch.setattr(tune, "measure", measure_then_interrupt)
    args = ["--device", "cpu", "--kernels", "dkdv", "dq", "--causal", "yes", "--out", str(tmp_path)]
    assert tune.main(args) == 0
    rows = json.loads((tmp_path / "tune.json").read_text())["rows"]
    assert len(rows) == 2 and {r["kernel"] for r in rows} == {"dkdv"} and all(r["ms"] > 0 for r in rows)
    winners = (tmp_path / "tune.md").read_text().split("```python")[1]
    assert winners.count("TileConfig(") == 1 and "None, KernelTiles(" in winners and "None)," in winners
