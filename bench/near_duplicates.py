"""Benchmark: near-duplicate detection on a labelled corpus of real HTML.

Setup (Debian's documentation packages: HTML that no one here wrote):

    apt-get install -y python3-doc nodejs-doc rust-doc
    python -m bench.near_duplicates                 # 3,000 pages, 1,500 near copies
    python -m bench.near_duplicates --pages 1000 --copies 500 --seed 2
    python -m bench.near_duplicates --reader         # fingerprints from crawler.page.reader
    python -m bench.near_duplicates --servers 3      # the index spread over 3 redis-servers (REDIS_URLS)
    python -m bench.near_duplicates --cluster        # ... over a 3-master Redis Cluster (16 shards)

The corpus:

- **Pages as they are** (labelled distinct): every page of python3-doc and nodejs-doc,
  and a random sample of rust-doc (its API pages, its books) up to ``--pages``. Pages with
  the same bytes are kept once.
- **Near copies** (labelled copies of their source): ``--copies`` pages drawn from those
  with at least CONTENT_SEEN_MIN_WORDS words of main text, each with 1-5% of the words of
  its body replaced by words of other pages, and one more change: a changed header or
  footer, a reordered section, or a date line added to the text. Also ``--far`` copies
  with 10, 20 and 30% of the words replaced, shown apart (they are not in the targets).
- **Exact copies**: ``--exact`` pages byte for byte, under other URLs.

The real content-seen pipeline (crawler/pipelines/contentseen.py, the project's settings)
runs against a throwaway redis-server (``--servers N``: N of them, REDIS_URLS; ``--cluster``: a
three-master Redis Cluster, REDIS_CLUSTER_URL): first every page as it is, in random order,
then all copies, in random order. A near mark is right when it names the copy's own source;
a mark between two pages as they are is wrong unless the two files are copies already
(weighted word overlap of their visible text, sum of min counts / sum of max counts, of
0.9 or more: the package repeats itself, rust-doc's re-exports for instance); those are
counted apart. precision = right marks / all near marks; recall = copies marked near
their source / copies. Targets: precision >= 99.5%, recall >= 95% for copies with at
most 5% of words changed, and the check with its lookup <= 2 ms per 100 KB page.

Printed too: the figures by share of words changed; the old scheme (a 64-bit SimHash of
the page's counted words at Hamming distance 3) and a SimHash of the new features, on
the same pages, for comparison; CPU per page by stage (parse, main text, words,
sketch); the lookup's wall time; Redis memory per indexed page (sharded: each server's share
of it, the Redis calls a check makes, and each server's share of the Redis CPU of the checks).

``--reader``: the fingerprints come from ``crawler.page.reader.read_page`` (the body decoded
as the metadata pipeline decodes it, header included, and parsed once for every use)
instead of ``page_fingerprints``; its decode and parse count as "digest + parse".
"""

from __future__ import annotations

import argparse
import collections
import os
import random
import tempfile
import time
import uuid
from pathlib import Path

import lxml.etree
import lxml.html
import numpy as np

from crawler.contentseen import fingerprints as fp
from crawler.page.reader import read_page
from testing.servers import RedisServer, start_cluster

SOURCES = {  # package -> folder of its HTML
    "python3-doc": "/usr/share/doc/python3.11/html",
    "nodejs-doc": "/usr/share/doc/nodejs/api",
    "rust-doc": "/usr/share/doc/rust-doc/html",
}
HEADERS = {"Content-Type": ["text/html"]}  # what bench/doc_crawl.py's server sends
NEAR_SHARES = (0.01, 0.02, 0.03, 0.04, 0.05)
FAR_SHARES = (0.10, 0.20, 0.30)
CHANGES = ("header", "footer", "reorder", "date")
_WORD = lxml.etree.XPath("descendant::text()[not(ancestor::script) and not(ancestor::style)]")


class Doc:
    def __init__(self, url: str, body: bytes, source: int | None = None, share: float = 0.0, change: str = ""):
        self.url, self.body, self.source, self.share, self.change = url, body, source, share, change


def load_corpus(total: int, rng: random.Random) -> list[Doc]:
    files = []
    for package, folder in SOURCES.items():
        found = sorted(Path(folder).rglob("*.html")) if os.path.isdir(folder) else []
        if not found:
            print(f"  {package}: not installed ({folder}); apt-get install -y {package}")
        files.append((package, folder, found))
    chosen = []
    for package, folder, found in files:
        room = total - len(chosen)
        picked = found if package != "rust-doc" else rng.sample(found, min(len(found), max(room, 0)))
        chosen += [(package, folder, f) for f in picked[: max(room, 0)]]
        print(f"  {package}: {len(found)} HTML files, {min(len(picked), max(room, 0))} taken")
    docs, bodies = [], set()
    for package, folder, f in chosen:
        body = f.read_bytes()
        if body in bodies:
            continue
        bodies.add(body)
        docs.append(Doc(f"http://{package}.test/{f.relative_to(folder)}", body))
    return docs


def vocabulary(docs: list[Doc], rng: random.Random) -> list[str]:
    words: set[str] = set()
    for doc in rng.sample(docs, min(200, len(docs))):
        words.update(w for w in fp.page_text(doc.body).split() if w.isalpha() and 3 <= len(w) <= 12)
    return sorted(words)


def mutate(body: bytes, share: float, change: str, vocab: list[str], rng: random.Random) -> bytes:
    """A copy of an HTML page with ``share`` of its body's words replaced and one more
    ``change``."""
    tree = lxml.html.fromstring(body)
    body_el = tree.find("body") if tree.tag == "html" else tree
    body_el = body_el if body_el is not None else tree
    slots = []  # (node, is_tail, word index) of every word of the body's text
    texts = []
    for text in _WORD(body_el):
        parent, is_tail = text.getparent(), text.is_tail
        words = str(text).split(" ")
        texts.append((parent, is_tail, words))
        slots += [(len(texts) - 1, i) for i, w in enumerate(words) if w.strip()]
    for t, i in rng.sample(slots, round(share * len(slots))):
        texts[t][2][i] = rng.choice(vocab)
    for parent, is_tail, words in texts:
        if is_tail:
            parent.tail = " ".join(words)
        else:
            parent.text = " ".join(words)
    date = f"{rng.randint(1, 28)} {rng.choice(['March', 'June', 'October'])} {rng.randint(2019, 2026)}"
    if change == "header":
        banner = lxml.html.fragment_fromstring(f"<header><p>New release, {date}: see what changed</p></header>")
        body_el.insert(0, banner)
    elif change == "footer":
        body_el.append(
            lxml.html.fragment_fromstring(
                f"<footer><p>Page generated {date}. Mirror {rng.randint(1, 99)}.</p></footer>"
            )
        )
    elif change == "reorder":
        parents = [el for el in body_el.iter("div", "section", "main", "article") if len(el) >= 3]
        if parents:
            parent = max(parents[-50:], key=len)
            i, j = sorted(rng.sample(range(len(parent)), 2))
            a, b = parent[i], parent[j]
            parent.remove(b)
            parent.insert(i, b)
            parent.remove(a)
            parent.insert(j, a)
    elif change == "date":
        mains = tree.xpath("//main|//*[@role='main']|//h1")
        target = mains[0] if mains else body_el
        target.addnext(lxml.html.fragment_fromstring(f"<p>Last updated on {date}.</p>")) if target.tag == "h1" else (
            target.insert(0, lxml.html.fragment_fromstring(f"<p>Last updated on {date}.</p>"))
        )
    return lxml.html.tostring(tree, encoding="utf-8")


def _mirror(url: str, kind: str, n: int) -> str:
    """The URL of copy ``n`` of a page: on a mirror host of its package (a mirror site)."""
    _, _, host, path = url.split("/", 3)
    return f"http://{kind}-mirror.{host}/{path}?copy={n}"


def similarity(a: bytes, b: bytes) -> tuple[float, float]:
    """How alike two pages' visible texts are, computed exactly and independently of the
    detector (whole text, frame included; every word; no sketch): (the share of their
    words in common, 2 x sum of min counts / sum of all counts; their weighted word
    overlap, sum of min counts / sum of max counts)."""
    ca, cb = (collections.Counter(fp.page_text(x).lower().split()) for x in (a, b))
    both, either, total = sum((ca & cb).values()), sum((ca | cb).values()), sum(ca.values()) + sum(cb.values())
    return (2 * both / total if total else 1.0), (both / either if either else 1.0)


# the stage each function page_fingerprints calls is counted under
STAGES = {
    "body_digest": "digest + parse",
    "parse": "digest + parse",
    "main_text": "main text",
    "word_hashes": "words",
    "word_bag": "words",
    "minhash": "sketch",
    "sketch_bytes": "sketch",
    "band_keys": "sketch",
    "simhash": "sketch",
}


class Timed:
    """crawler.contentseen.fingerprints.page_fingerprints itself, with the CPU time of each stage: the
    functions it calls are wrapped with a clock while it runs (it calls them through the
    module)."""

    def __init__(self):
        self.cpu = collections.Counter()

    def run(self, body: bytes, min_words: int, reader: bool = False) -> fp.Fingerprints:
        saved = {name: getattr(fp, name) for name in STAGES}
        for name, fn in saved.items():
            setattr(fp, name, self._clocked(STAGES[name], fn))
        try:
            if not reader:
                return fp.page_fingerprints(body, min_words)
            reading = read_page(body, "", HEADERS, links=False, metadata=False, min_words=min_words)
            self.cpu["digest + parse"] += reading.timings["decode"] + reading.timings["parse"]
            return reading.prints
        finally:
            for name, fn in saved.items():
                setattr(fp, name, fn)

    def _clocked(self, stage: str, fn):
        def clocked(*args):
            t0 = time.process_time()
            try:
                return fn(*args)
            finally:
                self.cpu[stage] += time.process_time() - t0

        return clocked


def fill_index(pipeline, client, pages: int, seed: int) -> float:
    """Index ``pages`` synthetic pages (random sketches and band keys) before the corpus,
    so that lookups and memory are measured on an index of a realistic size; the seconds
    it took. On one Redis the checks are pipelined 1,000 a call; a sharded index checks
    them one by one (a check calls several shards)."""
    from crawler.contentseen.index import ShardedContentIndex

    rng = np.random.default_rng(seed)
    sharded = isinstance(pipeline.index, ShardedContentIndex)
    t0 = time.perf_counter()
    for start in range(0, pages, 1000):
        pipe = None if sharded else client.pipeline(transaction=False)
        for n in range(start, min(start + 1000, pages)):
            bands = rng.integers(0, 2**63, fp.BANDS, dtype=np.uint64).tolist()
            prints = fp.Fingerprints(f"{n:040x}", 500, rng.bytes(fp.BINS), bands, None)
            pipeline.check(prints, f"http://filler{n % 997}.test/page/{n}", client=pipe)
        if pipe is not None:
            pipe.execute()
    return time.perf_counter() - t0


class Servers:
    """The bench's Redis: one redis-server, ``count`` of them (REDIS_URLS) or a three-master
    cluster, each with a client of its own for the figures."""

    def __init__(self, tmp: str, count: int, cluster: bool):
        if cluster:
            self.servers = start_cluster(Path(tmp) / "cluster")
            self.settings = {"REDIS_CLUSTER_URL": self.servers[0].url}
        else:
            self.servers = [RedisServer(Path(tmp) / f"redis{i}").start() for i in range(count)]
            urls = [s.url for s in self.servers]
            self.settings = {"REDIS_URL": urls[0]} if count == 1 else {"REDIS_URLS": ",".join(urls)}
        self.label = "a 3-master cluster" if cluster else "1 redis-server" if count == 1 else f"{count} redis-servers"

    def kill(self) -> None:
        for s in self.servers:
            s.kill()

    def used_memory(self) -> list[int]:
        return [s.client.info("memory")["used_memory"] for s in self.servers]

    def calls(self) -> int:
        """The calls content seen made so far: its scripts (EVALSHA) and its reads of
        candidates' sketches (HMGET); the commands scripts run are counted apart."""
        total = 0
        for s in self.servers:
            stats = s.client.info("commandstats")
            total += sum(stats.get(f"cmdstat_{c}", {}).get("calls", 0) for c in ("evalsha", "hmget"))
        return total

    def cpu(self) -> list[float]:
        return [s.cpu_seconds() for s in self.servers]

    def keys(self, crawl: str):
        """(server index, key) of every key of ``crawl`` (all its shards)."""
        for n, s in enumerate(self.servers):
            for key in s.client.scan_iter(match=f"crawl:\\{{{crawl}[}}#]*", count=1000):
                yield n, key


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pages", type=int, default=3000)
    ap.add_argument("--copies", type=int, default=1500)
    ap.add_argument("--far", type=int, default=300)
    ap.add_argument("--exact", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--fill", type=int, default=100_000, help="synthetic pages indexed before the corpus")
    ap.add_argument("--reader", action="store_true", help="fingerprints from crawler.page.reader.read_page")
    ap.add_argument("--servers", type=int, default=1, help="redis-servers the index is spread over (REDIS_URLS)")
    ap.add_argument("--cluster", action="store_true", help="the index spread over a 3-master Redis Cluster")
    args = ap.parse_args()
    rng = random.Random(args.seed)

    from scrapy.utils.test import get_crawler

    from crawler.pipelines.contentseen import ContentSeenPipeline
    from testing.services import project_settings

    print("Corpus:")
    base = load_corpus(args.pages, rng)
    settings = project_settings()
    min_words = settings["CONTENT_SEEN_MIN_WORDS"]
    timed = Timed()
    prints = {}
    rng.shuffle(base)  # the order of the crawl: pages are read in the order they are checked
    for doc in base:
        prints[doc.url] = timed.run(doc.body, min_words, args.reader)
    eligible = [i for i, d in enumerate(base) if prints[d.url].sketch is not None]
    print(
        f"  {len(base)} distinct files, {sum(len(d.body) for d in base) / len(base) / 1000:.0f} KB on average; "
        f"{len(eligible)} with at least {min_words} words of main text (the others: exact copies only)"
    )
    vocab = vocabulary(base, rng)
    copies: list[Doc] = []
    for n, i in enumerate(rng.sample(eligible, min(args.copies, len(eligible)))):
        share, change = NEAR_SHARES[n % len(NEAR_SHARES)], CHANGES[n // len(NEAR_SHARES) % len(CHANGES)]
        body = mutate(base[i].body, share, change, vocab, rng)
        copies.append(Doc(_mirror(base[i].url, "near", n), body, i, share, change))
    for n, i in enumerate(rng.sample(eligible, min(args.far, len(eligible)))):
        share = FAR_SHARES[n % len(FAR_SHARES)]
        body = mutate(base[i].body, share, CHANGES[n % len(CHANGES)], vocab, rng)
        copies.append(Doc(_mirror(base[i].url, "far", n), body, i, share, "far"))
    for n, i in enumerate(rng.sample(range(len(base)), min(args.exact, len(base)))):
        copies.append(Doc(_mirror(base[i].url, "exact", n), base[i].body, i, 0.0, "exact"))
    rng.shuffle(copies)
    for doc in copies:
        prints[doc.url] = timed.run(doc.body, min_words, args.reader)
    kinds = collections.Counter(
        "exact" if d.change == "exact" else "far" if d.change == "far" else "near" for d in copies
    )
    print(f"  {len(copies)} copies: {kinds['near']} near, {kinds['far']} far (10-30% changed), {kinds['exact']} exact")

    crawl = f"bench-nd-{uuid.uuid4().hex[:8]}"
    with tempfile.TemporaryDirectory() as tmp:
        servers = Servers(tmp, args.servers, args.cluster)
        try:
            crawler = get_crawler(settings_dict=project_settings(CRAWL_NAME=crawl, **servers.settings))
            pipeline = ContentSeenPipeline.from_crawler(crawler)
            memory_before = servers.used_memory()
            fill_seconds = fill_index(pipeline, servers.servers[0].client, args.fill, args.seed)
            lookups, lookup_cpu = [], []

            def check(doc: Doc):
                t0, c0 = time.perf_counter(), time.process_time()
                verdict = pipeline.check(prints[doc.url], doc.url)
                lookups.append(time.perf_counter() - t0)
                lookup_cpu.append(time.process_time() - c0)
                return verdict

            calls, cpu = -servers.calls(), [-c for c in servers.cpu()]  # of the corpus's checks only
            base_marks = {doc.url: check(doc) for doc in base}
            calls, cpu = calls + servers.calls(), [c + d for c, d in zip(cpu, servers.cpu(), strict=True)]
            memory = [m - b for m, b in zip(servers.used_memory(), memory_before, strict=True)]
            per_key = collections.Counter()
            indexed = 0
            for n, key in servers.keys(crawl):
                name = key.decode().split("}:", 1)[1].split(":", 1)[0]
                per_key[name] += servers.servers[n].client.memory_usage(key, samples=0) or 0
                if name == "ndpage":
                    indexed += servers.servers[n].client.hlen(key)
            calls, cpu = calls - servers.calls(), [c - d for c, d in zip(cpu, servers.cpu(), strict=True)]
            copy_marks = {doc.url: check(doc) for doc in copies}
            calls, cpu = calls + servers.calls(), [c + d for c, d in zip(cpu, servers.cpu(), strict=True)]
        finally:
            servers.kill()

    by_url = {d.url: i for i, d in enumerate(base)}
    body_of = {d.url: d.body for d in [*base, *copies]}
    near_of = {url: v[1] for url, v in base_marks.items() if v is not None and v[0] == "near"}
    source_of = {**by_url, **{d.url: d.source for d in copies}}
    # marks between pages as they are
    wrong, package_copies = [], []
    for url, verdict in base_marks.items():
        if verdict is None or verdict[0] != "near":
            continue
        ratio, overlap = similarity(body_of[url], body_of[verdict[1]])
        if ratio >= 0.9:
            package_copies.append((ratio, overlap, verdict[2], url, verdict[1]))
        else:
            wrong.append((ratio, overlap, verdict[2], url, verdict[1]))
    exact_in_package = sum(1 for v in base_marks.values() if v is not None and v[0] == "exact")
    # marks of copies
    right = found = 0
    rows = collections.defaultdict(lambda: [0, 0])  # share -> [copies, marked near their source]
    by_change = collections.defaultdict(lambda: [0, 0])
    exact_ok = 0
    missed = []
    for doc in copies:
        verdict = copy_marks[doc.url]
        if doc.change == "exact":
            exact_ok += verdict is not None and verdict[0] == "exact"
            continue
        near = verdict is not None and verdict[0] == "near"
        # right: its source, another copy of it, or the page its source was marked near
        ok = near and (source_of[verdict[1]] == doc.source or verdict[1] == near_of.get(base[doc.source].url))
        if near and not ok:  # marked near a page that is not its source
            ratio, overlap = similarity(doc.body, body_of[verdict[1]])
            if ratio >= 0.9:
                package_copies.append((ratio, overlap, verdict[2], doc.url, verdict[1]))
            else:
                wrong.append((ratio, overlap, verdict[2], doc.url, verdict[1]))
        if not ok and doc.change != "far":
            mine = fp.word_bag(fp.word_hashes(fp.main_text(fp.parse(doc.body))))
            theirs = fp.word_bag(fp.word_hashes(fp.main_text(fp.parse(base[doc.source].body))))
            both = len(np.intersect1d(mine, theirs))
            missed.append(
                (2 * both / (len(mine) + len(theirs)), doc.share, doc.change, verdict and verdict[2], doc.url)
            )
        rows[doc.share][0] += 1
        rows[doc.share][1] += ok
        if doc.change != "far":
            by_change[doc.change][0] += 1
            by_change[doc.change][1] += ok
            right += ok
            found += 1
    near_copies = sum(rows[s][0] for s in NEAR_SHARES)
    marks = right + len(wrong) + len(package_copies) + sum(rows[s][1] for s in FAR_SHARES)
    precision = (marks - len(wrong)) / marks if marks else 1.0
    recall = right / near_copies if near_copies else 0.0

    print(f"\nNear-duplicate marks (CONTENT_SEEN_RESEMBLANCE = {settings['CONTENT_SEEN_RESEMBLANCE']:.2f}):")
    print(f"  precision {precision:.4f}  ({marks - len(wrong)} right of {marks} near marks; target >= 0.995)")
    print(f"  recall    {recall:.4f}  ({right} of {near_copies} copies with 1-5% of words changed; target >= 0.95)")
    print(
        f"  other marks: {len(package_copies)} of pages the package itself repeats (words in common >= 0.9), "
        f"{len(wrong)} wrong (below 0.9)"
    )
    for kind, pairs in (("wrong", wrong), ("repeated", package_copies)):
        for ratio, overlap, similar, a, b in sorted(pairs)[:12]:
            print(
                f"    {kind}: {a} ~ {b}: resemblance {similar:.3f}; words in common {ratio:.2f}, weighted overlap {overlap:.2f}"
            )
    for m in sorted(missed, key=lambda m: m[0])[:20]:
        exact, share, change, verdict, url = m
        print(f"    missed: {url}: {share:.0%} changed + {change}; resemblance {exact:.3f} (exact), verdict {verdict}")
    print(f"  exact copies found: {exact_ok} of {args.exact}; identical bodies within the package: {exact_in_package}")
    print(
        "  by share of words changed:  "
        + "  ".join(f"{s:.0%}: {rows[s][1]}/{rows[s][0]}" for s in (*NEAR_SHARES, *FAR_SHARES))
    )
    print("  by other change (1-5%):     " + "  ".join(f"{c}: {by_change[c][1]}/{by_change[c][0]}" for c in CHANGES))

    # the old scheme, and a SimHash of the new features, on the same pages
    old = {}
    for doc in [*base, *copies]:
        words = fp.word_hashes(fp.page_text(doc.body))
        old[doc.url] = fp.simhash(words) if len(words) >= 50 else None
    values = np.array([old[d.url] or 0 for d in base], dtype=np.uint64)
    has = np.array([old[d.url] is not None for d in base])
    close_pairs = 0
    for i in range(len(base)):
        if not has[i]:
            continue
        x = values[i + 1 :] ^ values[i]
        dist = np.unpackbits(x.view(np.uint8).reshape(-1, 8), axis=1).sum(axis=1)
        close_pairs += int(((dist <= 3) & has[i + 1 :]).sum())
    near_docs = [d for d in copies if d.share in NEAR_SHARES and d.change not in ("far", "exact")]
    old_found = sum(
        1
        for d in near_docs
        if old[d.url] is not None
        and old[base[d.source].url] is not None
        and fp.distance(old[d.url], old[base[d.source].url]) <= 3
    )
    new_sim = sum(
        1
        for d in near_docs
        if prints[d.url].simhash is not None
        and prints[base[d.source].url].simhash is not None
        and fp.distance(prints[d.url].simhash, prints[base[d.source].url].simhash) <= 3
    )
    print("\nFor comparison, SimHash at Hamming distance <= 3 on the same pages:")
    print(
        f"  of counted words of the visible text (the old scheme): {close_pairs} pairs of pages as they are within 3 bits; {old_found} of {len(near_docs)} copies within 3 bits of their source"
    )
    print(
        f"  of the main text's words (kept in the UrlStore): {new_sim} of {len(near_docs)} copies within 3 bits of their source"
    )

    n_pages = len(base) + len(copies)
    kb = sum(len(d.body) for d in [*base, *copies]) / n_pages / 1000
    per100 = 100 / kb
    cpu_ms = {k: v / n_pages * 1000 for k, v in timed.cpu.items()}
    lookup_ms = sum(lookups) / len(lookups) * 1000
    p50, p99 = np.percentile(np.array(lookups) * 1000, [50, 99])
    check_ms = cpu_ms["words"] + cpu_ms["sketch"] + lookup_ms
    print(f"\nCost per page ({kb:.0f} KB on average; per 100 KB in brackets):")
    for k, v in cpu_ms.items():
        print(f"  {k:18s} {v:6.3f} ms CPU  ({v * per100:.3f})")
    print(
        f"  {'lookup (Redis)':18s} {lookup_ms:6.3f} ms wall ({lookup_ms * per100:.3f}); p50 {p50:.3f} ms, p99 {p99:.3f} ms"
    )
    sketched = np.array([prints[d.url].sketch is not None for d in [*base, *copies]])
    cpu_lookup, wall = np.array(lookup_cpu) * 1000, np.array(lookups) * 1000
    print(
        f"  {'':18s} {cpu_lookup.mean():6.3f} ms CPU here; pages with a sketch: {wall[sketched].mean():.3f} ms wall, "
        f"{cpu_lookup[sketched].mean():.3f} ms CPU here ({sketched.sum()} pages), the others {wall[~sketched].mean():.3f} "
        f"ms wall, {cpu_lookup[~sketched].mean():.3f} ms CPU"
    )
    print(f"  the check with its lookup (words, sketch, lookup): {check_ms * per100:.3f} ms per 100 KB (target <= 2)")
    print(f"  all of it, parse and main text included: {(sum(cpu_ms.values()) + lookup_ms) * per100:.3f} ms per 100 KB")
    print(
        f"\nRedis memory on {servers.label}: {sum(memory) / max(indexed, 1):.0f} bytes per indexed page (used_memory; "
        f"{indexed:,} pages indexed, {args.fill:,} of them synthetic, indexed in {fill_seconds:.1f} s); by key:"
    )
    for name, size in per_key.most_common():
        print(f"  {name:10s} {size / max(indexed, 1):8.0f} bytes per indexed page")
    print(f"Redis calls per check (the corpus's): {calls / len(lookups):.2f}")
    if len(servers.servers) > 1:
        print("  each server's share of the memory: " + "  ".join(f"{m / max(sum(memory), 1):.0%}" for m in memory))
        print(
            "  and of the Redis CPU of the corpus's checks: " + "  ".join(f"{c / max(sum(cpu), 1e-9):.0%}" for c in cpu)
        )


if __name__ == "__main__":
    main()
