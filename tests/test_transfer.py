import json

import numpy as np
import pytest
from offload_cases import C2_TRANSFER, C3_TRANSFER, c1_graph, c1_transfer

from remat_models import ConfigurationError, InvalidScheduleError
from remat_models.core.schedule import (
    Compute,
    Free,
    FreeHost,
    Offload,
    Prefetch,
    Schedule,
    TransferModel,
    eager_frees,
    simulate,
)
from remat_models.io.schedule_json import schedule_from_dict, schedule_to_dict

A, B, C, D = range(4)
# C1's paging schedule: offload a after b, prefetch it before d
PAGED = [Compute(A), Compute(B), Offload(A), Free(A), Compute(C), Free(B), Prefetch(A), Compute(D), Free(A), Free(C)]


def test_serial_paging_schedule_of_c1_costs_17_at_peak_9() -> None:
    result = simulate(c1_graph(), PAGED, c1_transfer())
    assert result.peak == 9 and result.peak_step == 7
    assert result.total_cost == 17 and result.transfer_cost == 4
    assert (result.offloads, result.prefetches, result.host_peak) == (1, 1, 4)
    assert result.timeline.tolist() == [4, 8, 8, 4, 8, 4, 8, 9, 5, 1]
    assert result.tdi == pytest.approx(100 * 4 / 13)  # relative to the compute-only base


def test_recompute_only_c1_costs_23_and_transfers_too_slow_or_no_host_room() -> None:
    recompute = eager_frees(c1_graph(), [A, B, C, A, D])
    result = simulate(c1_graph(), recompute, c1_transfer())
    assert (result.peak, result.total_cost, result.transfer_cost, result.makespan) == (9, 23, 0, 23)
    assert simulate(c1_graph(), PAGED, C2_TRANSFER).total_cost == 13 + 16  # C2: paging is worse than 23
    with pytest.raises(InvalidScheduleError, match="step 2: offloading 'a' needs 4 host bytes, over the host"):
        simulate(c1_graph(), PAGED, C3_TRANSFER)


def test_latency_adds_per_transfer() -> None:
    model = TransferModel(out_latency=0.5, out_bw=2, in_latency=0.25, in_bw=4)
    assert simulate(c1_graph(), PAGED, model).transfer_cost == pytest.approx(0.5 + 2 + 0.25 + 1)


@pytest.mark.parametrize(
    ("steps", "message"),
    [
        ([Offload(A)], "step 0: offloads 'a', which is not resident on the device"),
        ([Compute(A), Prefetch(A)], "step 1: prefetches 'a', which has no host copy"),
        ([Compute(A), Offload(A), Prefetch(A)], "step 2: prefetches 'a', which is already resident"),
        ([Compute(A), Offload(A), Offload(A)], "step 2: offloads 'a', which already has a host copy"),
        ([Compute(A), FreeHost(A)], "step 1: frees the host copy of 'a', which has none"),
        ([Compute(A), Offload(A), Free(A), FreeHost(A), Prefetch(A)], "step 4: prefetches 'a', which has no host"),
    ],
)
def test_spec_c5_invalid_transfers_name_the_step(steps, message) -> None:
    with pytest.raises(InvalidScheduleError, match=message) as caught:
        simulate(c1_graph(), steps, c1_transfer())
    assert caught.value.step == int(message.split(":")[0].split()[1])


def test_transfer_steps_need_a_model() -> None:
    with pytest.raises(InvalidScheduleError, match=r"step 2: Offload\('a'\) without a transfer model"):
        simulate(c1_graph(), PAGED)


def test_free_host_releases_host_bytes_for_the_capacity() -> None:
    steps = [Compute(A), Offload(A), FreeHost(A), Offload(A), Compute(B), Compute(C), Compute(D)]
    result = simulate(c1_graph(), steps, c1_transfer(host_capacity=4))
    assert result.host_peak == 4 and result.offloads == 2


def test_eager_frees_places_frees_around_transfers() -> None:
    schedule = eager_frees(c1_graph(), [A, B, Offload(A), C, Prefetch(A), D])
    assert schedule.steps == tuple(PAGED)


def test_overlap_mode_hides_transfers_behind_compute() -> None:
    graph = c1_graph()
    # in overlap, the offload (2) runs while b computes, the prefetch (2) while c computes: makespan 13
    schedule = eager_frees(graph, [A, Offload(A), B, C, Prefetch(A), D])
    serial = simulate(graph, schedule, c1_transfer())
    overlap = simulate(graph, schedule, c1_transfer(mode="overlap"))
    assert serial.total_cost == 17 and overlap.transfer_cost == 4
    # a 0..10; the offload runs 10..12 beside b (10..11); a's free after b waits for it until 12; c 12..13;
    # the prefetch runs 13..15 and d waits for it: 15..16
    assert overlap.makespan == overlap.total_cost == 16
    assert overlap.peak == serial.peak


def test_overlap_compute_waits_for_its_prefetch_and_streams_are_serial() -> None:
    graph = c1_graph()
    slow = TransferModel(out_bw=1, in_bw=1, mode="overlap")  # 4 per copy
    result = simulate(graph, PAGED, slow)
    # a 0..10, b 10..11, offload a 11..15 (free a waits to 15), c 15..16, prefetch 16..20, d 20..21
    assert result.total_cost == 21 and result.transfer_cost == 8


def test_schedule_json_round_trips_transfer_ops() -> None:
    graph = c1_graph()
    schedule = Schedule.of([*PAGED[:-2], FreeHost(A), Free(A), Free(C)])
    data = json.loads(json.dumps(schedule_to_dict(schedule, graph)))
    assert all([op, "a"] in data["steps"] for op in ("offload", "prefetch", "free_host"))
    assert schedule_from_dict(data, graph) == schedule


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"out_bw": 0, "in_bw": 1}, "out_bw must be a positive"),
        ({"out_bw": 1, "in_bw": 1, "in_latency": -1}, "in_latency must be a finite number >= 0"),
        ({"out_bw": 1, "in_bw": 1, "mode": "parallel"}, "mode must be one of"),
    ],
)
def test_transfer_model_rejects_bad_values(options, message) -> None:
    with pytest.raises(ConfigurationError, match=message):
        TransferModel(**options)


def test_transfer_model_from_cli_options() -> None:
    model = TransferModel.from_options({"bw": "12e9", "in_bw": "6e9", "latency": "1e-5", "host": "64GiB"})
    assert model == TransferModel(out_latency=1e-5, out_bw=12e9, in_latency=1e-5, in_bw=6e9, host_capacity=64 << 30)
    assert model.in_time(6e9) == pytest.approx(1 + 1e-5)
    with pytest.raises(ConfigurationError, match="need a bandwidth"):
        TransferModel.from_options({"latency": 1})
    with pytest.raises(ConfigurationError, match="unknown transfer option 'speed'"):
        TransferModel.from_options({"bw": 1, "speed": 2})


def test_timeline_is_read_only_with_transfers() -> None:
    result = simulate(c1_graph(), PAGED, c1_transfer())
    assert isinstance(result.timeline, np.ndarray) and not result.timeline.flags.writeable


def test_page_idle_values_pages_the_long_gap_of_c1() -> None:
    from remat_models.heuristics.idle_offload import page_idle_values

    graph = c1_graph()
    schedule = page_idle_values(graph, [A, B, C, D], min_gap=1)
    assert schedule == eager_frees(graph, [A, Offload(A), B, C, Prefetch(A), D])
    assert simulate(graph, schedule, c1_transfer()).peak == 9
    assert page_idle_values(graph, [A, B, C, D], min_gap=2) == eager_frees(graph, [A, B, C, D])
    assert page_idle_values(graph, [A, B, C, D], min_bytes=5) == eager_frees(graph, [A, B, C, D])


def test_cli_simulate_takes_transfer_options(tmp_path) -> None:
    from typer.testing import CliRunner

    from remat_models.cli.app import app
    from remat_models.io import write_graph, write_schedule

    graph = c1_graph()
    write_graph(graph, tmp_path / "c1.json")
    write_schedule(tmp_path / "plan.json", Schedule.of(PAGED), graph)
    args = ["simulate", str(tmp_path / "c1.json"), str(tmp_path / "plan.json"), "--budget", "9"]
    run = CliRunner().invoke(app, [*args, "--transfer", "bw=2,host=4"], env={"COLUMNS": "200"})
    assert run.exit_code == 0, run.output
    assert "17" in run.output and "1 offloads, 1 prefetches" in run.output and "host peak" in run.output
    run = CliRunner().invoke(app, [*args, "--transfer", "bw=2,host=3"])
    assert isinstance(run.exception, InvalidScheduleError) and "over the host capacity 3" in str(run.exception)
    run = CliRunner().invoke(app, args)
    assert isinstance(run.exception, InvalidScheduleError) and "without a transfer model" in str(run.exception)
    run = CliRunner().invoke(app, [*args, "--transfer", "fast"])
    assert isinstance(run.exception, ConfigurationError) and "key=value, got 'fast'" in str(run.exception)
