#!/usr/bin/env python3
"""Run flashx's tests on a GPU host within a time limit: the node ids split round-robin over
several pytest processes, each stopped by SIGINT at the deadline so that it still prints its
summary (failures with their tracebacks), and one combined log.

On the H200 one command may run 10 minutes and the whole suite takes longer than that in one
process (kernel compiles); eight processes ran 472 of 512 tests in 370 s there (NOTES v0.49).

    python3 scripts/gpu_tests.py --processes 8 --deadline 370 --log $OUT/tests.log [pytest args ...]
    python3 scripts/gpu_tests.py --ids failed.txt --log $OUT/rerun.log   # node ids, one a line
    python3 scripts/gpu_tests.py --balance durations.json --log $OUT/tests.log -m gpu tests

Each run writes its tests' durations (pytest's setup + call + teardown, seconds) to LOG's stem +
".durations.json", over those of --balance's file; given such a file, --balance splits the tests
so that each process's known durations add up evenly (the longest first, each to the process
with least; a test without a figure counts the median), in place of round-robin.

Prints one line a process (its exit code and pytest's last line), every FAILED / ERROR line, and
the tests a process did not reach before the deadline, which also go to LOG's stem +
".unreached.txt" for a later `--ids`; returns 0 only if every process passed (a process stopped at
the deadline counts as not). With --rerun-failed SECONDS the failed tests then run again in one
fresh process, and each is reported as failed again or passed alone (a failure through what ran
beside or before it), without changing the exit code.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def collect(pytest_args: list) -> list:
    """The node ids pytest collects for `pytest_args` (default: tests/)."""
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", *(pytest_args or ["tests"])],
                         cwd=ROOT, capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if "::" in line]


# A verbose pytest line with a test's outcome: "tests/test_x.py::test_y[case] PASSED   [ 12%]".
_OUTCOME = re.compile(r"^(\S+::\S+) (PASSED|FAILED|SKIPPED|ERROR|XFAIL|XPASS)\b", re.MULTILINE)


def _file_and_name(node_id: str) -> str:
    """A node id without the file's folders: pytest reports ids relative to its rootdir, which for
    files outside the repository (tests of this script) is not the path they were given by."""
    path, _, name = node_id.partition("::")
    return f"{Path(path).name}::{name}"


# pytest's --durations lines: "12.34s call     tests/test_x.py::test_y[case]".
_DURATION = re.compile(r"^(\d+(?:\.\d+)?)s (?:setup|call|teardown)\s+(\S+::\S+)$", re.MULTILINE)


def durations(output: str) -> dict:
    """Seconds per test (setup + call + teardown) that pytest's --durations=0 report in `output` gives."""
    seconds = {}
    for m in _DURATION.finditer(output):
        seconds[m.group(2)] = seconds.get(m.group(2), 0.0) + float(m.group(1))
    return seconds


def split(ids: list, processes: int, seconds: dict) -> list:
    """`ids` in at most `processes` chunks: round-robin without `seconds`; else the longest test
    first, each to the chunk with the least time so far, of equal ones the one with fewest tests
    (a test without a figure counts the median). Each chunk keeps the ids' order."""
    if not seconds:
        return [ids[i::processes] for i in range(processes) if ids[i::processes]]
    known = {_file_and_name(k): v for k, v in seconds.items()}
    default = statistics.median(known.values())
    cost = [known.get(_file_and_name(i), default) for i in ids]
    loads, members = [0.0] * processes, [[] for _ in range(processes)]
    for j in sorted(range(len(ids)), key=lambda j: -cost[j]):
        least = min(range(processes), key=lambda k: (loads[k], len(members[k])))  # ties: fewest tests
        loads[least] += cost[j]
        members[least].append(j)
    return [[ids[j] for j in sorted(chunk)] for chunk in members if chunk]


def unreached(ids: list, output: str) -> list:
    """The ids in `ids` that verbose pytest `output` reports no outcome for (stopped first)."""
    reported = {_file_and_name(m.group(1)) for m in _OUTCOME.finditer(output)}
    return [i for i in ids if _file_and_name(i) not in reported]


def pytest_command(seconds: float, *args: str) -> list:
    """A verbose pytest run of `args`, SIGINT at `seconds` (so it still prints its summary), SIGKILL 30 s later."""
    return ["timeout", "-s", "INT", "-k", "30", str(int(seconds)), sys.executable, "-m", "pytest",
            "-v", "-rfE", "--tb=short", "-p", "no:cacheprovider", *args]


def process_env(index: int) -> dict:
    """The environment of pytest process `index`: its own Triton cache folder (under
    TRITON_CACHE_DIR, or Triton's default). Processes sharing one folder rewrite each other's
    launcher modules as they build them (Triton's cache replaces a file that exists). Once, on the
    H100 with 8 processes (session 66), a Gluon dK/dV launch ran through the launcher module of the
    portable backward kernel (TypeError: function takes exactly 149 arguments (109 given)), and
    passed alone and in the same order in one process: a shared folder is the suspect."""
    base = os.environ.get("TRITON_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".triton", "cache")
    return {**os.environ, "TRITON_CACHE_DIR": os.path.join(base, f"gpu_tests-{index}")}


def run(ids: list, processes: int, deadline: float, log: Path, seconds: dict | None = None,
        rerun_seconds: float = 0) -> int:
    """Run `ids` (already selected: no -m or -k again) in `processes` pytest processes (split by
    `seconds`, see split), SIGINT at `deadline` seconds (SIGKILL 30 s later); write every
    process's output to `log`, the tests none reached to its .unreached.txt and the durations
    over `seconds` to its .durations.json; with rerun_seconds, run the failed tests again alone
    (rerun_failed); return 0 if all passed (a failure that passes alone still counts)."""
    chunks = split(ids, processes, seconds or {})
    logs = [log.with_name(f"{log.stem}.{i}{log.suffix}") for i in range(len(chunks))]
    begin = time.time()
    procs = [subprocess.Popen(pytest_command(deadline, "--durations=0", "--durations-min=0", *chunk),
                              cwd=ROOT, stdout=open(path, "w"), stderr=subprocess.STDOUT, env=process_env(i))
             for i, (chunk, path) in enumerate(zip(chunks, logs))]
    failed_lines, missed, status, measured = [], [], 0, dict(seconds or {})
    with open(log, "w") as combined:
        for i, (proc, path) in enumerate(zip(procs, logs)):
            code = proc.wait()
            text = path.read_text()
            path.unlink()
            combined.write(f"\n===== process {i}: {len(chunks[i])} tests, exit {code}, {time.time() - begin:.0f} s\n{text}")
            last = text.strip().splitlines()[-1:] or ["(no output)"]
            print(f"process {i}: exit {code} after {time.time() - begin:.0f} s: {last[0]}", flush=True)
            failed_lines += [line for line in text.splitlines() if line.startswith(("FAILED ", "ERROR "))]
            missed += unreached(chunks[i], text)
            measured.update(durations(text))
            status = status or code
    for line in failed_lines:
        print(line)
    log.with_name(f"{log.stem}.durations.json").write_text(json.dumps(measured, indent=1, sort_keys=True))
    missed_file = log.with_name(f"{log.stem}.unreached.txt")
    missed_file.write_text("".join(f"{i}\n" for i in missed))
    if missed:
        print(f"{len(missed)} not reached (listed in {missed_file.name}):")
        for node_id in missed:
            print(f"  {node_id}")
    if rerun_seconds > 0 and failed_lines:
        rerun_failed([line.split()[1] for line in failed_lines], rerun_seconds, log)
    return 1 if status else 0


def rerun_failed(ids: list, seconds: float, log: Path) -> None:
    """Run the failed `ids` again in one fresh process (SIGINT at `seconds`; output in LOG's stem
    + ".rerun.log") and print each one's outcome there: a test that passes alone failed through
    what ran beside or before it (another process, a shared cache, an earlier test's state)."""
    rerun_log = log.with_name(f"{log.stem}.rerun{log.suffix}")
    with open(rerun_log, "w") as out:
        subprocess.run(pytest_command(seconds, *dict.fromkeys(ids)), cwd=ROOT, stdout=out, stderr=subprocess.STDOUT,
                       env=process_env(0))
    text = rerun_log.read_text()
    outcomes = {_file_and_name(m.group(1)): m.group(2) for m in _OUTCOME.finditer(text)}
    print(f"rerun alone ({rerun_log.name}):")
    for node_id in dict.fromkeys(ids):
        outcome = outcomes.get(_file_and_name(node_id))
        verdict = {"PASSED": "passed alone", None: "not reached"}.get(outcome, "failed again")
        print(f"  {verdict}: {node_id}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--processes", type=int, default=8)
    p.add_argument("--deadline", type=float, default=370.0, help="seconds before each process gets SIGINT")
    p.add_argument("--log", type=Path, required=True, help="the combined log")
    p.add_argument("--ids", type=Path, help="run these node ids (one a line) instead of collecting")
    p.add_argument("--balance", type=Path, help="a .durations.json of an earlier run: split the tests by it")
    p.add_argument("--rerun-failed", type=float, default=0.0, metavar="SECONDS",
                   help="then run the failed tests again in one fresh process, SIGINT at SECONDS")
    args, pytest_args = p.parse_known_args(argv)
    if args.processes < 1:
        p.error("--processes must be at least 1")
    ids = [x for x in args.ids.read_text().splitlines() if x.strip()] if args.ids else collect(pytest_args)
    if not ids:
        print("gpu_tests.py: no tests to run", file=sys.stderr)
        return 1
    print(f"{len(ids)} tests in {min(args.processes, len(ids))} processes, SIGINT at {args.deadline:.0f} s", flush=True)
    seconds = json.loads(args.balance.read_text()) if args.balance else None
    return run(ids, args.processes, args.deadline, args.log.resolve(), seconds, args.rerun_failed)


if __name__ == "__main__":
    sys.exit(main())
