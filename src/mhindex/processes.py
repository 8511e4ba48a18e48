"""Child processes that do not outlive the command that started them.

A build's helpers (conversion workers, Anserini's indexing JVM) are killed with their parent: on
Ctrl-C or SIGTERM the parent stops them itself (the CLI turns SIGTERM into the same unwinding as
Ctrl-C); on SIGKILL, which the parent cannot see, the kernel does it, through Linux's
parent-death signal, set in each child before it does any work.
"""

from __future__ import annotations

import ctypes
import os
import signal
from collections.abc import Callable

_PR_SET_PDEATHSIG = 1


def die_with_parent(parent: int) -> None:
    """In a child: be killed when the process `parent` ends. If it already ended (between the fork
    and this call), end now. A no-op where Linux's prctl is not there."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:
        os._exit(1)


def child_of_this_process() -> Callable[[], None]:
    """A `preexec_fn` for subprocess: the child is killed when this process ends."""
    parent = os.getpid()
    return lambda: die_with_parent(parent)
