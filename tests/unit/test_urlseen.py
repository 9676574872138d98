"""The URL-seen filter's sizing and hashes, with plain values (no Redis)."""

import pytest

from crawler.frontier.urlseen import (
    HASH_SPACE,
    INTSET_MOST,
    SET_BUCKET_MOST,
    SETS,
    STRINGS,
    SeenLayout,
    generation,
    hashes_text,
    kind_for,
    planned_generations,
    url_hashes,
)


def test_planned_generations_hold_a_hundred_times_the_capacity():
    assert planned_generations(4) == 5  # 1 + 4 + 16 + 64 + 256 >= 100 > 1 + 4 + 16 + 64
    assert planned_generations(2) == 7  # 1 + 2 + ... + 64 = 127
    assert planned_generations(16) == 3


@pytest.mark.parametrize("growth", [2, 3, 4, 16])
@pytest.mark.parametrize("error_rate", [1e-7, 1e-6, 1e-3])
def test_the_error_shares_add_up_to_less_than_the_rate_however_far_it_grows(growth, error_rate):
    layout = SeenLayout(1_000_000, error_rate, growth)
    gens = layout.generations(12)  # 2**11 to 16**11 times the capacity
    assert sum(g.error_rate for g in gens) < error_rate
    for g in gens:  # a full generation keeps its share, down to one URL a bucket
        assert g.false_positive_rate(g.capacity) <= max(g.error_rate, 1 / HASH_SPACE) * (1 + 1e-9)
    for g in gens[: planned_generations(growth)]:
        assert g.false_positive_rate(g.capacity) <= g.error_rate * (1 + 1e-9)
    assert [g.capacity for g in gens[:3]] == [1_000_000, 1_000_000 * growth, 1_000_000 * growth**2]


def test_planned_generations_share_equally_then_halve():
    shares = [generation(10**6, 1e-6, i, 4).error_rate for i in range(8)]
    assert shares[:5] == [pytest.approx(1e-6 / 6)] * 5
    assert shares[5:] == [pytest.approx(1e-6 / 12), pytest.approx(1e-6 / 24), pytest.approx(1e-6 / 48)]


def test_buckets_are_large_enough_to_amortize_their_keys():
    g = generation(1_000_000, 1e-6, 0, 4, STRINGS)
    per_bucket = g.capacity / g.buckets
    assert 700 <= per_bucket <= 1e-6 / 6 * HASH_SPACE  # ~715 fingerprints, 2.9 KB a bucket when full


@pytest.mark.parametrize("error_rate", [1e-6, 1e-3])
def test_a_sets_bucket_stays_an_intset_when_its_generation_is_full(error_rate):
    # Redis keeps a set of at most 512 integers as 4-byte integers: a full bucket holds 384
    # on average, six standard deviations (Poisson) below 512
    gens = SeenLayout(1_000_000, error_rate, 4).generations(7)  # (the last two past the planned five)
    assert SET_BUCKET_MOST - 1 <= gens[0].capacity / gens[0].buckets <= SET_BUCKET_MOST
    for g in gens:
        per_bucket = g.capacity / g.buckets
        assert per_bucket <= SET_BUCKET_MOST
        assert per_bucket + 6 * per_bucket**0.5 < INTSET_MOST
        assert g.false_positive_rate(g.capacity) <= g.error_rate  # (smaller buckets: a lower rate)


def test_a_layout_is_spelled_with_its_kind_and_read_back():
    sets = SeenLayout(1000, 1e-6, 4)
    assert sets.kind == SETS and sets.spelled() == "1000 1e-06 4 sets"
    assert SeenLayout.parse(sets.spelled()).spelled() == sets.spelled()
    old = SeenLayout.parse("1000 1e-06 4")  # as crawls recorded it before sets
    assert old.kind == STRINGS and old.spelled() == "1000 1e-06 4"
    assert old.generation(0).buckets < sets.generation(0).buckets or sets.generation(0).buckets == 1
    assert sets.of_kind(STRINGS).spelled() == "1000 1e-06 4" and old.of_kind(SETS).spelled() == sets.spelled()
    with pytest.raises(ValueError):
        SeenLayout(1000, 1e-6, 4, "lists")


def test_new_crawls_take_sets_where_the_server_keeps_them_small():
    assert kind_for(None) == SETS and kind_for(512) == SETS and kind_for(4096) == SETS
    assert kind_for(511) == STRINGS and kind_for(0) == STRINGS


def test_a_tiny_capacity_has_one_bucket():
    g = generation(10, 0.4, 0, 4)
    assert g.buckets == 1 and g.false_positive_rate(10) == 10 / HASH_SPACE


@pytest.mark.parametrize("capacity, error_rate, growth", [(0, 1e-6, 4), (10, 0, 4), (10, 1, 4), (10, 1e-6, 1)])
def test_bad_parameters_are_refused(capacity, error_rate, growth):
    with pytest.raises(ValueError):
        generation(capacity, error_rate, 0, growth)


def test_url_hashes_are_two_stable_32_bit_numbers():
    h, f = url_hashes("http://a.example/")
    assert (h, f) == url_hashes("http://a.example/")
    assert 0 <= h < HASH_SPACE and 0 <= f < HASH_SPACE
    assert url_hashes("http://a.example/x") != (h, f)
    hashes = {url_hashes(f"http://a.example/{i}") for i in range(10_000)}
    assert len(hashes) == 10_000


def test_url_hashes_are_pybloom_lives():
    # the filters already in Redis hold pybloom-live's hashes: url_hashes computes them in one call
    from pybloom_live.pybloom import make_hashfuncs

    pybloom = make_hashfuncs(2, HASH_SPACE)[0]
    for url in ["http://a.example/", "https://www.site1.com/news/2024.html?id=3", "http://\u00e9.example/\u00e9", ""]:
        assert url_hashes(url) == tuple(pybloom(url))
        h, f = pybloom(url)
        # each generation's bucket, then the fingerprint signed (4 bytes in an intset)
        assert hashes_text(url, (1000,)) == f"{h % 1000} {f - 2**31}"
        assert hashes_text(url, (1000, 7, 2**32)) == f"{h % 1000},{h % 7},{h} {f - 2**31}"
        assert -(2**31) <= f - 2**31 < 2**31
    for i in range(2000):
        assert url_hashes(f"http://h{i}.example/p/{i * 7919}") == tuple(pybloom(f"http://h{i}.example/p/{i * 7919}"))


def test_report_of_the_generations():
    layout = SeenLayout(100, 1e-6, 4)
    report = layout.report([100, 200])
    assert report["generations"] == 2 and report["urls"] == 300 and report["bytes"] == 1200
    assert report["fill"] == [1.0, 0.5] and report["kind"] == SETS
    assert SeenLayout.parse("100 1e-06 4").report([1])["kind"] == STRINGS
    assert 0 < report["false_positive_rate"] <= 1e-6
