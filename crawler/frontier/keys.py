"""The Redis key layout of one crawl, in one place.

Every key of a crawl starts with ``crawl:{NAME}:`` so that several crawls share one
Redis without touching each other's keys. The crawl name sits in a hash tag
(``{NAME}``) so that on a Redis Cluster all keys of a crawl live in one slot and the
Lua scripts may touch them together.

==========================  ======  =====================================================
key                         type    contents
==========================  ======  =====================================================
``fq:<level>``              list    front queue of one priority level; entries are
                                    ``<host>\\x1f<payload>``, FIFO
``bq:<host>``               list    back queue of one politeness key (host); payloads
``rq:<host>``                zset    FRONTIER_ORDER importance: the host's new URLs, URL ->
                                    level x 1e4 - its importance (OPIC cash), lowest
                                    first; handed out after its back queue's
``rqpay``                   hash    URL -> its payload for ``rq:`` (without the URL when it
                                    begins with it; none for a payload that is the URL
                                    alone)
``ready``                   zset    ready-host heap: host -> time (ms) it may next be
                                    fetched; a host is here iff it has URLs queued
                                    (back or ranked queue), is below its in-flight
                                    limit, and is neither paused nor dropped
``hrush``                   hash    host -> submissions waiting at the head of its back
                                    queue (``scrapy submit``, the submission list;
                                    PUSH's flag 'u', PROMOTE); less one at each hand-out
``hlevels``                 hash    host -> 1: its back queue holds a URL of a lower
                                    priority level than the default (FRONTIER_HOST_WINDOW
                                    > 0, fifo; entries ``\x1c<level - default>\x1f<payload>``):
                                    new URLs are merged into it in level order
``hkeen``                   hash    host -> 1: the head of its back queue is a URL of a
                                    higher priority level than the default (as
                                    ``hlevels``); unmarked by the hand-out that leaves
                                    another URL at the head
``hbeyond``                 hash    host -> the highest priority level among its URLs
                                    beyond its window (buffer, chunks), as ``<level -
                                    default>``, when above the default (FRONTIER_HOST_WINDOW
                                    > 0): a URL of a level above that joins the window past
                                    its size (up to twice it); deleted when nothing of the
                                    host is beyond its window
``keen``                    zset    the hosts of ``hkeen`` that are in the ready heap,
                                    with their score there: POP takes a due host of it
                                    after those of ``rush``, before the others
``rush``                    zset    the hosts of ``hrush`` that are in the ready heap,
                                    with their score there: POP takes a due host of it
                                    before any other due host
``hnext``                   hash    host -> next allowed fetch time (ms), kept after the
                                    back queue empties so a returning host stays polite
``hdelay``                  hash    host -> interval (ms) overriding the default
``hlast``                   hash    host -> time (ms) of the last request the rate
                                    limiter let leave (robots.txt, retries included)
``hpages``                  hash    host -> URLs admitted (trap guard: pages per host)
``hback``                   hash    host -> ``<level>:<time>:<until>:<reason>`` (ms) of its
                                    last back-off (reason: throttled, robots, down)
``hslow``                   hash    host -> slow-down factor of its interval (> 1 after
                                    failures; answers bring it back to 1, then deleted)
``hfail``                   hash    host -> tags of the distinct URLs that failed since
                                    it last answered (comma separated)
``delayed``                 zset    ``<seq>\x1f<host>\x1f<payload>`` -> time (ms) a URL's
                                    own retry is due; moved to its back queue then
``dq:<host>``               zset    the host's entries of ``delayed``, as
                                    ``<seq>\x1f<payload>`` -> the same time: a drop finds
                                    the host's retries here, not by reading ``delayed``
``hflight``                 hash    host -> leases in flight (popped, download not
                                    ended); a host at FRONTIER_HOST_MAX_IN_FLIGHT is
                                    out of the ready heap until one lands
``flying``                  set     seq of every lease in flight
``leases``                  zset    lease -> expiry time (ms); a lease is
                                    ``<seq>\\x1f<attempt>[:<cash>]\\x1f<host>\\x1f<payload>``
``leased``                  hash    URL (a payload's first field) -> leases of it in
                                    ``leases``: PROMOTE finds a URL in flight here, not by
                                    reading ``leases``; every script that adds or removes
                                    a lease keeps it in step
``lease:seq``               string  lease counter (keeps two leases of a URL apart)
``seen:meta``               hash    URL-seen bookkeeping: ``gen`` (number of
                                    generations), ``n:<i>`` (URLs added to generation i)
``seen:<i>:<b>``            set     bucket b of URL-seen generation i: its fingerprints,
                                    signed 32-bit integers (an intset); a string of
                                    4-byte fingerprints in a crawl whose layout says
                                    no kind (urlseen.py)
``counters``                hash    queued, turn, pushed, expired, abandoned, epoch,
                                    spilled (URLs in chunks of the spill store)
                                    (frontier-wide counters)
``workers``                 zset    worker id -> last heartbeat (ms): written at each
                                    live-stats flush, removed when the worker closes
                                    (crawler/observe/livestats.py); on the first shard
``published``               hash    the settings the workers run with that shape what
                                    a viewer shows (``PUBLISHED``: host interval,
                                    in-flight limit, max wait, profile...), written at
                                    each live-stats flush; on the first shard
``waiting``                 hash    worker id -> what it waits for, as JSON (``{"for":
                                    "the stores", "since": s, "pages": n, "bytes": n}``):
                                    written at each live-stats flush while it waits,
                                    removed when it goes on; on the first shard
``submit``                  list    URLs submitted by any program for the running crawl
                                    (RPUSH; drained by the workers through ``put``):
                                    a URL, or a JSON object ``{"url": ..., "force":
                                    true|false, "priority": n}``; sharded: on the first
                                    shard only (crawler/frontier/submit.py)
``stake:<token>``           list    a worker's last take of the submission list (TAKE):
                                    its number, then the values it took, returned
                                    again to a take sent again; expires; on the first
                                    shard
``submitted``               string  URLs submissions added, a counter: a worker that
                                    sees it move looks for due hosts at once
``scope``                   hash    the crawl's scope as its workers run with it
                                    (allowed domains and prefixes, crawl rules, network
                                    guard: crawler/frontier/submit.py), which
                                    ``scrapy submit`` holds URLs to; on the first shard
``promoted``                zset    URL -> time (ms) a submission put a copy of it at
                                    the head of its host's back queue while it was
                                    queued (PROMOTE); the time negated once one of its
                                    two copies is handed out: the other is then
                                    dropped when it comes up (POP); a time again when
                                    the copy handed out comes back (its lease given
                                    back or expired, a retry in its place: POP, PUSH);
                                    forgotten after PROMOTED_DAYS
``paused``                  string  time (ms) the operator paused the crawl: no POP hands
                                    out work while it exists (``scrapy frontier pause``;
                                    sharded: on every shard)
``hpaused``                 hash    host -> time (ms) the operator paused it: out of the
                                    ready heap (add_ready leaves it out) and of 'dormant'
                                    (LOAD's claim takes it out) until resumed
``hdropped``                hash    host -> ``<ms>:<reason>`` (reason ``operator``:
                                    ``scrapy frontier drop``; ``down``: down for
                                    HOST_GIVE_UP_AFTER): its URLs are not fetched but
                                    recorded as not fetched, through ``drops``
``hlimit``                  hash    host -> its in-flight limit, from the crawl rules
                                    ``in_flight`` (written as its URLs are admitted)
``hdown``                   hash    host -> time (ms) of its first back-off (down, robots.txt
                                    unreachable) since it last answered
``dropping``                zset    hosts dropped (``hdropped``) whose queues are still
                                    being moved to ``drops``, a chunk a call (HOLD's
                                    caller, POP) -> 1 while its delayed retries are to
                                    move too, 0 when not
``drops``                   list    ``<code>\x1f<host>\x1f<payload>``: URLs to be recorded as
                                    not fetched (code 1 dropped by the operator, 2 host
                                    given up, 3 over its host's page quota); POP hands
                                    them out first, due -code, and no request leaves
``recrawl:lock``            string  the worker putting due URLs back (crawler/freshness/recrawl.py):
                                    its id, SET NX with an expiry, so that one worker
                                    at a time does a round; sharded: on the first shard
``acked:recent``            hash    second (mod 64) -> ``<second>:<pages>``: leases
                                    acknowledged in that second (ACK, POP); the last
                                    minute's pages are the fields of the last 60
                                    seconds (Frontier.stats, ``acked_last_minute``)
``tally``                   hash    stats counter (``pages/fate/fetched``,
                                    ``downloader/response_status_count/200``...) -> its
                                    sum over the workers, each adding what it counted
                                    since its last flush (crawler/observe/livestats.py); on the
                                    first shard
``tally:<t>``               hash    fate -> pages the workers recorded in the 10-second
                                    bucket starting at ``t`` (UNIX seconds); expires 2 h
                                    after its last write; on the first shard
``recent``                  list    the last 50 pages recorded, newest first, as JSON
                                    ``{"url", "status", "fate", "title", "at"}``; on
                                    the first shard
``robots:<origin>``         hash    robots.txt of ``scheme://host[:port]``: status,
                                    fetched (ms), body (zlib), fails, retry (ms), error;
                                    expires ROBOTSTXT_CACHE_SECONDS + STALE_SECONDS
                                    after its last fetch
``robots:lock:<origin>``    string  the worker fetching that robots.txt (expires)
``inbox``                   list    FRONTIER_HOST_WINDOW > 0 (decision 0061): new URLs of
                                    the default level or below, of every host, as PUSH
                                    admitted them, ``<host>\x1f<entry>`` (an entry as a
                                    chunk holds it), until a spill round writes them out
                                    as chunks (SPILL's take and put)
``inbox:due``               string  time (ms) the inbox is due to be written out: a while
                                    after its first entry (FRONTIER_SPILL_AGE), at once
                                    when it holds a slice (PUSH)
``inbox:claim``             string  ``<token>:<count>:<first chunk id>:<expiry ms>``: a
                                    worker is writing the inbox's first ``count`` entries
                                    out as chunks
``sb:<host>``                list    spill buffer (FRONTIER_HOST_WINDOW > 0; decision 0055):
                                    the host's newest URLs of a level above the default
                                    that its window did not take, behind its window and
                                    its chunks, not yet written to the spill store; an
                                    entry is a payload, or ``\x1e<score>\x1f<payload>``
                                    for a ranked queue
``scr:<host>``               hash    FRONTIER_ORDER importance: URL -> cash it gained by
                                    links while in the host's buffer or chunks; added to
                                    its score when it reaches the window; deleted with
                                    the host's last chunk and buffer
``sc:<host>``                list    ids of the host's chunks in the spill store, oldest
                                    first: its queue between its window and its buffer
``spill``                   zset    host -> time (ms) its buffer is to be written out (a
                                    full chunk at once, a partial one after
                                    FRONTIER_SPILL_AGE)
``sclaim``                  hash    host -> ``<token>:<first id>:<last id>:<expiry ms>``: a
                                    worker is writing the head of its buffer as chunks
``refill``                  zset    host -> time (ms) from which a worker may load its
                                    oldest chunk into its window (the window ran low)
``dormant``                 zset    host -> time (ms) from which it may have a window: since
                                    it waits wholly on disk (FRONTIER_ACTIVE_HOSTS had one
                                    each), or when it is due (its window given back, EVICT);
                                    never in the ready heap too (add_ready moves a host
                                    entering it to 'refill')
``lclaim``                  hash    host -> ``<token>:<chunk id>,<chunk id>...:<expiry ms>``:
                                    a worker is loading those chunks (the host's oldest,
                                    or all of them when they fit in its window, or four
                                    windows' worth when its window ran dry: LOAD)
``hspilled``                hash    host -> its URLs in chunks of the spill store (the
                                    counter ``spilled``, host by host)
``eclaim``                  hash    host -> ``<token>:<chunk id>:<expiry ms>:<digest>``: a
                                    worker is writing the host's window out as that chunk
                                    (EVICT; the digest of its entries)
``haddr``                   hash    FRONTIER_ADDRESS_POLITENESS: host -> ``<class>\x1f<address>\x1f<expiry
                                    ms>``, its address as a worker resolved it (RESOLVE)
``resolve``                 zset    host -> time (ms) its first address is to be looked up:
                                    now for one POP met without one, a claim's end, the end
                                    of its back-off when it did not resolve
``refresh``                 zset    host -> its address's expiry (ms), when it is looked up
                                    again (while the host has work)
``anext`` / ``alast``       hash    address class -> time (ms) it may next be handed a URL /
                                    the last slot the rate limiter took or response ended
``aflight``                 hash    address class -> leases in flight
``ahanded``                 hash    address class -> URLs handed out so far
``adelay`` / ``alimit``     hash    address class -> its own interval (ms) / cap of leases
                                    in flight, in place of the defaults
``lclass``                  hash    lease seq -> ``<class>\x1f<interval ms>`` of a lease in
                                    flight, given back when it lands
``aready``                  zset    address class -> time (ms) its parked hosts are looked at
``apark:<class>``           zset    host -> time (ms) it was parked: due, but its class was not
``chunk:seq``               string  chunk id counter
``spill:store``             string  the spill store the crawl's first spilling client
                                    used (``the SQLite file PATH on HOST``, ``the
                                    Cassandra keyspace KS``): every other client must use it
``cdigest``                 hash    body digest -> URL of the first page with that body
                                    (sharded: each digest on the shard it hashes to)
``ndseq``                   string  near-duplicate index: page number counter
                                    (sharded: on the first shard only)
``ndpage``                  hash    page number (4 bytes) -> its MinHash sketch
                                    (fingerprints.BINS bytes) followed by its URL
                                    (sharded: each page on the shard its number
                                    hashes to)
``ndidx:<bucket>``          string  LSH bucket (the top 16 bits of a band key, hex):
                                    8-byte entries appended, the band key's next 32
                                    bits and the page number (at most
                                    CONTENT_SEEN_BUCKET_SIZE; sharded: each bucket
                                    on the shard its name hashes to)
==========================  ======  =====================================================
"""

from __future__ import annotations

SEP = "\x1f"
EPOCH = "epoch"  # field of the counters hash: when the crawl's keys were created (see Frontier.epoch)


# Each key's name after the crawl's prefix, spelled here only: Python reads them through
# Keys, and the Lua scripts through the table K built from them (scripts.py). A name ending
# in ':' is followed by a host, a level, a number or an origin.
NAMES = {
    "ready": "ready",
    "hnext": "hnext",
    "hdelay": "hdelay",
    "hpages": "hpages",
    "hback": "hback",
    "hslow": "hslow",
    "hfail": "hfail",
    "delayed": "delayed",
    "hlast": "hlast",
    "leases": "leases",
    "hflight": "hflight",
    "flying": "flying",
    "lease_seq": "lease:seq",
    "leased": "leased",
    "seen_meta": "seen:meta",
    "counters": "counters",
    "workers": "workers",
    "published": "published",
    "waiting": "waiting",
    "submit": "submit",
    "submitted": "submitted",
    "submit_taken": "stake:",
    "scope": "scope",
    "promoted": "promoted",
    "hrush": "hrush",
    "hlevels": "hlevels",
    "hkeen": "hkeen",
    "hbeyond": "hbeyond",
    "keen": "keen",
    "rush": "rush",
    "paused": "paused",
    "hpaused": "hpaused",
    "hdropped": "hdropped",
    "hdown": "hdown",
    "hlimit": "hlimit",
    "drops": "drops",
    "dropping": "dropping",
    "recrawl_lock": "recrawl:lock",
    "acked_recent": "acked:recent",
    "tally": "tally",
    "recent": "recent",
    "content_digests": "cdigest",
    "near_seq": "ndseq",
    "near_pages": "ndpage",
    "ranked_payloads": "rqpay",
    "spill": "spill",
    "inbox": "inbox",
    "inbox_claim": "inbox:claim",
    "inbox_due": "inbox:due",
    "spill_claims": "sclaim",
    "refill": "refill",
    "dormant": "dormant",
    "load_claims": "lclaim",
    "evict_claims": "eclaim",
    "host_spilled": "hspilled",
    "chunk_seq": "chunk:seq",
    "haddr": "haddr",
    "resolve": "resolve",
    "refresh": "refresh",
    "anext": "anext",
    "alast": "alast",
    "aflight": "aflight",
    "ahanded": "ahanded",
    "adelay": "adelay",
    "alimit": "alimit",
    "lclass": "lclass",
    "aready": "aready",
    "apark": "apark:",
    "spill_store": "spill:store",
    "buffer": "sb:",
    "spilled": "sc:",
    "spill_credit": "scr:",
    "front": "fq:",
    "back": "bq:",
    "ranked": "rq:",
    "host_delayed": "dq:",
    "seen": "seen:",
    "robots": "robots:",
    "robots_lock": "robots:lock:",
    "near_bucket": "ndidx:",
    "tally_bucket": "tally:",
}


def lua_table() -> str:
    """The Lua line that gives the scripts every name above as ``K.<name>``."""
    fields = ", ".join(f"{name} = '{key}'" for name, key in NAMES.items())
    return f"local K = {{{fields}}}\n"


PREFIX = "crawl:{{{name}}}:"  # every key of a crawl starts so
SHARD = "#"  # in a Redis Cluster, shard k of a crawl is "NAME#k" in the hash tag


def crawl_of(counters_key: bytes | str) -> str:
    """The crawl name in a key that ``Keys.counters_pattern()`` matched."""
    key = counters_key.decode() if isinstance(counters_key, bytes) else counters_key
    return key[key.index("{") + 1 : key.index("}")].split(SHARD, 1)[0]


class Keys:
    """Names of the Redis keys of one crawl."""

    @staticmethod
    def counters_pattern() -> str:
        """A SCAN pattern matching the counters hash of every crawl (one per crawl that
        ever queued a URL): how ``scrapy frontier`` lists the crawls of a Redis."""
        return PREFIX.format(name="*").replace("{", "\\{").replace("}", "\\}") + NAMES["counters"]

    def __init__(self, crawl_name: str, shard: int | None = None):
        """``shard``: the keys of shard ``shard`` of the crawl in a Redis Cluster (their
        own hash tag, so that the cluster spreads the shards over its masters)."""
        if not crawl_name or any(c in crawl_name for c in "{}\x1f \n" + SHARD):
            raise ValueError(f"invalid crawl name: {crawl_name!r}")
        self.crawl_name = crawl_name
        self.shard = shard
        self.prefix = PREFIX.format(name=crawl_name if shard is None else f"{crawl_name}{SHARD}{shard}")
        for name, key in NAMES.items():
            if not key.endswith(":"):
                setattr(self, name, self.prefix + key)

    def front(self, level: int) -> str:
        return f"{self.prefix}{NAMES['front']}{level}"

    def back(self, host: str) -> str:
        return f"{self.prefix}{NAMES['back']}{host}"

    def ranked(self, host: str) -> str:
        return f"{self.prefix}{NAMES['ranked']}{host}"

    def apark(self, class_: str) -> str:
        return f"{self.prefix}{NAMES['apark']}{class_}"

    def buffer(self, host: str) -> str:
        return f"{self.prefix}{NAMES['buffer']}{host}"

    def submit_taken(self, token: str) -> str:
        return f"{self.prefix}{NAMES['submit_taken']}{token}"

    def spilled(self, host: str) -> str:
        return f"{self.prefix}{NAMES['spilled']}{host}"

    def host_delayed(self, host: str) -> str:
        return f"{self.prefix}{NAMES['host_delayed']}{host}"

    def robots(self, origin: str) -> str:
        return f"{self.prefix}{NAMES['robots']}{origin}"

    def robots_lock(self, origin: str) -> str:
        return f"{self.prefix}{NAMES['robots_lock']}{origin}"

    def near_bucket(self, band_key: int) -> str:
        """The LSH bucket of a 64-bit band key (its top 16 bits)."""
        return f"{self.prefix}{NAMES['near_bucket']}{band_key >> 48:04x}"

    def tally_bucket(self, t: float) -> str:
        """The live-stats bucket starting at ``t`` (UNIX seconds, a multiple of 10:
        crawler/observe/livestats.py ``bucket_of``)."""
        return f"{self.prefix}{NAMES['tally_bucket']}{int(t)}"

    def seen(self, generation: int, bucket: int) -> str:
        """A bucket of a URL-seen generation (urlseen.py)."""
        return f"{self.prefix}{NAMES['seen']}{generation}:{bucket}"

    def pattern(self, name: str = "") -> str:
        """A SCAN pattern matching every key of this crawl (``name``: those whose name
        after the prefix begins with it, e.g. NAMES["spilled"])."""
        return self.prefix.replace("{", "\\{").replace("}", "\\}") + name + "*"
