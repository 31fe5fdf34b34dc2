"""The allocator tuning (gpu_advisor.allocator): which mallopt calls it makes, and that it
degrades to the allocator's defaults where there is no glibc mallopt."""

from __future__ import annotations

from typing import Any

from gpu_advisor.allocator import keep_heap


class FakeLibc:
    """Records mallopt(parameter, value) calls; answers ``result`` (glibc: 1 ok, 0 error)."""

    def __init__(self, result: int = 1) -> None:
        self.calls: list[tuple[int, int]] = []
        self.result = result

    def mallopt(self, parameter: int, value: int) -> int:
        self.calls.append((parameter, value))
        return self.result


def test_sets_the_mmap_then_the_trim_threshold() -> None:
    libc = FakeLibc()
    assert keep_heap(libc) is True
    # glibc malloc.h: M_MMAP_THRESHOLD is -3, M_TRIM_THRESHOLD is -1; 32 MiB and 128 MiB
    assert libc.calls == [(-3, 32 * 1024 * 1024), (-1, 128 * 1024 * 1024)]


def test_a_refused_value_reports_false() -> None:
    assert keep_heap(FakeLibc(result=0)) is False


def test_a_c_library_without_mallopt_keeps_its_defaults() -> None:
    no_mallopt: Any = object()
    assert keep_heap(no_mallopt) is False
