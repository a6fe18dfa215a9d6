"""The demo (the README's main job) runs end to end and finds every result in tolerance."""
import os
import pathlib
import subprocess
import sys

DEMO = pathlib.Path(__file__).resolve().parents[1] / "examples" / "demo.py"


def test_demo_runs_and_every_check_passes():
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"} | {"PYTHONUNBUFFERED": "1"}
    run = subprocess.run([sys.executable, str(DEMO)], capture_output=True, text=True, timeout=600, env=env)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "CHECK" not in run.stdout and "FAILED" not in run.stdout, run.stdout[-3000:]
    for section in ("flashx.torch.attention", "flashx.jax.attention", "NumPy", "Gradients"):
        assert section in run.stdout, f"demo printed no {section!r} section"
    assert run.stdout.count("  ok") >= 8
