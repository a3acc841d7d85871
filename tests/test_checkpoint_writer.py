"""The background checkpoint writer of ``experiment.run_sweeps``: in order, one at a time,
waited for at the end and on an error, and a failed write is raised, not lost."""

from __future__ import annotations

import threading
import time

import pytest

from gsjax.experiment import _Saver


def test_writes_run_in_order_one_at_a_time_and_are_waited_for():
    log, active, lock = [], [], threading.Lock()

    def write(i):
        with lock:
            active.append(i)
            assert len(active) == 1, active  # never two writes at once
        time.sleep(0.01)
        log.append(i)
        with lock:
            active.remove(i)

    with _Saver() as saver:
        for i in range(5):
            saver.submit(write, i)
    assert log == [0, 1, 2, 3, 4]  # every write done when the block ends, in order


def test_a_failed_write_is_raised_at_the_next_submit_or_at_the_end():
    def boom():
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        with _Saver() as saver:
            saver.submit(boom)
            saver.submit(lambda: None)  # waits for boom first
    with pytest.raises(OSError, match="disk full"):
        with _Saver() as saver:
            saver.submit(boom)


def test_an_error_in_the_run_still_waits_for_the_pending_write():
    done = []
    with pytest.raises(ValueError, match="non-finite"):
        with _Saver() as saver:
            saver.submit(lambda: (time.sleep(0.05), done.append(1)))
            raise ValueError("non-finite feedback")
    assert done == [1]
