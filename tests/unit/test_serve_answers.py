"""scrapy serve's JSON answers (crawler/serve/server.py ``json_answer``): what the json
module would give, for the values a record and the frontier's numbers hold."""

from __future__ import annotations

import json
from pathlib import Path

from crawler.serve.server import json_answer


def test_a_json_answer_reads_back_as_the_json_module_would_write_it():
    record = {
        "url": "http://example.com/é",
        "status": 200,
        "simhash": 2**64 - 1,  # unsigned 64 bits
        "resemblance": 0.875,
        "metadata": {"title": "Ünïcode ✓"},
        "outlinks": [{"url": "http://example.com/a", "text": "a", "nofollow": False}],
        "redirect_chain": [],
        "archive": None,
    }
    numbers = {"by_level": {0: 5, 1: 2}, "where": Path("/tmp/crawl")}  # a number as a key; no JSON type
    echoed = {"results": [{"url": "http://a.example/\ud800", "record": None, "error": "not a valid URL"}]}
    for obj in (record, numbers, echoed):
        answer = json_answer(obj)
        assert answer.content_type == "application/json"
        assert json.loads(answer.body) == json.loads(json.dumps(obj, default=str))
