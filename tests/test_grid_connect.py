"""``sweep --scheduler``'s connection (engine/grid.py ``_connect``) closes the Client it made on every failure path.

distributed's ``Client`` constructor starts its IO loop and sets itself as the default client before it connects; one
that raised against a peer that is no scheduler was left half-built (status ``connecting``, its loop thread running)
until the garbage collector ran its ``__del__`` in whatever thread, which deadlocked a later in-process
``LocalCluster`` start (round 30)."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import pytest

from scalemodel.engine import grid

#: A process that runs _connect at a local peer answering HTTP (distributed reads it as a frame of 3.5e18 bytes and
#: raises), the garbage collector off so nothing closes a left Client behind the test's back, then prints the state
#: of every Client object alive, the threads, and distributed's default clients.
_PEER = """
import gc, socket, threading
gc.disable()
import distributed
from scalemodel.engine import grid
server = socket.socket(); server.bind(("127.0.0.1", 0)); server.listen(4)
def answer():
    while True:
        try:
            conn, _ = server.accept()
        except OSError:
            return
        conn.sendall(b"HTTP/1.1 400 Bad Request\\r\\nContent-Length: 0\\r\\n\\r\\n"); conn.close()
threading.Thread(target=answer, daemon=True, name="peer").start()
try:
    grid._connect(distributed, f"tcp://127.0.0.1:{server.getsockname()[1]}")
    print("connected")
except Exception as exc:
    print("raised", type(exc).__name__)
print("clients", sorted(c.status for c in gc.get_objects() if isinstance(c, distributed.Client)))
print("threads", sorted(t.name for t in threading.enumerate()))
print("defaults", len(distributed.client._global_clients))
"""


def test_a_client_that_fails_to_connect_is_closed_before_connect_returns() -> None:
    pytest.importorskip("distributed")
    root = Path(__file__).resolve().parents[1]
    r = subprocess.run([sys.executable, "-c", _PEER], capture_output=True, text=True, cwd=root, timeout=120,
                       env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"})
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "raised MemoryError"
    # before: clients ['connecting'], the 'IO loop' thread alive and the half-built Client the default
    assert lines[1:] == ["clients ['closed']", "threads ['MainThread', 'peer']", "defaults 0"]


class _Fake:
    """distributed's module as _connect uses it: a Client whose constructor waits for ``release`` then raises
    (``fail``) or returns, and records its close."""

    def __init__(self, fail: bool) -> None:
        self.release, self.closed = threading.Event(), threading.Event()
        fake = self

        class Client:
            def __init__(self, address: str, timeout: str) -> None:
                fake.release.wait(30)
                if fail:
                    raise OSError("refused")

            def close(self) -> None:
                fake.closed.set()

        self.Client = Client


def test_a_constructor_that_raises_is_closed_and_its_error_raised() -> None:
    fake = _Fake(fail=True)
    fake.release.set()
    with pytest.raises(OSError, match="refused"):
        grid._connect(fake, "tcp://192.0.2.1:8786")
    assert fake.closed.is_set()  # before: never closed


def test_a_client_built_after_the_give_up_is_closed_by_the_connect_thread(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(grid, "CONNECT_TIMEOUT_S", 0)
    monkeypatch.setattr(grid, "HANDSHAKE_GRACE_S", 0.1)
    fake = _Fake(fail=False)
    with pytest.raises(TimeoutError):
        grid._connect(fake, "tcp://192.0.2.1:8786")
    assert not fake.closed.is_set()
    fake.release.set()  # the handshake answers late: the Client is built, and nobody holds it
    assert fake.closed.wait(10)  # before: left open


def test_a_client_that_connects_is_returned_open() -> None:
    fake = _Fake(fail=False)
    fake.release.set()
    client = grid._connect(fake, "tcp://192.0.2.1:8786")
    assert isinstance(client, fake.Client) and not fake.closed.is_set()
