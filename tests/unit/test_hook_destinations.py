"""Which addresses a hook may reach, and the early refusal of a session's literal addresses."""

from __future__ import annotations

from ipaddress import ip_address, ip_network

import pytest

from app.domain.errors import InvalidInput
from app.hooks import check_destinations, describe_refusal, is_permitted

REFUSED = [
    "10.1.2.3",  # RFC 1918
    "172.16.0.1",
    "192.168.1.1",
    "100.64.0.1",  # shared (CGNAT)
    "127.0.0.1",  # loopback
    "169.254.169.254",  # link-local: the cloud metadata address
    "0.0.0.0",  # unspecified
    "224.0.0.1",  # multicast
    "239.255.255.250",
    "240.0.0.1",  # reserved
    "255.255.255.255",
    "192.0.2.1",  # documentation
    "198.18.0.1",  # benchmarking
    "::1",
    "::",
    "fe80::1",
    "fc00::1",  # ULA
    "fd12:3456::1",
    "ff02::1",  # multicast
    "::ffff:127.0.0.1",  # loopback, mapped into IPv6
    "::ffff:169.254.169.254",
    "64:ff9b::7f00:1",  # reserved
    "2001:db8::1",  # documentation
]
PUBLIC = ["8.8.8.8", "1.1.1.1", "93.184.216.34", "2606:4700:4700::1111", "::ffff:8.8.8.8"]


def test_only_public_unicast_addresses_are_permitted_by_default() -> None:
    verdicts = {address: is_permitted(ip_address(address), allowed=[]) for address in REFUSED}
    verdicts |= {address: is_permitted(ip_address(address), allowed=[]) for address in PUBLIC}
    assert verdicts == dict.fromkeys(REFUSED, False) | dict.fromkeys(PUBLIC, True)


def test_an_allowed_network_is_permitted_and_nothing_beyond_it() -> None:
    allowed = [ip_network("10.20.0.0/16"), ip_network("::1/128")]
    addresses = ["10.20.3.4", "10.21.0.1", "::1", "127.0.0.1", "::ffff:10.20.0.9", "8.8.8.8"]
    assert {a: is_permitted(ip_address(a), allowed=allowed) for a in addresses} == {
        "10.20.3.4": True,
        "10.21.0.1": False,
        "::1": True,
        "127.0.0.1": False,
        "::ffff:10.20.0.9": True,
        "8.8.8.8": True,
    }


def test_a_literal_refused_address_is_named_and_a_name_is_left_to_the_call() -> None:
    urls = {
        "pre_compact": "http://169.254.169.254/latest/meta-data",
        "session_end": "http://[::1]:8080/end",
    }
    with pytest.raises(InvalidInput) as refused:
        check_destinations(urls, allowed=[])
    assert refused.value.details == [
        {
            "loc": ["body", "hooks", "pre_compact"],
            "msg": "169.254.169.254 is not a public address (see CTX_HOOK_ALLOWED_NETWORKS)",
        },
        {
            "loc": ["body", "hooks", "session_end"],
            "msg": "::1 is not a public address (see CTX_HOOK_ALLOWED_NETWORKS)",
        },
    ]
    check_destinations({"pre_compact": "http://localhost/", "session_end": None}, allowed=[])
    check_destinations({"pre_compact": "http://[::1]/"}, allowed=[ip_network("::1/128")])


def test_a_refusal_names_the_kind_of_address_and_only_addresses_the_same_everywhere() -> None:
    """Loopback and unspecified addresses are named (and a loopback one with the setting that
    allows it); what a name resolves to inside the service's network is named by kind only."""
    rule = "; hooks reach public addresses and the networks in CTX_HOOK_ALLOWED_NETWORKS only"
    cases = {
        "localhost": ["127.0.0.1", "::1"],
        "mapped.test": ["::ffff:127.0.0.2"],
        "db.internal": ["10.1.2.3", "fd12:3456::1", "100.64.0.1"],
        "metadata.internal": ["169.254.169.254"],
        "mixed.test": ["192.168.1.1", "127.0.0.1", "fe80::1", "0.0.0.0"],
        "odd.test": ["240.0.0.1", "192.0.2.1", "ff02::1"],
    }
    described = {
        host: describe_refusal(host, [ip_address(a) for a in addresses])
        for host, addresses in cases.items()
    }
    assert described == {
        "localhost": "refused destination: localhost resolves to 127.0.0.1 and ::1, loopback"
        f' addresses{rule} (["127.0.0.1/32"] allows it)',
        "mapped.test": "refused destination: mapped.test resolves to 127.0.0.2, a loopback"
        f' address{rule} (["127.0.0.2/32"] allows it)',
        "db.internal": f"refused destination: db.internal resolves to private addresses{rule}",
        "metadata.internal": "refused destination: metadata.internal resolves to a link-local"
        f" address{rule}",
        "mixed.test": "refused destination: mixed.test resolves to a private address, and"
        " 127.0.0.1, a loopback address, and a link-local address, and 0.0.0.0, an unspecified"
        f' address{rule} (["127.0.0.1/32"] allows it)',
        "odd.test": "refused destination: odd.test resolves to a reserved address, and a"
        f" special-purpose address, and a multicast address{rule}",
    }
