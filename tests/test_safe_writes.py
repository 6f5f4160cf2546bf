"""Output files are replaced only by complete files, never written through links or onto devices (issue 17)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from remat_models.errors import OutputError
from remat_models.io import linear_chain, write_graph, write_json_atomic
from remat_models.io.atomic import check_output, write_atomic


def _only(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def test_a_symbolic_link_is_refused_and_left_pointing_where_it_did(tmp_path: Path) -> None:
    real = tmp_path / "real.json"
    real.write_text("keep")
    link = tmp_path / "link.json"
    link.symlink_to(real)
    with pytest.raises(OutputError, match=r"link\.json: a symbolic link, not a regular file"):
        write_json_atomic(link, {"a": 1})
    assert link.is_symlink() and real.read_text() == "keep"
    assert _only(tmp_path) == ["link.json", "real.json"]


def test_a_device_is_refused() -> None:
    with pytest.raises(OutputError, match="/dev/null: a device"):
        write_json_atomic("/dev/null", [1])
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_missing_folder_a_file_as_folder_and_a_read_only_place_fail_before_any_work(tmp_path: Path) -> None:
    with pytest.raises(OutputError, match="does not exist"):
        check_output(tmp_path / "absent" / "plan.json")
    (tmp_path / "file").write_text("")
    with pytest.raises(OutputError, match="is not a folder"):
        check_output(tmp_path / "file" / "plan.json")
    if os.geteuid() == 0:  # root writes through permission bits: use a read-only file system instead
        if not Path("/sys").is_dir():
            pytest.skip("no read-only /sys here to stand for a read-only place")
        read_only = Path("/sys") / "plan.json"
    else:
        (tmp_path / "ro").mkdir(mode=0o555)
        read_only = tmp_path / "ro" / "plan.json"
    with pytest.raises(OutputError, match="cannot write in"):
        check_output(read_only)
    assert check_output(tmp_path / "fine.json") == tmp_path / "fine.json"
    assert _only(tmp_path) == ["file"] + (["ro"] if os.geteuid() else [])


def test_a_writer_that_leaves_a_short_file_does_not_replace_the_target(tmp_path: Path) -> None:
    target = tmp_path / "model.lp"
    target.write_text("old complete model\nend\n")

    def truncated(temp: Path) -> None:  # what a writer that ignores its I/O errors leaves behind
        temp.write_text("Minimize\n obj: x")

    def ends_with_end(temp: Path) -> None:
        if not temp.read_text().rstrip().endswith("end"):
            raise OutputError(f"{temp}: incomplete")

    with pytest.raises(OutputError, match="incomplete"):
        write_atomic(target, truncated, ends_with_end)
    with pytest.raises(OutputError, match="empty file"):
        write_atomic(target, lambda temp: None)
    assert target.read_text() == "old complete model\nend\n"
    assert _only(tmp_path) == ["model.lp"]


FULL_DISK = """
import resource, signal, sys
from remat_models.io import linear_chain, write_graph
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # writes past the limit fail with EFBIG, as on a full disk
resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))
write_graph(linear_chain(400), sys.argv[1])
"""


def test_a_full_disk_keeps_the_old_file_and_reports_one_typed_error(tmp_path: Path) -> None:
    target = tmp_path / "graph.json"
    write_graph(linear_chain(2), target)
    before = target.read_bytes()
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(FULL_DISK), str(target)], capture_output=True, text=True, check=False
    )
    assert done.returncode != 0
    assert "OutputError" in done.stderr and "write failed, kept the old file: File too large" in done.stderr
    assert target.read_bytes() == before
    assert _only(tmp_path) == ["graph.json"]


EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "graphs" / "unet_train.json"
FULL_DISK_EXPORT = """
import resource, signal, sys
from remat_models.cli.app import main
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (16384, 16384))  # HiGHS's writer ignores the EFBIG it then gets
sys.argv = ["remat", "export", sys.argv[1], "--budget", "80%", "-o", sys.argv[2]]
main()
"""


@pytest.mark.parametrize("suffix", [".lp", ".mps"])
def test_export_on_a_full_disk_keeps_the_old_model_file(tmp_path: Path, suffix: str) -> None:
    target = tmp_path / f"model{suffix}"
    target.write_text("the previous complete model\n")
    command = [sys.executable, "-c", FULL_DISK_EXPORT, str(EXAMPLE), str(target)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    assert done.returncode == 1, done.stderr
    assert "error:" in done.stderr and "kept the old file" in done.stderr and "Traceback" not in done.stderr
    assert target.read_text() == "the previous complete model\n"
    assert _only(tmp_path) == [target.name]


def test_export_refuses_a_symbolic_link_and_writes_complete_files(tmp_path: Path) -> None:
    from remat_models.backends.export import check_highs_file, export
    from remat_models.core.budget import parse_budget
    from remat_models.formulations import get_formulation
    from remat_models.io import read_graph

    graph = read_graph(EXAMPLE)
    model = get_formulation("checkmate").build(graph, parse_budget("80%", graph), {}).model
    real = tmp_path / "real.lp"
    real.write_text("keep")
    (tmp_path / "link.lp").symlink_to(real)
    with pytest.raises(OutputError, match="a symbolic link"):
        export(model, tmp_path / "link.lp")
    assert real.read_text() == "keep"
    for suffix in (".lp", ".mps"):
        written = export(model, tmp_path / f"m{suffix}")
        check_highs_file(written)  # complete: ends with HiGHS's last line
        text = written.read_text()
        (tmp_path / f"cut{suffix}").write_text(text[: len(text) // 2])
        with pytest.raises(OutputError, match="incomplete"):
            check_highs_file(tmp_path / f"cut{suffix}")
