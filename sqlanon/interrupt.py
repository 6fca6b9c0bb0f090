"""One behaviour for an interrupt (Ctrl-C, SIGINT) or a polite kill (SIGTERM).

Without this, an interrupt landing inside a database driver surfaced in three ways: DuckDB turned it
into its own ``InterruptException`` (reported as a failed query, exit 2), PostgreSQL's driver into a
``KeyboardInterrupt`` (exit 1 with a traceback), and one swallowed by a best-effort ``except
Exception`` let the run go on and publish (exit 0). Here the signal is *recorded* before anything
else sees it, so every layer can ask :func:`received` and turn whatever the driver raised back into
:class:`Interrupted`; the commit of the publishing swap runs inside :func:`deferred`, so an interrupt
there is handled after the commit returns (the swap is then complete, never half-done).

The documented outcome (README, *Publishing*): an interrupt before the swap commits leaves nothing
behind (the transaction is rolled back) and exits with 128 + the signal number (130 for SIGINT,
143 for SIGTERM) after one line on stderr; an interrupt after the commit says that the release is
in place, with the same exit status.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType


class Interrupted(KeyboardInterrupt):
    """Raised in place of whatever an interrupted driver call raised; carries the signal number."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


_state: dict[str, object] = {"signum": None, "deferring": 0, "published": None}


def _handler(signum: int, frame: FrameType | None) -> None:  # noqa: ARG001 - signal API
    if _state["signum"] is None:
        _state["signum"] = signum
    if not _state["deferring"]:
        raise Interrupted(signum)


def install() -> None:
    """Route SIGINT and SIGTERM through :func:`_handler` (main thread only; a no-op elsewhere)."""
    if threading.current_thread() is not threading.main_thread():
        return
    reset()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(ValueError, OSError):
            signal.signal(sig, _handler)


def reset() -> None:
    _state.update(signum=None, deferring=0, published=None)


def received() -> int | None:
    """The signal number if an interrupt arrived during this run, else None."""
    signum = _state["signum"]
    return int(signum) if isinstance(signum, int) else None


def check() -> None:
    """Raise :class:`Interrupted` if an interrupt arrived (it may have been swallowed by a driver)."""
    signum = received()
    if signum is not None:
        raise Interrupted(signum)


@contextlib.contextmanager
def deferred() -> Iterator[None]:
    """Hold interrupts while the block runs (the commit of the swap): never half a publish."""
    _state["deferring"] = int(_state["deferring"]) + 1  # type: ignore[call-overload]
    try:
        yield
    finally:
        _state["deferring"] = int(_state["deferring"]) - 1  # type: ignore[call-overload]


def mark_published(target: str) -> None:
    """Record that the swap committed, so that a later interrupt reports the truth."""
    _state["published"] = target


def published() -> str | None:
    value = _state["published"]
    return value if isinstance(value, str) else None
