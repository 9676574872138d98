"""Benchmark: near-duplicate detection on a labelled corpus of real HTML.

    apt-get install -y python3-doc nodejs-doc rust-doc
    python -m bench.near_duplicates                 # 3,000 pages, 1,500 near copies
    python -m bench.near_duplicates --servers 3      # the index over 3 redis-servers (REDIS_URLS)
    python -m bench.near_duplicates --cluster        # ... over a 3-master Redis Cluster

The corpus: bench/page_reading.py's documentation pages (``--pages``, distinct); ``--copies``
near copies (1-5% of the words replaced, plus a header, a footer, a moved section or a
date line), ``--far`` copies (10-30%) and ``--exact`` copies, checked in random order by
the content-seen pipeline (project settings, throwaway redis-servers, ``--fill`` synthetic
pages indexed first). A near mark is right when it names the copy's source; a mark between
distinct pages is wrong unless they share 0.9 of their words. Figures: precision (target
>= 99.5%), recall of the 1-5% copies (>= 95%), the check with its lookup per 100 KB (<= 2
ms), CPU by stage, the lookup's wall time, Redis memory an indexed page and calls a check,
and the former scheme (a SimHash of the visible text within 3 bits) on the same pages.
"""

from __future__ import annotations

import argparse
import collections
import random
import tempfile
import time
import uuid
from pathlib import Path

import lxml.etree
import lxml.html
import numpy as np

from bench import doc_crawl
from bench.page_reading import load_pages
from bench.results import Results
from crawler.contentseen import fingerprints as fp
from testing.sampling import StageClock, percentile
from testing.servers import RedisServer, start_cluster

NEAR_SHARES = (0.01, 0.02, 0.03, 0.04, 0.05)
FAR_SHARES = (0.10, 0.20, 0.30)
CHANGES = ("header", "footer", "reorder", "date")
_WORD = lxml.etree.XPath("descendant::text()[not(ancestor::script) and not(ancestor::style)]")
# the stage each function page_fingerprints calls is counted under
STAGES = {"body_digest": "digest + parse", "parse": "digest + parse", "main_text": "main text"}
STAGES |= dict.fromkeys(("word_hashes", "word_bag"), "words")
STAGES |= dict.fromkeys(("minhash", "sketch_bytes", "band_keys", "simhash"), "sketch")


class Doc:
    def __init__(self, url: str, body: bytes, source: int | None = None, share: float = 0.0, change: str = ""):
        self.url, self.body, self.source, self.share, self.change = url, body, source, share, change


def mutate(body: bytes, share: float, change: str, vocab: list[str], rng: random.Random) -> bytes:
    """A copy of an HTML page with ``share`` of its body's words replaced and one more ``change``."""
    tree = lxml.html.fromstring(body)
    body_el = tree.find("body") if tree.tag == "html" else tree
    body_el = body_el if body_el is not None else tree
    texts, slots = [], []  # (node, is_tail, words); (text index, word index) of every word
    for text in _WORD(body_el):
        words = str(text).split(" ")
        texts.append((text.getparent(), text.is_tail, words))
        slots += [(len(texts) - 1, i) for i, w in enumerate(words) if w.strip()]
    for t, i in rng.sample(slots, round(share * len(slots))):
        texts[t][2][i] = rng.choice(vocab)
    for parent, is_tail, words in texts:
        setattr(parent, "tail" if is_tail else "text", " ".join(words))
    date = f"{rng.randint(1, 28)} {rng.choice(['March', 'June', 'October'])} {rng.randint(2019, 2026)}"
    if change == "header":
        body_el.insert(
            0, lxml.html.fragment_fromstring(f"<header><p>New release, {date}: see what changed</p></header>")
        )
    elif change == "footer":
        footer = f"<footer><p>Page generated {date}. Mirror {rng.randint(1, 99)}.</p></footer>"
        body_el.append(lxml.html.fragment_fromstring(footer))
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
        line = lxml.html.fragment_fromstring(f"<p>Last updated on {date}.</p>")
        mains = tree.xpath("//main|//*[@role='main']|//h1")
        target = mains[0] if mains else body_el
        target.addnext(line) if target.tag == "h1" else target.insert(0, line)
    return lxml.html.tostring(tree, encoding="utf-8")


def similarity(a: bytes, b: bytes) -> float:
    """The share of words in common of two pages' visible texts, independent of the detector."""
    return doc_crawl.share(*(collections.Counter(fp.page_text(x).lower().split()) for x in (a, b)))


def fill_index(pipeline, client, pages: int, seed: int) -> float:
    """Index ``pages`` synthetic pages (random sketches and band keys) before the corpus, so
    that lookups and memory are measured on an index of a realistic size; the seconds it took.
    On one Redis the checks are pipelined 1,000 a call; a sharded index checks one by one."""
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
    """One redis-server, ``count`` of them (REDIS_URLS) or a three-master cluster."""

    def __init__(self, tmp: str, count: int, cluster: bool):
        if cluster:
            self.servers = start_cluster(Path(tmp) / "cluster")
            self.settings = {"REDIS_CLUSTER_URL": self.servers[0].url}
        else:
            self.servers = [RedisServer(Path(tmp) / f"redis{i}").start() for i in range(count)]
            urls = [s.url for s in self.servers]
            self.settings = {"REDIS_URL": urls[0]} if count == 1 else {"REDIS_URLS": ",".join(urls)}
        self.label = "a 3-master cluster" if cluster else "1 redis-server" if count == 1 else f"{count} redis-servers"

    def figures(self) -> tuple[list[int], int, list[float]]:
        """(used_memory of each, the content-seen calls (EVALSHA, HMGET) of all, CPU of each)."""
        calls = 0
        for s in self.servers:
            stats = s.client.info("commandstats")
            calls += sum(stats.get(f"cmdstat_{c}", {}).get("calls", 0) for c in ("evalsha", "hmget"))
        return (
            [s.client.info("memory")["used_memory"] for s in self.servers],
            calls,
            [s.cpu_seconds() for s in self.servers],
        )

    def key_sizes(self, crawl: str) -> tuple[collections.Counter, int]:
        """(bytes of the crawl's keys by name, pages indexed)."""
        sizes, indexed = collections.Counter(), 0
        for s in self.servers:
            for key in s.client.scan_iter(match=f"crawl:\\{{{crawl}[}}#]*", count=1000):
                name = key.decode().split("}:", 1)[1].split(":", 1)[0]
                sizes[name] += s.client.memory_usage(key, samples=0) or 0
                indexed += s.client.hlen(key) if name == "ndpage" else 0
        return sizes, indexed


def corpus(args, rng: random.Random, fingerprint, min_words: int) -> tuple[list[Doc], list[Doc], dict]:
    """(pages as they are, copies, url -> fingerprints), in the order they are checked."""
    base, bodies = [], set()
    for url, body in load_pages(args.pages, rng):
        if body not in bodies:
            bodies.add(body)
            base.append(Doc(url, body))
    prints = {d.url: fingerprint(d.body, min_words) for d in base}
    eligible = [i for i, d in enumerate(base) if prints[d.url].sketch is not None]
    print(f"  {len(base)} distinct files, {len(eligible)} with at least {min_words} words of main text")
    vocab = set()
    for doc in rng.sample(base, min(200, len(base))):
        vocab.update(w for w in fp.page_text(doc.body).split() if w.isalpha() and 3 <= len(w) <= 12)
    vocab = sorted(vocab)

    def copy(kind: str, n: int, i: int, share: float, change: str, body: bytes) -> Doc:
        _, _, host, path = base[i].url.split("/", 3)
        return Doc(f"http://{kind}-mirror.{host}/{path}?copy={n}", body, i, share, change)

    copies = []
    for n, i in enumerate(rng.sample(eligible, min(args.copies, len(eligible)))):
        share, change = NEAR_SHARES[n % len(NEAR_SHARES)], CHANGES[n // len(NEAR_SHARES) % len(CHANGES)]
        copies.append(copy("near", n, i, share, change, mutate(base[i].body, share, change, vocab, rng)))
    for n, i in enumerate(rng.sample(eligible, min(args.far, len(eligible)))):
        share = FAR_SHARES[n % len(FAR_SHARES)]
        copies.append(copy("far", n, i, share, "far", mutate(base[i].body, share, CHANGES[n % 4], vocab, rng)))
    for n, i in enumerate(rng.sample(range(len(base)), min(args.exact, len(base)))):
        copies.append(copy("exact", n, i, 0.0, "exact", base[i].body))
    rng.shuffle(copies)
    prints |= {d.url: fingerprint(d.body, min_words) for d in copies}
    return base, copies, prints


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pages", type=int, default=3000)
    ap.add_argument("--copies", type=int, default=1500)
    ap.add_argument("--far", type=int, default=300)
    ap.add_argument("--exact", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--fill", type=int, default=100_000, help="synthetic pages indexed before the corpus")
    ap.add_argument("--servers", type=int, default=1, help="redis-servers the index is spread over (REDIS_URLS)")
    ap.add_argument("--cluster", action="store_true", help="the index spread over a 3-master Redis Cluster")
    args = ap.parse_args()
    results = Results("near_duplicates")
    rng = random.Random(args.seed)

    from scrapy.utils.test import get_crawler

    from crawler.pipelines.contentseen import ContentSeenPipeline
    from testing.services import project_settings

    settings = project_settings()
    clock = StageClock()

    def fingerprint(body: bytes, min_words: int) -> fp.Fingerprints:
        with clock.patched(fp, STAGES):
            return fp.page_fingerprints(body, min_words)

    print("Corpus:")
    base, copies, prints = corpus(args, rng, fingerprint, settings["CONTENT_SEEN_MIN_WORDS"])
    print(
        f"  {len(copies)} copies: "
        + ", ".join(f"{n} {k}" for k, n in collections.Counter(d.change for d in copies).items())
    )

    crawl = f"bench-nd-{uuid.uuid4().hex[:8]}"
    lookups, lookup_cpu = [], []
    with tempfile.TemporaryDirectory() as tmp:
        servers = Servers(tmp, args.servers, args.cluster)
        try:
            crawler = get_crawler(settings_dict=project_settings(CRAWL_NAME=crawl, **servers.settings))
            pipeline = ContentSeenPipeline.from_crawler(crawler)
            memory0 = servers.figures()[0]
            fill_seconds = fill_index(pipeline, servers.servers[0].client, args.fill, args.seed)

            def checked(docs: list[Doc]) -> tuple[dict, int, list[float]]:
                """url -> verdict of each, and the calls and each server's CPU of these checks."""
                _, calls0, cpu0 = servers.figures()
                verdicts = {}
                for doc in docs:
                    t0, c0 = time.perf_counter(), time.process_time()
                    verdicts[doc.url] = pipeline.check(prints[doc.url], doc.url)
                    lookups.append(time.perf_counter() - t0)
                    lookup_cpu.append(time.process_time() - c0)
                _, calls1, cpu1 = servers.figures()
                return verdicts, calls1 - calls0, [b - a for a, b in zip(cpu0, cpu1, strict=True)]

            base_marks, calls, cpu = checked(base)
            memory = [m - b for m, b in zip(servers.figures()[0], memory0, strict=True)]
            per_key, indexed = servers.key_sizes(crawl)
            copy_marks, more_calls, more_cpu = checked(copies)
            calls, cpu = calls + more_calls, [a + b for a, b in zip(cpu, more_cpu, strict=True)]
        finally:
            for s in servers.servers:
                s.kill()

    body_of = {d.url: d.body for d in [*base, *copies]}
    source_of = {d.url: i for i, d in enumerate(base)} | {d.url: d.source for d in copies}
    near_of = {url: v[1] for url, v in base_marks.items() if v is not None and v[0] == "near"}
    wrong, repeated, missed = [], [], []

    def other_mark(url: str, verdict) -> None:
        """A near mark between two pages that are not copies of one another by the corpus."""
        ratio = similarity(body_of[url], body_of[verdict[1]])
        (repeated if ratio >= 0.9 else wrong).append((ratio, verdict[2], url, verdict[1]))

    for url, verdict in base_marks.items():
        if verdict is not None and verdict[0] == "near":
            other_mark(url, verdict)
    rows = collections.defaultdict(lambda: [0, 0])  # share or change -> [copies, marked near their source]
    exact_ok = 0
    for doc in copies:
        verdict = copy_marks[doc.url]
        if doc.change == "exact":
            exact_ok += verdict is not None and verdict[0] == "exact"
            continue
        near = verdict is not None and verdict[0] == "near"
        # right: its source, another copy of it, or the page its source was marked near
        ok = near and (source_of[verdict[1]] == doc.source or verdict[1] == near_of.get(base[doc.source].url))
        if near and not ok:
            other_mark(doc.url, verdict)
        if not ok and doc.change != "far":
            missed.append((doc.share, doc.change, verdict and verdict[2], doc.url))
        for key in (doc.share, doc.change):
            rows[key][0] += 1
            rows[key][1] += ok
    right = sum(rows[s][1] for s in NEAR_SHARES)
    near_copies = sum(rows[s][0] for s in NEAR_SHARES)
    marks = right + len(wrong) + len(repeated) + sum(rows[s][1] for s in FAR_SHARES)
    precision = (marks - len(wrong)) / marks if marks else 1.0
    recall = right / near_copies if near_copies else 0.0

    print(f"\nNear-duplicate marks (CONTENT_SEEN_RESEMBLANCE = {settings['CONTENT_SEEN_RESEMBLANCE']:.2f}):")
    print(f"  precision {precision:.4f}  ({marks - len(wrong)} right of {marks} near marks; target >= 0.995)")
    print(f"  recall    {recall:.4f}  ({right} of {near_copies} copies with 1-5% of words changed; target >= 0.95)")
    print(f"  {len(repeated)} marks of pages the package repeats (words in common >= 0.9), {len(wrong)} wrong")
    for kind, pairs in (("wrong", wrong), ("repeated", repeated)):
        for ratio, similar, a, b in sorted(pairs)[:8]:
            print(f"    {kind}: {a} ~ {b}: resemblance {similar:.3f}, words in common {ratio:.2f}")
    for share, change, similar, url in sorted(missed)[:10]:
        print(f"    missed: {url}: {share:.0%} changed + {change}; verdict {similar}")
    print(f"  exact copies found: {exact_ok} of {sum(d.change == 'exact' for d in copies)}")
    print(
        "  by share of words changed: "
        + "  ".join(f"{s:.0%}: {rows[s][1]}/{rows[s][0]}" for s in (*NEAR_SHARES, *FAR_SHARES))
    )
    print("  by other change (1-5%):    " + "  ".join(f"{c}: {rows[c][1]}/{rows[c][0]}" for c in CHANGES))
    results.add("precision", precision, "")
    results.add("recall (1-5% of words changed)", recall, "")
    results.add("wrong near marks", len(wrong), "marks")
    results.add("near marks of pages the package repeats", len(repeated), "marks")
    results.add("exact copies found", exact_ok, "pages")

    # the former scheme: a SimHash of the visible text's counted words, Hamming distance <= 3
    old = {}
    for doc in [*base, *copies]:
        words = fp.word_hashes(fp.page_text(doc.body))
        old[doc.url] = fp.simhash(words) if len(words) >= 50 else None
    values = np.array([old[d.url] or 0 for d in base], dtype=np.uint64)
    has = np.array([old[d.url] is not None for d in base])
    close_pairs = 0
    for i in np.flatnonzero(has):
        dist = np.unpackbits((values[i + 1 :] ^ values[i]).view(np.uint8).reshape(-1, 8), axis=1).sum(axis=1)
        close_pairs += int(((dist <= 3) & has[i + 1 :]).sum())
    near_docs = [d for d in copies if d.change in CHANGES]
    pairs = [(old[d.url], old[base[d.source].url]) for d in near_docs]
    old_found = sum(1 for a, b in pairs if a is not None and b is not None and fp.distance(a, b) <= 3)
    print(f"\nThe former scheme (SimHash of the visible text, <= 3 bits): {close_pairs} pairs of distinct pages,")
    print(f"  {old_found} of {len(near_docs)} copies within 3 bits of their source")
    results.add("former scheme: pairs of distinct pages within 3 bits", close_pairs, "pairs")
    results.add("former scheme: 1-5% copies within 3 bits of their source", old_found, "pages")

    n_pages = len(base) + len(copies)
    kb = sum(len(b) for b in body_of.values()) / n_pages / 1000
    per100 = 100 / kb
    cpu_ms = {k: v / n_pages * 1000 for k, v in clock.cpu.items()}
    wall, cpu_here = np.array(lookups) * 1000, np.array(lookup_cpu) * 1000
    sketched = np.array([prints[d.url].sketch is not None for d in [*base, *copies]])
    check_ms = (cpu_ms["words"] + cpu_ms["sketch"] + wall.mean()) * per100
    print(f"\nCost per page ({kb:.0f} KB on average; per 100 KB in brackets):")
    for k, v in cpu_ms.items():
        print(f"  {k:18s} {v:6.3f} ms CPU  ({v * per100:.3f})")
        results.add(f"CPU per 100 KB: {k}", v * per100, "ms")
    p50, p99 = percentile(wall, 0.5), percentile(wall, 0.99)
    print(
        f"  {'lookup (Redis)':18s} {wall.mean():6.3f} ms wall ({wall.mean() * per100:.3f}); p50 {p50:.3f}, p99 {p99:.3f} ms"
    )
    print(
        f"  pages with a sketch: {wall[sketched].mean():.3f} ms wall, {cpu_here[sketched].mean():.3f} ms CPU here; "
        f"the others {wall[~sketched].mean():.3f} ms wall, {cpu_here[~sketched].mean():.3f} ms CPU"
    )
    print(f"  the check with its lookup (words, sketch, lookup): {check_ms:.3f} ms per 100 KB (target <= 2)")
    results.add("lookup wall, p50", p50, "ms")
    results.add("lookup wall, p99", p99, "ms")
    results.add("lookup of a page with a sketch: wall", wall[sketched].mean(), "ms")
    results.add("lookup of a page with a sketch: CPU in the worker", cpu_here[sketched].mean(), "ms")
    results.add("the check with its lookup, per 100 KB", check_ms, "ms")
    results.add(
        "all of it, parse and main text included, per 100 KB", (sum(cpu_ms.values()) + wall.mean()) * per100, "ms"
    )

    per_page = sum(memory) / max(indexed, 1)
    print(f"\nRedis memory on {servers.label}: {per_page:.0f} bytes per indexed page ({indexed:,} pages indexed,")
    print(f"  {args.fill:,} of them synthetic, indexed in {fill_seconds:.1f} s); by key: ", end="")
    print(", ".join(f"{name} {size / max(indexed, 1):.0f}" for name, size in per_key.most_common()))
    print(f"Redis calls a check (the corpus's): {calls / len(lookups):.2f}")
    if len(servers.servers) > 1:
        print("  each server's share of the memory: " + "  ".join(f"{m / max(sum(memory), 1):.0%}" for m in memory))
        print("  and of the Redis CPU of the checks: " + "  ".join(f"{c / max(sum(cpu), 1e-9):.0%}" for c in cpu))
    results.add("Redis memory per indexed page", per_page, "bytes")
    results.add("Redis calls a check", calls / len(lookups), "")
    results.write()


if __name__ == "__main__":
    main()
