"""``gsjax`` for ``tests/test_distributed.py``, with two ways to misbehave on purpose.

``python tests/distributed_driver.py [--die-at-chunk K] [--code-version V] [--slow-save-at R]
ARGS...`` runs ``gsjax ARGS...`` (:func:`gsjax.__main__.main`) in this process, except that

* ``--die-at-chunk K``: the process kills itself (SIGKILL, no clean-up) when chunk K of the run
  begins to gather its results (after DIE_DELAY seconds, so that the others have chunk K-1's
  gathers), i.e. after chunk K-1's checkpoint and before the others can finish chunk K: a
  process lost mid-run, at a moment the test knows;
* ``--code-version V``: the process reports code version V at start-up, as a process running
  another gsjax would;
* ``--slow-save-at R``: the checkpoint of round R takes :data:`SLOW_SAVE` seconds to write (a
  slow disk), longer than the test's heartbeat: a peer lost meanwhile must not cut it off.
"""

from __future__ import annotations

import os
import signal
import sys
import time

from gsjax import __main__ as gsjax_main
from gsjax import checkpoint, distributed

SLOW_SAVE = 20.0  # seconds; twice tests/test_distributed.py's heartbeat
DIE_DELAY = 5.0  # seconds between chunk K's first gather and the kill


def main(argv: list[str]) -> int:
    die_at = code = slow_at = None
    while argv and argv[0] in ("--die-at-chunk", "--code-version", "--slow-save-at"):
        flag, value, argv = argv[0], argv[1], argv[2:]
        if flag == "--die-at-chunk":
            die_at = int(value)
        elif flag == "--slow-save-at":
            slow_at = int(value)
        else:
            code = value
    if slow_at is not None:
        save = checkpoint.save

        def slow_save(*args, **kwargs):
            if args[6] == slow_at:  # rounds_done
                time.sleep(SLOW_SAVE)
            return save(*args, **kwargs)

        checkpoint.save = slow_save
    if code is not None:
        distributed.code_version = lambda: code
    if die_at is not None:
        real, calls = distributed.host, [0]
        per_chunk = 3  # drive gathers the non-finite check, the records and the carry

        def host(tree):
            if calls[0] == per_chunk * (die_at - 1):
                # a gather returns on one process before the other has its data: let the
                # others finish chunk K-1's gathers (and submit its checkpoint) first
                time.sleep(DIE_DELAY)
                os.kill(os.getpid(), signal.SIGKILL)
            calls[0] += 1
            return real(tree)

        distributed.host = host
    return gsjax_main.main(argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
