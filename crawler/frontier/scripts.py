"""The frontier's Lua scripts, as Redis runs them. Each runs atomically in one round trip.

The scripts are files of their own, each named after its verb with its contract at its top
(``lua/push.lua``, ``lua/pop.lua``...), the pieces several share in ``lua/includes/``
(``--- @include "helpers"`` puts one in its place). ``source(name)`` assembles one: the
table of key names and drop codes, its includes, its own text; the module's ``PUSH``, ``POP``...
are those texts, which the frontier registers with Redis.

All keys of a crawl share the prefix ``crawl:{NAME}:`` (see keys.py). The scripts
build per-host key names from that prefix, so they are passed the prefix rather than
every key; all keys of a crawl hash to one Redis Cluster slot through the hash tag.
The names after the prefix come from keys.NAMES, as the table ``K`` each script starts
with (``prefix .. K.ready``): no key name is spelled here; nor a drop code (words.DROP_CODES,
the table ``DROP``).
Times are integer milliseconds given by the caller (``now``), so that every worker's
clock enters only as the "now" of its own call.

Entry formats:
    front queue entry   ``<host>\\x1f<payload>``
    back queue entry    ``<payload>``, or ``\\x1d<attempt>[:<cash>]\\x1f<payload>`` for a URL
                        back from a lease (expired before: ``attempt`` >= 2; given back,
                        or taken over by its retry or its redirect's target, with the
                        importance it was handed out with: ``cash``), or
                        ``\\x1c<level - default level>\\x1f<payload>`` for a fifo URL of
                        another priority level than the default with a window (kept in
                        level order, helpers.lua: to_back)
    lease (its id)      ``<seq>\\x1f<attempt>[:<cash>]\\x1f<host>\\x1f<payload>``: the member of the
                        ``leases`` sorted set, scored by expiry, carries everything
                        needed to put the URL back
"""

import re
from collections.abc import Callable
from importlib import resources

from crawler.frontier.keys import lua_table
from crawler.frontier.words import DROP_CODES

LUA = resources.files("crawler.frontier").joinpath("lua")
NAMES = (
    "push",
    "pop",
    "backoff",
    "fail",
    "slot",
    "end",
    "ack",
    "promote",
    "hold",
    "credit",
    "spill",
    "load",
    "evict",
    "resolve",
    "take",
)
# what every script starts with: the key names (K, keys.NAMES) and the drop codes (DROP);
# a script need not use all of them, nor every function of the pieces it includes (luacheck
# is told so: the script's own code is checked in full)
SHARED = "-- luacheck: push ignore 211\n{}-- luacheck: pop\n"
PREAMBLE = "-- luacheck: push ignore 211 631\n{}-- luacheck: pop\n".format(  # (K is one long line)
    lua_table() + "local DROP = {" + ", ".join(f"{name} = {code}" for name, code in DROP_CODES.items()) + "}\n"
)
_INCLUDE = re.compile(r'^--- @include "([a-z_]+)"\n', re.M)


def _read(path: str) -> str:
    return LUA.joinpath(path).read_text(encoding="utf-8")


def source(name: str, read: Callable[[str], str] = _read) -> str:
    """The script ``name`` (``lua/<name>.lua``) as Redis runs it: the preamble, then its
    text with each ``--- @include "piece"`` replaced by ``lua/includes/<piece>.lua``.
    ``read``: a file's text by its path under ``lua/`` (another commit's: a benchmark's
    baseline, bench/frontier_scans.py)."""
    text = read(f"{name}.lua")
    return PREAMBLE + _INCLUDE.sub(lambda m: SHARED.format(read(f"includes/{m[1]}.lua")), text)


PUSH, POP, BACKOFF, FAIL, SLOT, END, ACK, PROMOTE, HOLD, CREDIT, SPILL, LOAD, EVICT, RESOLVE, TAKE = (
    source(name) for name in NAMES
)
