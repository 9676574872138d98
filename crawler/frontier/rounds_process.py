"""A pusher's spill rounds in a process of their own (``PusherRounds``, spill.py), so that
writing the inbox out (grouping a slice by host, packing chunks, the spill store's writes)
does not share the pusher's interpreter lock with its pushes (decision 0062).

``RoundsProcess.start(remake)`` spawns the process (``spawn``: safe beside threads and a
reactor), which makes the crawl's spill again with ``remake()`` (a picklable callable: a
Spill on a frontier of its own, on the same Redis and the same spill store) and then runs
``round(loads=False)`` at each ``round()``; ``ready()`` says whether it has made its spill.
A round's reply is a ``Reply`` (``done``, ``result``, ``exception``, as a Future's): the
round's (URLs written, 0), or its error raised. The process ignores SIGINT (its pusher
stops it: ``stop``) and ends when its pusher's end of the pipe closes (the pusher died).
A process that could not start, could not make its spill or ended is said once in the log
(``alive`` False): its pusher's rounds go on in a thread, and a round it had claimed is
written by the next claim once the claim expires (CLAIM_MS), as a dead worker's.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import signal

logger = logging.getLogger(__name__)

STOP_WAIT = 30.0  # seconds a process stopped is waited for before it is killed


def _serve(conn, remake) -> None:
    """The process: make the spill, say so, then a round for each request until 'stop' (or
    its pusher's end of the pipe closes)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # (its pusher stops it)
    try:
        spill = remake()
        if spill is None:
            raise ValueError("the settings make no spill (FRONTIER_HOST_WINDOW=0)")
    except Exception as exc:
        with contextlib.suppress(OSError):
            _reply(conn, "error", exc)
        return
    try:
        conn.send(("ready", spill.where()))
        while conn.recv() == "round":
            try:
                reply = ("ok", spill.round(loads=False))
            except Exception as exc:
                reply = ("error", exc)
            _reply(conn, *reply)
    except (EOFError, OSError):  # (the pusher is gone)
        pass
    finally:
        spill.close()  # (its store's connection, this thread's, with it)


def _reply(conn, kind: str, value) -> None:
    try:
        conn.send((kind, value))
    except Exception:  # (an error that does not pickle: its type and text)
        conn.send((kind, RuntimeError(f"{type(value).__name__}: {value}")))


class Reply:
    """The reply to one round sent to the process, read as a Future is."""

    def __init__(self, process: RoundsProcess):
        self.process = process
        self._value = None
        self._error: BaseException | None = None
        self._read = False

    def done(self) -> bool:
        return self._read or not self.process.alive or self.process.conn.poll()

    def result(self):
        self._wait()
        if self._error is not None:
            raise self._error
        return self._value

    def exception(self) -> BaseException | None:
        self._wait()
        return self._error

    def _wait(self) -> None:
        if self._read:
            return
        self._read = True
        reply = self.process.receive()
        if reply is None:  # (the process ended: the round's claim expires, as a dead worker's)
            self._value = (0, 0)
        elif reply[0] == "ok":
            self._value = reply[1]
        else:
            self._error = reply[1]


class RoundsProcess:
    """A process that runs a pusher's spill rounds (see the module docstring)."""

    def __init__(self, conn, process, where: tuple):
        self.conn, self.process, self.where = conn, process, where
        self.alive = True
        self._ready = False

    @property
    def pid(self) -> int | None:
        """The process's id (for the log)."""
        return self.process.pid

    @classmethod
    def start(cls, remake, where: tuple) -> RoundsProcess | None:
        """The process started, or None (said in the log) when it cannot be. ``where``: the
        pusher's spill's ``where()``, which the spill made again must match (else the
        process is stopped, said in the log: its rounds would write another crawl's inbox)."""
        context = multiprocessing.get_context("spawn")
        ours, theirs = context.Pipe()
        process = context.Process(target=_serve, args=(theirs, remake), name="spill-rounds", daemon=True)
        try:
            process.start()
        except Exception as exc:
            ours.close()
            logger.warning("The spill's rounds could not start a process of their own (%s): they run in a thread", exc)
            return None
        finally:
            theirs.close()
        return cls(ours, process, where)

    def ready(self) -> bool:
        """Whether the process made its spill and waits for rounds (False while it starts,
        and once it has ended)."""
        if self._ready or not self.alive:
            return self._ready and self.alive
        if not self.conn.poll():
            return False
        reply = self.receive()
        if reply is None:
            return False
        if reply[0] == "ready" and reply[1] == self.where:
            self._ready = True
            return True
        if reply[0] == "ready":
            self._ended(f"made its spill on other servers or keys ({reply[1]} against {self.where})")
            self.stop()
        else:
            self._ended(f"could not make its spill: {type(reply[1]).__name__}: {reply[1]}")
        return False

    def round(self) -> Reply:
        """A round sent to the process (ready): its reply."""
        try:
            self.conn.send("round")
        except OSError:
            self._ended("ended")
        return Reply(self)

    def receive(self):
        """The process's next message, or None once it has ended (said in the log)."""
        if not self.alive:
            return None
        try:
            return self.conn.recv()
        except (EOFError, OSError):
            self.process.join(timeout=STOP_WAIT)
            self._ended(f"ended (exit code {self.process.exitcode})")
            return None

    def _ended(self, why: str) -> None:
        if self.alive:
            self.alive = False
            logger.warning("The spill's rounds process %s: the rounds go on in a thread", why)
        self.conn.close()

    def stop(self) -> None:
        """Ask the process to end once its round is done, and wait for it (killed after
        STOP_WAIT seconds)."""
        if self.alive:
            self.alive = False
            try:
                self.conn.send("stop")
            except OSError:
                pass
            self.conn.close()
        self.process.join(timeout=STOP_WAIT)
        if self.process.is_alive():
            self.process.kill()
            self.process.join()
