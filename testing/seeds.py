"""A seed file of every kind of line (comments, priorities, duplicates, bad lines), and its\nitems as the seed reader gives them."""

from __future__ import annotations

from crawler.seeds.files import read_seeds

SEEDS = """\
# seeds for the tests
http://a.example/1
https://A.Example/2?utm_source=x   5   # high priority, tracking parameter stripped

http://a.example/1                      # the same URL again
not a url
http://b.example/3  high
http://b.example/4  1  2
   # an indented comment
http://b.example/5#frag  -2
http://c.example/6\t0
"""


def items_of(path):
    return [tuple(i) for i in read_seeds(path)]
