"""pytest plugin: report a flashx runner that belongs to another kernel than its call's."""
import sys, traceback
import flashx.core.launch as L

_names = {}  # id(runner) -> (compiled kernel name, n params in its src signature)

def _kname(compiled):
    md = getattr(compiled, "metadata", None)
    return getattr(md, "name", None) or getattr(compiled, "name", "?")

_orig_remember = L.CompiledRunners.remember
def remember(self, key, compiled, grid):
    _orig_remember(self, key, compiled, grid)
    r = self._runners.get(key)
    frame = sys._getframe(1)
    call = frame.f_locals.get("call") or frame.f_locals.get("self")
    cname = getattr(getattr(getattr(call, "kernel", None), "fn", None), "__name__", "?")
    sig = getattr(getattr(compiled, "src", None), "signature", {})
    _names[id(r)] = (_kname(compiled), len(sig), cname, frame.f_code.co_name)
    if not str(_kname(compiled)).startswith(cname):
        print(f"FXDBG remember MISMATCH compiled={_kname(compiled)} call={cname} via {frame.f_code.co_name}", file=sys.stderr, flush=True)
L.CompiledRunners.remember = remember

_orig_launch = L.KernelCall._launch
def _launch(self, outputs, inputs):
    try:
        return _orig_launch(self, outputs, inputs)
    except TypeError:
        r = self.runners
        key = r.key((*inputs, *self.arrays, *outputs)) if r is not None else None
        runner = r.get(key) if r is not None else None
        print("FXDBG TypeError in", self.kernel.fn.__name__, "inputs", len(inputs), "args", len(self.args),
              "outputs", len(outputs), "constexprs", len(self.constexprs), "runner", _names.get(id(runner)),
              "grid", self.grid, "n runners", len(r._runners) if r else None, file=sys.stderr, flush=True)
        print("FXDBG key", key, file=sys.stderr, flush=True)
        for k2, rr in (r._runners.items() if r else ()):
            print("FXDBG  kept", k2 == key, _names.get(id(rr)), file=sys.stderr, flush=True)
        raise
L.KernelCall._launch = _launch
