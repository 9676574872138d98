"""Seed URLs sorted by host on disk, for seed inputs larger than a block (SEED_GROUP_URLS).

With windows, a push does a host's work once a batch, and a host's URLs that arrive one at
a time go to disk one small chunk at a time (decision 0055). A block held in memory groups
a host's URLs only if they come within that block; over a file with more hosts than a block
holds a few times over, most hosts get one or two URLs a block. ``HostSpool`` holds every URL
read on disk instead, in parts by a hash of its host (``host[:port]``, as the URL's
authority is written), each part about a block, read back whole and grouped by host in
memory: once the input is read, ``batches()`` gives each part's URLs host by host, each
host's in the order read.

- Parts: ``parts`` files (at most MAX_PARTS open at once), a line a URL:
  ``host TAB priority TAB source TAB lineno TAB url``, the source as its index among the
  sources met.
- A part that came out larger than twice the block (the input's size misjudged: standard
  input) is split again by another hash, once; a part still that large (a few hosts hold
  most of the input) is read two blocks at a time, each grouped by host: at most twice the
  block is held in memory.
- Another spool of as many parts (the second half of a file read by another process:
  crawler/seeds/split_read.py) hands its files over (``written``) to be adopted (``adopt``): each
  part's files are read back in turn, its own first.
- The files are in a temporary directory under ``directory`` (SEED_SPOOL_DIR; None: the
  system's, TMPDIR), removed by ``close()`` (and if the spool cannot be made); they take
  about one and a half times the input's plain text (a part split again, twice that part for
  a while). Writing or reading them raises ``SpoolError`` saying where.
"""

from __future__ import annotations

import contextlib
import math
import os
import shutil
import tempfile
import zlib
from collections.abc import Iterable, Iterator

from crawler.seeds.files import SeedFileError, SeedLine

MAX_PARTS = 64  # files open at once (a part larger than twice the block is split again)
SPLITS = 1  # times a part is split again at most


class SpoolError(SeedFileError):
    """The seeds held on disk could not be written or read (disk full, no such directory).
    ``ingest`` pushes nothing of the spool then: the same command again, with room, adds it."""

    def __init__(self, where: str, reason: object):
        text = f"cannot hold seeds on disk in {where} (SEED_SPOOL_DIR): {reason}"
        OSError.__init__(self, text + "; the seeds not pushed yet are not: the same command again adds them")
        self.path, self.reason, self.report = where, str(reason), None


def batches_of(groups: Iterable[list], size: int) -> Iterator[list]:
    """The items of ``groups`` (lists: a host's URLs each), in order, in batches of ``size``
    (the last one shorter)."""
    batch: list = []
    for group in groups:
        batch += group
        if len(batch) >= size:
            full = len(batch) - len(batch) % size
            yield from (batch[i : i + size] for i in range(0, full, size))
            batch = batch[full:]
    if batch:
        yield batch


def parts_for(urls: float, block: int) -> int:
    """Parts for about ``urls`` URLs, each read back whole: a block's worth each."""
    return max(2, min(MAX_PARTS, math.ceil(urls / max(block, 1))))


class HostSpool:
    """Seed URLs held on disk in parts by host (see the module docstring)."""

    def __init__(self, parts: int, block: int, directory: str | None = None):
        self.block = block
        self.spooled = 0  # URLs written
        self._sources: dict[str, int] = {}  # each source met, its index (in the order met)
        try:
            self.where = tempfile.mkdtemp(prefix="seed-spool-", dir=directory or None)
        except OSError as exc:
            raise SpoolError(directory or tempfile.gettempdir(), exc) from exc
        self.files = 0  # files made so far (their names: 1, 2, ...)
        self._after: list[list[str]] = [[] for _ in range(parts)]  # each part's adopted files (adopt)
        try:
            self._parts = self._open(parts)
        except SpoolError:
            shutil.rmtree(self.where, ignore_errors=True)
            raise

    def _open(self, parts: int) -> list:
        """``parts`` new files, each as [file, path, URLs written]."""
        files = []
        try:
            for _ in range(parts):
                self.files += 1
                path = os.path.join(self.where, str(self.files))
                files.append([open(path, "w", encoding="utf-8", newline="\n"), path, 0])  # noqa: SIM115
        except OSError as exc:
            for f, _, _ in files:
                f.close()
            raise SpoolError(self.where, exc) from exc
        return files

    def add(self, url: str, line: SeedLine) -> None:
        """Hold ``url`` (normalized) read from ``line``."""
        source = self._sources.get(line.source)
        if source is None:
            source = self._sources[line.source] = len(self._sources)
        host = url.split("/", 3)[2]
        part = self._parts[zlib.crc32(host.encode()) % len(self._parts)]
        try:
            part[0].write(f"{host}\t{line.priority}\t{source}\t{line.lineno}\t{url}\n")
        except OSError as exc:
            raise SpoolError(self.where, exc) from exc
        part[2] += 1
        self.spooled += 1

    @property
    def parts(self) -> int:
        """The parts the URLs are held in (by a hash of their host)."""
        return len(self._after)

    def written(self) -> list[tuple[str, int]]:
        """Each part's file and its URLs, in the order of the parts, the files closed and
        kept: for another spool of as many parts to ``adopt`` (this one holds nothing
        more)."""
        parts, self._parts = self._parts, []
        self._close(parts)
        return [(path, count) for _, path, count in parts]

    def adopt(self, parts: list[tuple[str, int]]) -> None:
        """Hold the parts another spool has ``written()`` (as many parts, the same sources,
        its URLs read after this one's): each read back after this spool's part of the same
        number, so that each host's URLs still come in the order read."""
        if len(parts) != len(self._parts):
            raise ValueError(f"{len(parts)} parts adopted into a spool of {len(self._parts)}")
        for own, after, (path, count) in zip(self._parts, self._after, parts):
            after.append(path)
            own[2] += count
            self.spooled += count

    def batches(self, size: int) -> Iterator[list[tuple[str, SeedLine]]]:
        """Every URL held, in batches of ``size`` (url, line): part by part, each part's host
        by host, each host's in the order read."""
        parts, self._parts = self._parts, []
        self._close(parts)
        files = ([path, *after] for (_, path, _), after in zip(parts, self._after))
        groups = (urls for paths, (_, _, count) in zip(files, parts) for urls in self._part(paths, count, 0))
        yield from batches_of(groups, size)

    def _part(self, paths: list[str], count: int, splits: int) -> Iterator[list[tuple[str, SeedLine]]]:
        """A part's URLs (its files' in turn), a host's at a time (split again first if it
        is large)."""
        if count > 2 * self.block and splits < SPLITS:  # split again, by another hash
            parts = self._open(parts_for(count, self.block))
            salt = f"{splits + 1}:".encode()
            try:
                for path in paths:
                    with open(path, encoding="utf-8", newline="\n") as f:
                        for text in f:
                            host = text.split("\t", 1)[0]
                            part = parts[zlib.crc32(salt + host.encode()) % len(parts)]
                            part[0].write(text)
                            part[2] += 1
            except OSError as exc:
                raise SpoolError(self.where, exc) from exc
            finally:
                self._close(parts)
            for path in paths:
                _remove(path)
            for _, sub, n in parts:
                yield from self._part([sub], n, splits + 1)
            return
        for hosts in self._grouped(paths):
            yield from hosts.values()
        for path in paths:
            _remove(path)

    def _grouped(self, paths: list[str]) -> Iterator[dict[str, list[tuple[str, SeedLine]]]]:
        """The part's URLs (its files' in turn) by host, two blocks at a time (all of it,
        unless split in vain)."""
        names = {str(i): name for name, i in self._sources.items()}
        new = tuple.__new__  # new(SeedLine, fields): a SeedLine without its __new__'s frame
        priorities: dict[str, int] = {}
        hosts: dict[str, list[tuple[str, SeedLine]]] = {}
        held = 0
        try:
            for path in paths:
                with open(path, encoding="utf-8", newline="\n") as f:
                    for text in f:
                        host, priority, source, lineno, url = text[:-1].split("\t", 4)
                        level = priorities.get(priority)
                        if level is None:
                            level = priorities[priority] = int(priority)
                        urls = hosts.get(host)
                        if urls is None:
                            urls = hosts[host] = []
                        urls.append((url, new(SeedLine, (names[source], int(lineno), url, level))))
                        held += 1
                        if held >= 2 * self.block:
                            yield hosts
                            hosts, held = {}, 0
        except OSError as exc:
            raise SpoolError(self.where, exc) from exc
        if hosts:
            yield hosts

    @staticmethod
    def _close(parts) -> None:
        """Close each file; SpoolError after, if one could not be written out."""
        errors = []
        for f, _, _ in parts:
            try:
                f.close()
            except OSError as exc:
                errors.append(exc)
        if errors:
            raise SpoolError(os.path.dirname(parts[0][1]), errors[0])

    def close(self) -> None:
        """Remove the files (what was not read back is not pushed)."""
        for f, _, _ in self._parts:
            with contextlib.suppress(OSError):  # (a disk full at the last flush: thrown away anyway)
                f.close()
        self._parts = []
        shutil.rmtree(self.where, ignore_errors=True)


def _remove(path: str) -> None:
    """Remove a part read back (one left is removed with the directory by ``close()``)."""
    with contextlib.suppress(OSError):
        os.unlink(path)
