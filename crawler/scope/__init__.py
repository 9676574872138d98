"""The crawl's scope: whether a URL belongs to the crawl, and if not, why and what would let
it in, all pure: ``addresses.py``, which addresses the network guard lets a worker connect to;
``rules.py``, the crawl rules file (CRAWL_RULES); ``traps.py``, the trap guards; ``scope.py``,
the crawl's scope as one value (allowed domains and prefixes, rules, guard). The frontier
applies the rules and the guards at admission and keeps the published scope
(crawler/frontier/submit.py); the spider applies the domains and prefixes to links."""
