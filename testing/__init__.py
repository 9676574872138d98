"""What the tests and the benchmarks share: crawl workers and commands as subprocesses
(``workers``), servers on loopback (``servers``: ports, redis-servers, clusters), the
shared stores (``stores``: Cassandra, S3), what a test needs that a machine may lack
(``services``), the frontier seen from a test (``frontiers``), sites (``sites``), figures
(``sampling``) and certificates (``tls``). Everything starts on 127.0.0.1 only and is
bounded in time."""
