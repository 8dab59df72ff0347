"""The load benchmark's arithmetic: CPU ticks read from /proc, and a configuration's medians."""

from __future__ import annotations

from bench.load import Run, busy_and_total_ticks, cpu_ticks_of, median_run


def run(*, req: int, p99: float, grown: int, client: float) -> Run:
    return Run(
        replicas=1,
        workers=2,
        seconds=10.0,
        requests={"POST /assemble": req},
        p50_ms={"POST /assemble": p99 / 2},
        p99_ms={"POST /assemble": p99},
        errors=0,
        sessions=40,
        items=1_000,
        grown_bytes={"database": grown, "facts": grown // 2},
        rows={"facts": grown // 10},
        peak_rss_mib=400.0,
        cpu_cores={"client": client, "server": 1.0, "postgres": 0.1, "machine": 1.9},
        peak_backends=20,
    )


def test_cpu_ticks_of_adds_user_and_system_time_after_a_command_name_with_spaces() -> None:
    stat = "4242 (python -m app) S 1 4242 4242 0 -1 4194304 100 0 0 0 700 55 3 4 20 0 40 0"
    assert cpu_ticks_of(stat) == 755


def test_busy_ticks_leave_out_idle_and_iowait() -> None:
    proc_stat = "cpu  100 5 40 900 10 0 3 0 0 0\ncpu0 50 2 20 450 5 0 1 0 0 0\n"
    assert busy_and_total_ticks(proc_stat) == (148, 1058)


def test_median_run_takes_each_figure_from_the_middle_run_of_its_own() -> None:
    runs = [
        run(req=300, p99=200.0, grown=9_000, client=0.3),
        run(req=100, p99=900.0, grown=3_000, client=0.2),
        run(req=200, p99=100.0, grown=6_000, client=0.9),
    ]
    assert median_run(runs) == run(req=200, p99=200.0, grown=6_000, client=0.3)


def test_sizes_per_thousand_sessions_scale_the_growth() -> None:
    assert run(req=1, p99=1.0, grown=4_000, client=0.1).per_thousand(40) == {
        "database": 100_000.0,
        "facts": 50_000.0,
    }
