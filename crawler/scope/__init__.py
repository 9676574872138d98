"""The crawl's scope: whether a URL belongs to the crawl, and if not, why and what would
let it in. ``addresses.py``: which addresses the network guard lets a worker connect to
(pure); ``scope.py``: the crawl's scope, its allowed domains and prefixes, its crawl
rules and its guard, as one value (pure); ``published.py``: that value in the crawl's
Redis, where the workers write it and ``scrapy submit`` reads it."""
