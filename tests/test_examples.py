"""The demo (the README's main job) runs end to end and finds every result in tolerance."""
import importlib.util
import json
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
    for section in ("flashx.torch.attention", "flashx.jax.attention", "NumPy", "Decoding", "Gradients"):
        assert section in run.stdout, f"demo printed no {section!r} section"
    assert run.stdout.count("  ok") >= 8


GPU_TESTS = pathlib.Path(__file__).resolve().parents[1] / "scripts" / "gpu_tests.py"


def test_gpu_tests_script_splits_reports_and_stops_at_the_deadline(tmp_path):
    """scripts/gpu_tests.py runs the given node ids over its processes, exits 1 when one fails or
    is stopped at the deadline, prints each FAILED line, keeps every process's summary (a
    process stopped by SIGINT still prints pytest's) in the combined log, and lists the tests a
    stopped process did not reach (printed, and in the log's .unreached.txt for a rerun)."""
    cases = tmp_path / "test_cases.py"
    dirs = tmp_path / "cache_dirs.txt"  # each test writes its process's Triton cache folder there
    record = f"open({str(dirs)!r}, 'a').write(os.environ['TRITON_CACHE_DIR'] + '\\n')"
    cases.write_text(f"import os, time\n\ndef test_passes():\n    {record}\n\n"
                     f"def test_fails():\n    {record}\n    assert 1 == 2\n\ndef test_sleeps():\n    time.sleep(120)\n")
    ids = tmp_path / "ids.txt"
    log = tmp_path / "tests.log"
    ids.write_text(f"{cases}::test_passes\n{cases}::test_fails\n")
    run = subprocess.run([sys.executable, str(GPU_TESTS), "--processes", "2", "--deadline", "60", "--ids", str(ids),
                          "--log", str(log)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "test_cases.py::test_fails" in run.stdout and "FAILED" in run.stdout
    text = log.read_text()
    assert "1 passed" in text and "1 failed" in text and text.count("===== process") == 2
    assert (tmp_path / "tests.unreached.txt").read_text() == "" and "not reached" not in run.stdout
    seconds = json.loads((tmp_path / "tests.durations.json").read_text())
    assert sorted(k.split("::")[-1] for k in seconds) == ["test_fails", "test_passes"]
    assert all(v >= 0 for v in seconds.values())
    # One Triton cache folder a process (a shared one let processes rewrite each other's launchers).
    assert sorted(pathlib.Path(line).name for line in dirs.read_text().split()) == ["gpu_tests-0", "gpu_tests-1"]
    ids.write_text(f"{cases}::test_passes\n")
    run = subprocess.run([sys.executable, str(GPU_TESTS), "--processes", "3", "--ids", str(ids), "--log", str(log)],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and "1 tests in 1 processes" in run.stdout, run.stdout + run.stderr
    ids.write_text(f"{cases}::test_passes\n{cases}::test_sleeps\n{cases}::test_fails\n")
    run = subprocess.run([sys.executable, str(GPU_TESTS), "--processes", "1", "--deadline", "3", "--ids", str(ids),
                          "--log", str(log)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 1 and "KeyboardInterrupt" in log.read_text(), run.stdout + log.read_text()
    missed = [f"{cases}::test_sleeps", f"{cases}::test_fails"]
    assert (tmp_path / "tests.unreached.txt").read_text().splitlines() == missed, run.stdout
    assert "2 not reached" in run.stdout and all(m in run.stdout for m in missed), run.stdout


def test_gpu_tests_script_reruns_failures_alone(tmp_path):
    """--rerun-failed runs the failed tests again in one fresh process and tells a test that fails
    only beside or after others (here: one that fails the first time) from one that fails
    again; the exit code still reports the failures."""
    cases = tmp_path / "test_cases.py"
    marker = tmp_path / "ran-once"
    cases.write_text(f"import pathlib\n\ndef test_fails():\n    assert 1 == 2\n\n"
                     f"def test_fails_once():\n    marker = pathlib.Path({str(marker)!r})\n"
                     f"    first = not marker.exists()\n    marker.touch()\n    assert not first\n\n"
                     f"def test_passes():\n    pass\n")
    ids = tmp_path / "ids.txt"
    ids.write_text("".join(f"{cases}::test_{name}\n" for name in ("fails", "fails_once", "passes")))
    log = tmp_path / "tests.log"
    run = subprocess.run([sys.executable, str(GPU_TESTS), "--processes", "2", "--ids", str(ids), "--log", str(log),
                          "--rerun-failed", "60"], capture_output=True, text=True, timeout=180)
    assert run.returncode == 1, run.stdout + run.stderr
    verdicts = {line.split(": ")[1].split("/")[-1]: line.split(": ")[0].strip()
                for line in run.stdout.splitlines() if line.startswith("  ") and ": " in line}
    assert verdicts == {"test_cases.py::test_fails": "failed again", "test_cases.py::test_fails_once": "passed alone"}, run.stdout
    assert "test_passes" not in (tmp_path / "tests.rerun.log").read_text()


def test_gpu_tests_script_balances_by_durations():
    """With the durations of an earlier run, the longest test goes first to the least loaded
    process (unknown tests count the median), each chunk in the given order; without, round-robin."""
    spec = importlib.util.spec_from_file_location("gpu_tests", GPU_TESTS)
    gpu_tests = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gpu_tests)
    ids = [f"tests/t.py::test_{x}" for x in "abcde"]
    seconds = {"elsewhere/t.py::test_a": 10.0, "tests/t.py::test_b": 1.0, "tests/t.py::test_c": 1.0,
               "tests/t.py::test_d": 8.0}
    # LPT: a (10) -> 0, d (8) -> 1, e (median 4.5) -> 1, b (1) -> 0, c (1) -> 0: 12 against 12.5.
    assert gpu_tests.split(ids, 2, seconds) == [[ids[0], ids[1], ids[2]], [ids[3], ids[4]]]
    assert gpu_tests.split(ids, 2, {}) == [ids[0::2], ids[1::2]]
    assert gpu_tests.split(ids[:1], 3, seconds) == [ids[:1]]
    assert gpu_tests.split(ids, 2, {i: 0.0 for i in ids}) == [ids[0::2], ids[1::2]]  # skipped tests: 0 s each
    text = "0.50s call     tests/t.py::test_a\n0.25s setup    tests/t.py::test_a\n1.00s call     tests/t.py::test_b[x y]\n"
    assert gpu_tests.durations(text) == {"tests/t.py::test_a": 0.75}
