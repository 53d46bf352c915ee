"""NeMo reads bucketopt's 2-D export: NeMo's own bucket selection (``find_smallest_bucket`` and
``FixedBucketBatchSizeConstraint2D`` from the nemo-toolkit 3.0.0 wheel, which .ci/run downloads
to .ci/wheels; its sampling module needs lhotse and numpy, and one NeMo text module stubbed here)
puts every sample where bucketopt assigned it. NeMo's estimator (bucketopt.pairs.nemo) leaves
samples out; bucketopt's plans of the same shape never do, with no more padding.
"""

from __future__ import annotations

import json
import os
import sys
import types
import zipfile
from pathlib import Path

import numpy as np
import pytest

import bucketopt
from bucketopt.cli import main
from bucketopt.pairs import assign_bins
from bucketopt.pairs.nemo import cover_all, fits_grid, max_tps_of, nemo_estimate_bins
from bucketopt.pairs.synthetic import SHAPES, paired_lengths

from .conftest import in_ci

ROOT = Path(__file__).resolve().parent.parent
SAMPLING = "nemo/collections/common/data/lhotse/sampling.py"


def _wheel() -> Path | None:
    given = os.environ.get("BUCKETOPT_NEMO_WHEEL")
    if given:
        return Path(given)
    found = sorted((ROOT / ".ci" / "wheels").glob("nemo_toolkit-3.0.0-*.whl"))
    return found[0] if found else None


@pytest.fixture(scope="module")
def nemo_sampling():
    """NeMo's sampling module, loaded from the wheel with its one NeMo import stubbed."""
    pytest.importorskip("lhotse")
    wheel = _wheel()
    if wheel is None or not wheel.is_file():
        reason = ("the nemo-toolkit 3.0.0 wheel is not in .ci/wheels (.ci/run downloads it: "
                  "pip download nemo-toolkit==3.0.0 --no-deps -d .ci/wheels)")
        if in_ci():
            pytest.fail(f"CI: {reason}")
        pytest.skip(reason)
    source = zipfile.ZipFile(wheel).read(SAMPLING).decode()
    names = ["nemo", "nemo.collections", "nemo.collections.common",
             "nemo.collections.common.data", "nemo.collections.common.data.lhotse",
             "nemo.collections.common.data.lhotse.text_adapters"]
    saved = {name: sys.modules.get(name) for name in names}
    for name in names:
        sys.modules[name] = types.ModuleType(name)
    adapters = sys.modules[names[-1]]
    adapters.Formattable = type("Formattable", (), {})
    adapters.NeMoMultimodalConversation = type("NeMoMultimodalConversation", (), {})
    module = types.ModuleType("nemo_sampling_under_test")
    saved[module.__name__] = None
    sys.modules[module.__name__] = module  # dataclasses look their module up while defined
    try:
        exec(compile(source, SAMPLING, "exec"), module.__dict__)
    finally:
        for name, old in saved.items():
            if old is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = old
    return module


def _nemo_index(nemo, bins, a, b, max_tps=None):
    constraint = nemo.FixedBucketBatchSizeConstraint2D(
        max_seq_len_buckets=[list(x) for x in bins], batch_sizes=[1] * len(bins),
        max_ratio=max_tps)
    got = constraint.select_bucket(constraint.max_seq_len_buckets, example_len=(int(a), int(b)))
    return -1 if got is None else int(got)


def _export_lines(capsys, args):
    assert main(args) == 0
    out = capsys.readouterr().out
    values = dict(line.split("=", 1) for line in out.strip().splitlines())
    return {key: json.loads(value) for key, value in values.items()}


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("how", [["-k", "12"], ["--grid", "6x2"], ["--grid", "30x2"]])
def test_nemo_selects_the_bin_bucketopt_assigned(nemo_sampling, tmp_path, capsys, shape, how):
    pairs = paired_lengths(shape, 1500, seed=7)
    path = tmp_path / "pairs.npy"
    np.save(path, pairs)
    budget = int(4 * pairs.sum(axis=1).max())
    keys = _export_lines(capsys, ["export", "--lens", str(path), "--format", "nemo",
                                  "--token-budget", str(budget), "--max-tps", *how])
    bins = keys["bucket_duration_bins"]
    assert len(keys["bucket_batch_size"]) == len(bins) == len(keys["max_tps"])
    ours = assign_bins(pairs[:, 0], pairs[:, 1], np.array(bins))
    assert (ours >= 0).all()  # every sample has a bin
    for (a, b), mine in zip(pairs, ours):
        assert _nemo_index(nemo_sampling, bins, a, b) == mine
        assert _nemo_index(nemo_sampling, bins, a, b, keys["max_tps"]) == mine  # none dropped
    assert keys["bucket_batch_size"] == [budget // (x + y) for x, y in bins]


@pytest.mark.parametrize("shape", SHAPES)
def test_unassigned_counts_what_nemo_drops(nemo_sampling, shape):
    """NeMo's own estimator on the same data: evaluate's ``unassigned`` is exactly the number
    of samples NeMo's selection finds no bin for (with and without its max_tps filter)."""
    pairs = paired_lengths(shape, 3000, seed=11)
    bins, tps = nemo_estimate_bins(pairs, 6, 2)
    sol = bucketopt.evaluate(pairs, bins)
    dropped = sum(_nemo_index(nemo_sampling, bins, a, b) < 0 for a, b in pairs)
    assert sol.unassigned == dropped
    with_tps = sum(_nemo_index(nemo_sampling, bins, a, b, tps) < 0 for a, b in pairs)
    idx = assign_bins(pairs[:, 0], pairs[:, 1], np.array(bins))
    ratio_over = [i >= 0 and b / a > tps[i] for (a, b), i in zip(pairs, idx)]
    assert with_tps == dropped + sum(ratio_over)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("grid", [(6, 2), (30, 2)])
def test_bucketopt_pads_no_more_than_nemo_and_keeps_every_sample(shape, grid):
    """On the same samples, bucketopt's plan of the same shape (or the same number of bins)
    pads no more than NeMo's estimator's bins, and leaves none out. NeMo's padding counts only
    the samples its bins keep, so it is compared (a) on those samples and (b) with its bins
    raised to hold every sample (cover_all)."""
    pairs = paired_lengths(shape, 4000, seed=3)
    bins, _ = nemo_estimate_bins(pairs, *grid)
    idx = assign_bins(pairs[:, 0], pairs[:, 1], np.array(bins))
    kept = pairs[idx >= 0]
    full = cover_all(pairs, bins)
    for data, theirs in ((kept, bucketopt.evaluate(kept, bins)),
                         (pairs, bucketopt.evaluate(pairs, full))):
        assert theirs.unassigned == 0
        free = bucketopt.solve(data, len(bins))
        assert free.unassigned == 0 and sum(free.counts) == len(data)
        assert free.padded_tokens <= theirs.padded_tokens
        if fits_grid(theirs.bins, grid):  # NeMo merges equal edges into wider buckets
            ours = bucketopt.solve(data, None, grid=grid)
            assert ours.unassigned == 0
            assert ours.padded_tokens <= theirs.padded_tokens


def test_max_tps_keeps_every_sample():
    pairs = paired_lengths("qa", 500, seed=1)
    sol = bucketopt.solve(pairs, 8)
    tps = max_tps_of(pairs, sol.bins)
    idx = assign_bins(pairs[:, 0], pairs[:, 1], np.array(sol.bins))
    assert all(b / a <= tps[i] for (a, b), i in zip(pairs, idx))
    assert any(b / a == tps[i] for (a, b), i in zip(pairs, idx))  # the smallest such value
