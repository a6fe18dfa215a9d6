"""Halve the CPU suite's time: skip Triton's interpreter re-patching triton.language on every
call of a @triton.jit helper inside a launch.

Triton's interpreter (triton/runtime/interpreter.py, 3.6-3.9) patches triton.language's
builtins once per launch (GridExecutor.__call__) and again on every device-function call
(InterpretedFunction.__call__), each time walking the language modules with inspect.getmembers.
Within one launch the second and later patches of the same module globals change nothing, yet
they took half of an interpreted forward + backward. Here each launch patches a helper's
globals once; what runs, and how, is otherwise Triton's own code.

Installed only if Triton's device call still reads as expected: a Triton that changes it keeps
its own (slower) behaviour. Tests only: flashx itself never patches Triton.
"""
from __future__ import annotations

import inspect

# The lines of InterpretedFunction.__call__ that this replaces, in order.
_EXPECTED_DEVICE_CALL = ("_patch_lang(self.fn)", "fn = self.rewrite()", "return fn(*args, **kwargs)",
                         "raise InterpreterError(repr(e)) from e")


def install() -> bool:
    """Patch Triton's interpreter when flashx runs through it (import flashx first) and it is the
    one this module knows; True if patched."""
    from flashx.core import runtime

    if not runtime.INTERPRETER:
        return False
    from triton.runtime import interpreter

    # Their own methods (vars), not what a class inherits from object or type.
    device_call = vars(interpreter.InterpretedFunction).get("__call__")
    launch = vars(interpreter.GridExecutor).get("__call__")
    if getattr(device_call, "_flashx_tests", False):
        return True
    try:
        body = [line.strip() for line in inspect.getsource(device_call).splitlines()]
    except (OSError, TypeError):
        return False
    code = [line for line in body if line and not line.startswith(("def ", "#", "try:", "except "))]
    if tuple(code) != _EXPECTED_DEVICE_CALL or launch is None or not hasattr(interpreter, "_patch_lang"):
        return False

    patched_this_launch: set[int] = set()  # id() of the globals of the helpers patched in this launch

    def launch_once(self, *args, **kwargs):
        patched_this_launch.clear()
        try:
            return launch(self, *args, **kwargs)
        finally:  # so a helper called between launches patches its globals on its first call
            patched_this_launch.clear()

    def call_helper(self, *args, **kwargs):
        if id(self.fn.__globals__) not in patched_this_launch:
            interpreter._patch_lang(self.fn)
            patched_this_launch.add(id(self.fn.__globals__))
        fn = self.rewrite()
        try:
            return fn(*args, **kwargs)
        except Exception as e:
            raise interpreter.InterpreterError(repr(e)) from e

    call_helper._flashx_tests = True
    interpreter.GridExecutor.__call__ = launch_once
    interpreter.InterpretedFunction.__call__ = call_helper
    return True
