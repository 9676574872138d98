"""``scrapy submit URL [URL ...]``: put URLs at the top of a running crawl.

    scrapy submit https://example.com/news               into CRAWL_NAME (settings, -s, env)
    scrapy submit --crawl news --force https://example.com/
    tail -f urls.txt | scrapy submit -                    one URL a line from standard input

Each URL is normalized as the crawler does (URL_STRIP_PARAMS / URL_SORT_QUERY) and put
through the frontier's ``put`` to the head of its host's queue (crawler/frontier/submit.py):
a worker fetches it at its host's next turn. URL-seen, the trap guards and the per-host
limit apply; ``--force`` passes URL-seen and the workers' fetch policy
(FETCH_POLICY_MAX_AGE: a URL fetched more recently is otherwise not fetched again).
Standard input is read a line at a time and each line submitted at once (blank lines and
``#`` comments skipped).

A URL is held to the crawl's scope first: the scope its workers published
(crawler/frontier/submit.py: their allowed domains and prefixes, crawl rules and network
guard), or, before any worker ran, this command's own settings. One outside it is not put:
``refused out-of-scope URL`` or ``refused private address URL`` (an address the network
guard refuses, written in the URL), with why and the argument or setting that would let
it in.

Output: one line per URL on stdout, ``added URL``, ``promoted URL`` (queued already: moved
to the head of its host's queue), ``seen URL`` (fetched within FETCH_POLICY_MAX_AGE by the
UrlStore, or being fetched), ``invalid URL``, ``refused <reason> URL: ...``,
``trap:<guard> URL`` or ``host_full URL``; then a summary line.
Exit status: 0 when every URL was submitted (whatever became of it); 1 when Redis is
unreachable, with a one-line message on stderr; 2 when a URL was refused by the crawl's
scope (the others are submitted), for an invalid setting, no URL, or a crawl that does not
exist (named with the crawls there are: submit adds to a crawl, it does not start one).
"""

from __future__ import annotations

import sys

from redis.exceptions import RedisError
from scrapy.commands import ScrapyCommand
from scrapy.exceptions import UsageError

from crawler.commands.frontier import no_such_crawl
from crawler.commands.seed import _close, _reason, _where
from crawler.config.validation import exit_if_invalid
from crawler.freshness.policy import FetchPolicy
from crawler.frontier.connection import crawl_exists, frontier_from_settings
from crawler.frontier.keys import Keys
from crawler.frontier.submit import Submission, entry, submit, use_published_scope
from crawler.observe.report import count
from crawler.scope.scope import CrawlScope
from crawler.seeds.files import STDIN
from crawler.urls import InvalidURL, url_options

REFUSED = "refused"  # a URL outside the crawl's scope: not submitted


class Command(ScrapyCommand):
    requires_project = True
    requires_crawler_process = False  # no crawl, no reactor: plain Redis calls
    default_settings = {"LOG_ENABLED": False}

    def syntax(self):
        return "[options] URL [URL ...]  (or - for standard input)"

    def short_desc(self):
        return "Put URLs at the top of a running crawl (fetched at their host's next turn)"

    def long_desc(self):
        return (
            "Put URLs into the frontier of a crawl (CRAWL_NAME, or --crawl) ahead of everything queued: "
            "each is fetched at its host's next turn. - reads URLs from standard input, one a line, each "
            "submitted as it is read. A URL the crawl has queued already jumps to the head of its host's "
            "queue (promoted). --force fetches a URL even if the crawl has seen it or fetched it "
            "within FETCH_POLICY_MAX_AGE. A URL outside the crawl's scope (the allowed domains and prefixes, "
            "crawl rules and network guard its workers run with) is refused, with what would let it in. "
            "Prints one line per URL (added, promoted, seen, invalid, refused, trap:..., host_full) and a "
            "summary; exits 1 if Redis is unreachable, 2 if a URL was refused."
        )

    def add_options(self, parser):
        super().add_options(parser)
        group = parser  # beside -h, before the global options: what a user reads first
        group.add_argument("--crawl", metavar="NAME", help="crawl name (default CRAWL_NAME)")
        group.add_argument(
            "--force", action="store_true", help="fetch even if seen, or fetched within FETCH_POLICY_MAX_AGE"
        )

    def process_options(self, args, opts):
        super().process_options(args, opts)
        if opts.crawl:
            self.settings.set("CRAWL_NAME", opts.crawl, priority="cmdline")
        exit_if_invalid(self.settings, "submit")  # before anything starts or logs

    def run(self, args, opts):
        if not args:
            raise UsageError("give at least one URL (- for standard input)")
        unknown = [a for a in args if a.startswith("-") and a != STDIN]
        if unknown:
            raise UsageError(f"unrecognized arguments: {' '.join(unknown)}")
        settings = self.settings
        try:
            Keys(settings.get("CRAWL_NAME"))  # a bad crawl name: before any embedded Redis starts
        except ValueError as exc:
            return self._fail(f"submit: {exc}")
        client = None
        try:
            if not crawl_exists(settings):  # a mistyped name: not a new crawl
                print(no_such_crawl(settings, "submit"), file=sys.stderr, flush=True)
                self.exitcode = 2
                return
            frontier = frontier_from_settings(settings)
            client = frontier.redis
            client.ping()
        except ValueError as exc:  # a bad frontier setting
            _close(client)
            return self._fail(f"submit: {exc}")
        except Exception as exc:  # Redis unreachable, embedded Redis failed to start
            _close(client)
            return self._fail(f"submit: cannot connect to Redis ({_where(settings)}): {_reason(exc)}")
        options = url_options(settings)
        counts: dict[str, int] = {}
        policy = FetchPolicy.reader(settings)  # what was fetched: a seen URL not fetched is promoted
        fetched = policy.recent if policy is not None else None
        try:
            scope = use_published_scope(frontier)
            for batch in _batches(args):
                kept = []
                for given in batch:
                    refusal = _refusal(scope, given, options)
                    if refusal is None:
                        kept.append(Submission(given, opts.force))
                        continue
                    counts[REFUSED] = counts.get(REFUSED, 0) + 1
                    print(f"{REFUSED} {refusal.words} {given}: {refusal}", flush=True)
                for url, status in submit(frontier, kept, options, fetched):
                    counts[status] = counts.get(status, 0) + 1
                    print(f"{status} {url}", flush=True)
        except RedisError as exc:
            self._summary(counts, "before the Redis error")
            return self._fail(f"submit: Redis error ({_where(settings)}): {_reason(exc)}")
        except KeyboardInterrupt:
            self._summary(counts, "interrupted")
            self.exitcode = 130
            return
        finally:
            _close(client)
            if policy is not None:
                policy.close()
        self._summary(counts)
        if counts.get(REFUSED):
            self.exitcode = 2

    def _summary(self, counts: dict[str, int], note: str = "") -> None:
        total = sum(counts.values())
        parts = ", ".join(f"{n} {status}" for status, n in sorted(counts.items(), key=lambda kv: -kv[1]))
        line = f"{count(total, 'URL')} submitted" + (f": {parts}" if parts else "")
        print(f"{line} [{note}]" if note else line, flush=True)

    def _fail(self, message: str) -> None:
        print(message, file=sys.stderr, flush=True)
        self.exitcode = 1


def _refusal(scope: CrawlScope, given: str, options: dict):
    """Why the crawl's scope refuses the URL ``given`` (None: it does not, or the URL is
    invalid, which ``submit`` says)."""
    try:
        url = entry(Submission(given), options).url
    except InvalidURL:
        return None
    return scope.refusal(url)


def _batches(args: list[str]):
    """The URLs given as arguments (one batch), then those of standard input for ``-``
    (a batch per line, so that each is submitted as soon as it is read)."""
    urls = [a for a in args if a != STDIN]
    if urls:
        yield urls
    if STDIN in args:
        for line in sys.stdin:
            text = line.strip()
            if text and not text.startswith("#"):
                yield [text]
