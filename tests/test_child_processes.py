"""Every child process we start (auto's workers, bench runs, hard-deadline solver children) runs no module of the
working folder, and dies with its parent, SIGKILL included, leaving no solver and no temporary folder (#34).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from remat_models.core.processes import child_env, descendants, python_command
from remat_models.io import linear_chain, write_graph

LINUX = sys.platform.startswith("linux")
REMAT = [sys.executable, "-P", "-m", "remat_models.cli.app"]  # as the `remat` script: no working folder on the path
EVIL = """
import os
open(os.path.join(os.path.dirname(os.path.abspath(__file__)), f"ran-{os.getpid()}"), "w").close()
raise SystemExit("the working folder's numpy.py ran")
"""


def _evil_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "work"
    folder.mkdir()
    (folder / "numpy.py").write_text(EVIL)
    write_graph(linear_chain(32), folder.parent / "chain32.json")
    return folder


def _ran(folder: Path) -> list[str]:
    return sorted(path.name for path in folder.glob("ran-*"))


def test_child_commands_leave_the_working_folder_off_the_module_path(tmp_path: Path) -> None:
    folder = _evil_folder(tmp_path)
    command = python_command("json.tool", "--help")
    assert command[:3] == [sys.executable, "-P", "-m"]
    env = child_env({"EXTRA": "1"})
    assert env["PYTHONSAFEPATH"] == "1" and env["EXTRA"] == "1"
    assert "" not in env["PYTHONPATH"].split(os.pathsep)
    probe = [sys.executable, "-P", "-c", "import numpy, sys; print(numpy.__file__)"]
    found = subprocess.run(probe, cwd=folder, env=env, capture_output=True, text=True, check=True).stdout
    assert str(folder) not in found
    assert _ran(folder) == []


def test_auto_workers_do_not_run_a_numpy_py_in_the_working_folder(tmp_path: Path) -> None:
    folder = _evil_folder(tmp_path)
    done = subprocess.run(
        [*REMAT, "solve", "../chain32.json", "-b", "80%", "--time-limit", "3"], cwd=folder, capture_output=True
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert b"ended without finishing" not in done.stderr  # both workers reported
    assert _ran(folder) == []


def test_bench_runs_do_not_run_a_numpy_py_in_the_working_folder(tmp_path: Path) -> None:
    folder = _evil_folder(tmp_path)
    command = [*REMAT, "bench", "run", "-g", "../chain32.json", "-b", "80%", "-m", "chen-greedy", "-o", "r.jsonl"]
    done = subprocess.run(command, cwd=folder, capture_output=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert b'"status":"within_budget"' in (folder / "r.jsonl").read_bytes()
    assert _ran(folder) == []


# A process that solves in a hard-deadline child whose "solver" is a program in a process group of its own (as
# MiniZinc puts fzn-gecode), then waits to be killed.
DEADLINE_SOLVER = """
import os, subprocess, sys, tempfile, time
from remat_models.backends.deadline import run_with_deadline
from remat_models.backends.interrupt import Stopper

def solve():
    folder = tempfile.mkdtemp(prefix="probe-")  # in the child's own temporary folder
    program = subprocess.Popen(["sleep", "600"], process_group=0)
    print(program.pid, folder, flush=True)
    time.sleep(600)

run_with_deadline("probe", solve, 600.0, Stopper())
"""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != b"Z"  # a zombie has ended (its new parent reaps it)


def _wait_dead(pids: list[int], seconds: float) -> list[int]:
    until = time.monotonic() + seconds
    while (alive := [pid for pid in pids if _alive(pid)]) and time.monotonic() < until:
        time.sleep(0.1)
    return alive


@pytest.mark.skipif(not LINUX, reason="PR_SET_PDEATHSIG and /proc are Linux's")
def test_a_hard_deadline_child_and_its_solver_die_with_a_killed_parent(tmp_path: Path) -> None:
    script = tmp_path / "deadline_solver.py"
    script.write_text(DEADLINE_SOLVER)
    parent = subprocess.Popen([sys.executable, "-P", str(script)], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        program, folder = parent.stdout.readline().split()
        child = next(pid for pid in _children(parent.pid))
        assert Path(folder).is_dir() and os.getpgid(child) == os.getpgid(parent.pid)  # in its parent's group
        assert os.getpgid(int(program)) != os.getpgid(child)  # the "solver" left that group
        assert Path(folder).parent.name.startswith("remat-solve-")
        time.sleep(1.0)  # the watchdog notes the child's processes every 0.2 s
    finally:
        parent.kill()
        parent.wait()
    assert _wait_dead([child, int(program)], 5.0) == []
    until = time.monotonic() + 5.0
    while Path(folder).parent.exists() and time.monotonic() < until:
        time.sleep(0.1)
    assert not Path(folder).parent.exists()  # the temporary folder removed


def _children(parent: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_bytes().rsplit(b")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if int(fields[1]) == parent:
                found.append(int(entry.name))
    return found


@pytest.mark.skipif(not LINUX, reason="PR_SET_PDEATHSIG and /proc are Linux's")
@pytest.mark.skipif(shutil.which("minizinc") is None, reason="needs the MiniZinc binary")
def test_a_killed_minizinc_solve_leaves_no_solver_and_no_temporary_files(tmp_path: Path) -> None:
    graph = tmp_path / "unet3.json"
    subprocess.run([*REMAT, "graph", "generate", "unet", "--size", "3", "-o", str(graph)], check=True)
    command = [*REMAT, "solve", str(graph), "-b", "50%", "-f", "checkmate", "--backend", "minizinc"]
    solve = subprocess.Popen([*command, "--time-limit", "1e12"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    members: list[int] = []
    try:
        until = time.monotonic() + 60.0
        while time.monotonic() < until:
            members = list(descendants(solve.pid))
            # the solve's fzn- solver (in its deadline child's folder), not solver_problem's probe run before it
            if any("fzn-" in _command(pid) and _tmpdir(pid) for pid in members):
                break
            time.sleep(0.2)
        else:
            pytest.fail("no fzn- solver process appeared within 60 s")
        folders = {_tmpdir(pid) for pid in members} - {None}
    finally:
        solve.send_signal(signal.SIGKILL)
        solve.wait()
    assert len(folders) == 1 and Path(str(next(iter(folders)))).name.startswith("remat-solve-")
    assert _wait_dead(members, 5.0) == []  # deadline child, its watchdog, minizinc and fzn-gecode
    until = time.monotonic() + 5.0
    while any(Path(str(f)).exists() for f in folders) and time.monotonic() < until:
        time.sleep(0.1)
    assert not [f for f in folders if Path(str(f)).exists()]  # MiniZinc's files and ours removed


def _command(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _tmpdir(pid: int) -> str | None:
    """The TMPDIR a process was started with (the solver binaries get the deadline child's folder)."""
    try:
        variables = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return None
    found = [v[len(b"TMPDIR=") :].decode() for v in variables if v.startswith(b"TMPDIR=")]
    return found[0] if found and "remat-solve-" in found[0] else None


def test_watchdog_script_runs_without_the_package(tmp_path: Path) -> None:
    """The watchdog is started as a plain file (-I -S): it imports nothing of remat_models."""
    source = Path(__file__).parents[1] / "remat_models" / "core" / "processes.py"
    text = source.read_text()
    imports = [line for line in text.splitlines() if line.startswith(("import ", "from "))]
    assert not [line for line in imports if "remat_models" in line], textwrap.shorten(str(imports), 200)
