"""The benchmarks' sentences: 8 words from a 1,000-word vocabulary, the same pool in
every run (seed 0).  Imports nothing of Squall: a plain-Python baseline uses it too."""

from __future__ import annotations

import random

VOCAB = [f"word{i}" for i in range(1000)]


def sentence_pool(size: int = 20_000) -> list[str]:
    rng = random.Random(0)
    return [" ".join(rng.choices(VOCAB, k=8)) for _ in range(size)]
