"""Exact token counts from the BPE files shipped with the service, with no network."""

from __future__ import annotations

import socket

import pytest
import tiktoken.registry

from app import tokens


def test_counts_match_tiktoken_reference_values() -> None:
    o200k = tokens.token_counter("o200k_base")
    cl100k = tokens.token_counter("cl100k_base")
    assert [o200k("hello world"), o200k(""), o200k("<|endoftext|>")] == [2, 0, 7]
    assert [cl100k("hello world"), cl100k("tiktoken is great!")] == [2, 6]


def test_encodings_load_without_network(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("token counting tried to reach the network")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    # Forget every in-memory and on-disk copy so the shipped files are read again.
    monkeypatch.setattr(tiktoken.registry, "ENCODINGS", {})
    tokens.get_encoding.cache_clear()
    for cached in tokens.BPE_CACHE_DIR.glob("*"):
        cached.unlink()
    assert tokens.get_encoding("o200k_base").encode("hello world") == [24912, 2375]
    assert tokens.get_encoding("cl100k_base").n_vocab == 100277
    tokens.get_encoding.cache_clear()


def test_unknown_encoding_is_refused() -> None:
    with pytest.raises(tokens.UnknownEncoding, match="r50k_base"):
        tokens.get_encoding("r50k_base")
