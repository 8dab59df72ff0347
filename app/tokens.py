"""Exact token counting with tiktoken, loaded offline from the BPE files shipped in `app/data`.

The gzip-compressed rank files are verified against their SHA-256 and materialised into a
project-owned cache directory in the layout tiktoken reads (`TIKTOKEN_CACHE_DIR`), so
tiktoken never touches the network and re-verifies the hash itself on load.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import tempfile
import threading
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Literal, get_args

import tiktoken
import tiktoken.model
from cachetools import LRUCache

from app.domain.items import CountTokens

Encoding = Literal["o200k_base", "cl100k_base"]
ENCODINGS: tuple[Encoding, ...] = get_args(Encoding)
BPE_CACHE_DIR = Path(tempfile.gettempdir()) / "contextd-tiktoken"
_BPE_URL = "https://openaipublic.blob.core.windows.net/encodings/{name}.tiktoken"


class UnknownEncoding(ValueError):
    """The requested encoding is not one the service ships."""


def _expected_hashes() -> dict[str, str]:
    sums = resources.files("app.data").joinpath("SHA256SUMS.uncompressed").read_text()
    return {
        name.removesuffix(".tiktoken"): digest for digest, name in map(str.split, sums.splitlines())
    }


def _materialise_bpe(name: str, cache_dir: Path) -> None:
    target = cache_dir / hashlib.sha1(_BPE_URL.format(name=name).encode()).hexdigest()
    expected = _expected_hashes()[name]
    if target.exists() and hashlib.sha256(target.read_bytes()).hexdigest() == expected:
        return
    packed = resources.files("app.data").joinpath(f"{name}.tiktoken.gz").read_bytes()
    ranks = gzip.decompress(packed)
    if hashlib.sha256(ranks).hexdigest() != expected:
        raise RuntimeError(f"BPE file for {name} does not match its SHA-256 {expected}")
    cache_dir.mkdir(parents=True, exist_ok=True)
    # Write then rename, so a concurrent worker never reads a half-written file.
    with tempfile.NamedTemporaryFile(dir=cache_dir, delete=False) as handle:
        handle.write(ranks)
    os.replace(handle.name, target)


_load_lock = threading.Lock()


@cache
def get_encoding(name: str) -> tiktoken.Encoding:
    """The tiktoken encoding `name`, loaded from the shipped BPE data (never downloaded)."""
    if name not in ENCODINGS:
        raise UnknownEncoding(f"unknown encoding {name!r}; available: {', '.join(ENCODINGS)}")
    with _load_lock:
        _materialise_bpe(name, BPE_CACHE_DIR)
        os.environ["TIKTOKEN_CACHE_DIR"] = str(BPE_CACHE_DIR)
        return tiktoken.get_encoding(name)


@cache
def token_counter(name: str, *, cache_entries: int = 100_000) -> CountTokens:
    """A counter for `name` memoised by content hash: repeated texts are counted once.

    Keys are BLAKE2 digests, not the texts, so megabyte tool outputs are not kept alive.
    """
    encoding = get_encoding(name)
    memo: LRUCache[bytes, int] = LRUCache(maxsize=cache_entries)
    lock = threading.Lock()

    def count_tokens(text: str) -> int:
        if not text:
            return 0
        key = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()
        with lock:
            cached = memo.get(key)
        if cached is not None:
            return cached
        count = len(encoding.encode(text, disallowed_special=()))
        with lock:
            memo[key] = count
        return count

    return count_tokens


def model_encoding(model: str) -> str | None:
    """The encoding tiktoken maps an OpenAI model name to (by its own table and prefixes);
    None for a name it does not know. A lookup only: nothing is loaded."""
    try:
        return tiktoken.model.encoding_name_for_model(model)
    except KeyError:
        return None
