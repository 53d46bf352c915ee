"""Profiles and synthetic corpora shared by benchmarks/certified.py and
benchmarks/certified_corpora.py (run them as `python benchmarks/NAME.py`)."""

from __future__ import annotations

import numpy as np

from bucketopt.cost.costmodel import load_profile

STORY = load_profile("rtx-pro-6000-blackwell")
# the shipped profile, a small-alpha one and a large-alpha one
PROFILES = {
    "shipped (alpha 0.1)": "rtx-pro-6000-blackwell",
    "alpha 0.01, gamma x10": dict(alpha=0.01, beta=STORY.beta, gamma=10 * STORY.gamma),
    "alpha 0.5, gamma 0": dict(alpha=0.5, beta=STORY.beta, gamma=0.0),
}
SEEDS = {"chat": 1, "dialogue": 2, "news": 3, "code4M": 4, "code32k": 5}


def corpus(name):
    """(lengths, token budget) of one corpus: chat (1M samples, lognormal up to 32,768 tokens,
    T = 65,536), dialogue (500,000, two modes up to 16,384, T = 32,768), news (300,000, gamma up
    to 8,192, T = 65,536), code32k (300,000 source-code-like lengths cut at 32,768,
    T = 262,144) or code4M (200,000 up to 4M tokens, 37,477 distinct, T = 4M)."""
    rng = np.random.default_rng(SEEDS[name])
    if name == "chat":
        x, budget = np.clip(np.rint(rng.lognormal(5.5, 1.0, 1_000_000)), 4, 32_768), 65_536
    elif name == "dialogue":
        short, long = rng.lognormal(4.0, 0.6, 250_000), rng.lognormal(6.5, 0.8, 250_000)
        x, budget = np.clip(np.rint(np.r_[short, long]), 2, 16_384), 32_768
    elif name == "news":
        x, budget = np.clip(np.rint(rng.gamma(3.0, 250, 300_000)), 20, 8_192), 65_536
    elif name == "code4M":
        x, budget = np.clip(np.rint(rng.lognormal(7.5, 2.0, 200_000)), 5, 4_000_000), 4_194_304
    else:
        x, budget = np.clip(np.rint(rng.lognormal(7.0, 1.9, 300_000)), 5, 32_768), 262_144
    return x.astype(np.int64), budget
