"""A page process: the other end of crawler/page/workers.py, running one call at a time.

Its worker starts it as ``python -c`` with the worker's ``sys.path`` and sends it calls on
its standard input; it answers on its standard output, which it first moves aside
(standard output then goes to standard error, so that a library's print cannot corrupt an
answer). A message is a pickle (protocol 5) and the buffers it left out of band, each
preceded by its length (8 bytes, big-endian; the pickle's header also counts the buffers):
a call is ``(fn, args)``, an answer ``(True, result)`` or ``(False, exception)``. A page's
body goes as such a buffer, written to the pipe from the worker's own bytes and read here
into the bytes the call gets: no copy of it is made on either side to pickle it (a 10 MB
page was two copies more, one in each process). At the end of its input (the worker
closed it, or died) the process exits.

It ignores SIGINT and SIGTERM (a terminal's Ctrl-C and a service manager's stop reach the
whole process group: the worker stops its page processes itself, once the pages they read
are handled) and runs ``nice`` levels below its worker. It imports only what the calls
it receives need (crawler/page/reader.py: lxml, numpy, extruct, w3lib; no Scrapy, no
Twisted), and after each call hands the memory that call freed back to the system
(crawler/page/memory.py): one large page would otherwise hold the process at its size for the
rest of the crawl.
"""

from __future__ import annotations

import os
import pickle
import signal
import struct
import sys

from crawler.page.memory import configure, trim

HEADER = struct.Struct(">QI")  # the length of the pickle that follows, and how many buffers come after it
LENGTH = struct.Struct(">Q")  # the length of a buffer that follows


def main(nice: int = 0) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if nice > 0:
        os.nice(nice)
    configure()
    answers = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    calls = os.fdopen(0, "rb")
    while (call := read_message(calls)) is not None:
        try:
            fn, args = pickle.loads(call[0], buffers=call[1])
            del call
            answer = (True, fn(*args))
        except Exception as exc:
            answer = (False, exc)
        try:
            write_message(answers, _dumps(answer))
        except BrokenPipeError:  # the crawling process went away (it stopped, or never started): done,
            os._exit(0)  # without flushing at exit what can no longer be written
        del answer
        trim()


def warm_up() -> None:
    """A new process's first call: import what reading a page needs, before the first page
    (extruct too, which the page reader imports at the first page with structured data)."""
    import extruct  # noqa: F401

    import crawler.page.reader  # noqa: F401


def read_message(stream) -> tuple[bytes, list[bytes]] | None:
    """The next message of ``stream``: (pickle, its out-of-band buffers); None at its end
    (also within a message: the writer died)."""
    header = stream.read(HEADER.size)
    if len(header) < HEADER.size:
        return None
    size, count = HEADER.unpack(header)
    data = stream.read(size)
    if len(data) != size:
        return None
    buffers = []
    for _ in range(count):
        length = stream.read(LENGTH.size)
        if len(length) < LENGTH.size:
            return None
        (size,) = LENGTH.unpack(length)
        buffer = stream.read(size)
        if len(buffer) != size:
            return None
        buffers.append(buffer)
    return data, buffers


def write_message(stream, data: bytes, buffers=()) -> None:
    """Write a pickle and the buffers it left out of band (``pickle.PickleBuffer``), each
    from where it lies."""
    stream.write(HEADER.pack(len(data), len(buffers)))
    stream.write(data)
    for buffer in buffers:
        with buffer.raw() as view:
            stream.write(LENGTH.pack(view.nbytes))
            stream.write(view)
    stream.flush()


def _dumps(answer: tuple) -> bytes:
    try:
        return pickle.dumps(answer, pickle.HIGHEST_PROTOCOL)
    except Exception as exc:  # a result or an exception that does not pickle
        what = "result" if answer[0] else f"exception {type(answer[1]).__name__}: {answer[1]}"
        return pickle.dumps((False, RuntimeError(f"page process: the {what} could not be sent back: {exc}")))
