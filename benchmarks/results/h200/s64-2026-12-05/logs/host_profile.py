import cProfile, pstats, time, sys, torch
import flashx.torch
q = torch.randn(1, 32, 1, 128, device="cuda", dtype=torch.bfloat16)
k = torch.randn(1, 8, 4096, 128, device="cuda", dtype=torch.bfloat16)
v = torch.randn_like(k)
f = lambda: flashx.torch.attention(q, k, v, layout="bhnd")
for _ in range(20): f()
torch.cuda.synchronize()
for name, g in (("dense decode", f), ("dense prefill-ish 128q", lambda: flashx.torch.attention(torch.randn(1, 32, 128, 128, device="cuda", dtype=torch.bfloat16)[:, :, :128], k, v, layout="bhnd"))):
    for _ in range(5): g()
    torch.cuda.synchronize()
    t = time.perf_counter(); n = 300
    for _ in range(n): g()
    host = (time.perf_counter() - t) / n * 1e6
    torch.cuda.synchronize()
    print(f"{name}: host {host:.1f} us per call (no sync inside)")
pr = cProfile.Profile(); pr.enable()
for _ in range(300): f()
pr.disable(); torch.cuda.synchronize()
pstats.Stats(pr).sort_stats("tottime").print_stats(22)
