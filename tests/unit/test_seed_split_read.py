"""When a seed input is read in two processes (crawler/seeds/split_read.py), and how the two
halves meet: the unit tests (files in a temporary directory, no service). Through ``ingest``
into a real frontier: tests/integration/test_seed_split_read.py."""

import gzip
import threading

from crawler.seeds.files import InputPosition, read_seeds
from crawler.seeds.split_read import SplitRead, _line_start
from crawler.seeds.spool import HostSpool
from crawler.urls import DEFAULT_STRIP_PARAMS, normalizer


def _file(tmp_path, name="seeds.txt", lines=3000):
    path = tmp_path / name
    text = "".join(f"http://h{i % 7}.example/{i}\n" for i in range(1, lines + 1))
    if name.endswith(".gz"):
        path.write_bytes(gzip.compress(text.encode()))
    else:
        path.write_text(text)
    return str(path)


def _never():
    pass


def test_only_one_plain_file_large_enough_is_split(tmp_path):
    norm = normalizer(DEFAULT_STRIP_PARAMS, True)
    big, small = _file(tmp_path), _file(tmp_path, "small.txt", 10)
    assert SplitRead.of([big], 1000, norm, _never) is not None
    assert SplitRead.of([big], 0, norm, _never) is None  # SEED_SPLIT_READ_FROM=0: never
    assert SplitRead.of([small], 1000, norm, _never) is None  # smaller than the setting
    assert SplitRead.of([big, big], 1000, norm, _never) is None  # more than one source
    assert SplitRead.of([_file(tmp_path, "seeds.txt.gz")], 1, norm, _never) is None  # not seekable as read
    assert SplitRead.of(["-"], 1, norm, _never) is None  # standard input
    assert SplitRead.of(["http://a.example/"], 1, norm, _never) is None  # a URL given as a source
    assert SplitRead.of([str(tmp_path / "missing.txt")], 1, norm, _never) is None


def test_the_cut_is_the_start_of_a_line(tmp_path):
    path = _file(tmp_path, lines=100)
    data = open(path, "rb").read()
    with open(path, "rb") as f:
        for at in (0, 5, 200, len(data) // 2):
            cut = _line_start(f.fileno(), at, len(data))
            assert data[cut - 1 : cut] == b"\n" and at < cut and b"\n" not in data[at : cut - 1]
        assert _line_start(f.fileno(), len(data) - 3, len(data)) is None  # (the last line: nothing after it)


def _read_split(tmp_path, path):
    """read ``path`` as ingest does: the first block of URLs held, the spool made and the
    split started, the head read to the cut: (the head's URLs, the split)."""
    norm = normalizer(DEFAULT_STRIP_PARAMS, True)
    split = SplitRead.of([path], 1, norm, _never)
    spool = HostSpool(4, 100, str(tmp_path))
    urls = []
    try:
        for item in read_seeds([path], InputPosition([path]), split):
            urls.append(norm(item.url))
            spool.add(urls[-1], item)
            if len(urls) == 100:
                split.start(spool)
    finally:
        split.close()
        if split.tail is not None:
            spool.adopt(split.tail.parts)
        back = [url for batch in spool.batches(1000) for url, _ in batch]
        spool.close()
    return urls, split, back


def test_the_two_halves_make_the_file_once_each_hosts_in_order(tmp_path):
    path = _file(tmp_path)
    head, split, back = _read_split(tmp_path, path)
    assert split.tail is not None and len(head) + split.tail.lines == 3000 and 1000 < split.tail.lines < 2000
    everything = [f"http://h{i % 7}.example/{i}" for i in range(1, 3001)]
    assert head == everything[: len(head)]  # the head ends where the tail begins
    assert sorted(back) == sorted(everything)
    for h in range(7):  # each host's URLs in the order of the file, across the two halves
        assert [u for u in back if f"//h{h}." in u] == [u for u in everything if f"//h{h}." in u]


def test_not_split_outside_the_main_thread(tmp_path):
    """The second process is a fork: a reading in another thread (a worker's seeds, beside
    its crawl) reads it all itself."""
    path = _file(tmp_path)
    got = []
    reader = threading.Thread(target=lambda: got.append(_read_split(tmp_path, path)))
    reader.start()
    reader.join()
    head, split, back = got[0]
    assert split.tail is None and split.cut is None and len(head) == len(back) == 3000
