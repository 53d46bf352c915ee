"""The solver settings a test runs through the CLI and through Python, spelled both ways."""

from __future__ import annotations


def cli_flags(budget, pad, profile, gpus):
    """The flags of a token budget, a padding and, with a profile, the GPUs."""
    out = ["--token-budget", str(budget), "--pad", pad]
    if profile is not None:
        out += ["--profile", profile, "--gpus", str(gpus)]
    return out


def python_kwargs(budget, pad, profile, gpus):
    """The same settings as keyword arguments of solve and the sampler."""
    out = dict(token_budget=budget, pad=pad)
    if profile is not None:
        out.update(profile=profile, world_size=gpus)
    return out
