"""Which addresses share a budget (AddressClasses), a politeness key's host (key_host), and
the DNS servers' spelling (DNS_NAMESERVERS), pure."""

import pytest

from crawler.frontier.addresses import AddressClasses, _nameserver
from crawler.frontier.hosts import key_host, politeness_key


@pytest.mark.parametrize(
    ("v4", "v6", "address", "expected"),
    [
        (32, 64, "192.0.2.7", "192.0.2.7"),
        (24, 64, "192.0.2.7", "192.0.2.0/24"),
        (32, 64, "2001:db8:1:2:3:4:5:6", "2001:db8:1:2::/64"),
        (32, 128, "2001:db8::6", "2001:db8::6"),
        (32, 48, "2001:db8:1:2::6", "2001:db8:1::/48"),
    ],
)
def test_an_address_class_is_its_network_of_the_prefix_set(v4, v6, address, expected):
    assert AddressClasses(v4, v6).class_of(address) == expected


def test_two_addresses_of_one_24_share_a_class_and_not_of_another():
    classes = AddressClasses(v4_prefix=24)
    assert classes.class_of("198.51.100.1") == classes.class_of("198.51.100.254")
    assert classes.class_of("198.51.100.1") != classes.class_of("198.51.101.1")


@pytest.mark.parametrize(
    ("url", "host"),
    [
        ("http://a.example/", "a.example"),
        ("http://a.example:8080/x", "a.example"),
        ("http://127.0.0.1:9/", "127.0.0.1"),
        ("http://[::1]:8080/", "::1"),
    ],
)
def test_the_host_resolved_is_the_politeness_keys_without_its_port(url, host):
    assert key_host(politeness_key(url)) == host


@pytest.mark.parametrize(
    ("spec", "address", "port"),
    [
        ("127.0.0.1", "127.0.0.1", 53),
        ("127.0.0.1:5353", "127.0.0.1", 5353),
        ("[::1]:5353", "::1", 5353),
        ("::1", "::1", 53),
    ],
)
def test_a_dns_server_is_an_address_and_an_optional_port(spec, address, port):
    server = _nameserver(spec)
    assert (server.address, server.port) == (address, port)
