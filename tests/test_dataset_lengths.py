"""dataset_lengths(): one length per sample of a training dataset, from Arrow offsets."""

from __future__ import annotations

import numpy as np
import pytest

from bucketopt import BucketoptError
from bucketopt.integrations.lengths import dataset_lengths


def rows(n, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 100, int(k)).tolist() for k in rng.integers(1, 50, n)]


def test_plain_sequences_and_dicts():
    data = rows(20)
    expected = [len(r) for r in data]
    assert dataset_lengths([{"input_ids": r} for r in data]).tolist() == expected
    assert dataset_lengths(data).tolist() == expected
    assert dataset_lengths([{"seq_len": n, "input_ids": []} for n in expected]).tolist() \
        == expected
    with pytest.raises(BucketoptError, match="has no 'tokens' field"):
        dataset_lengths([{"input_ids": [1]}], column="tokens")
    with pytest.raises(BucketoptError, match="dataset is empty"):
        dataset_lengths([])
    with pytest.raises(BucketoptError, match="must have a length"):
        dataset_lengths(iter(data))
    with pytest.raises(BucketoptError, match="positive"):
        dataset_lengths([[]])


def test_hugging_face_datasets_from_offsets_through_views():
    datasets = pytest.importorskip("datasets")
    data = rows(300)
    lengths = np.array([len(r) for r in data])
    ds = datasets.Dataset.from_dict({"input_ids": data, "labels": data, "id": range(300)})
    assert (dataset_lengths(ds) == lengths).all()  # the token list column, not "labels"
    # a view keeps the indices mapping: select, shuffle, filter
    view = ds.shuffle(seed=3).select(range(0, 300, 7))
    assert dataset_lengths(view).tolist() == [len(x) for x in view["input_ids"]]
    kept = ds.filter(lambda x: len(x["input_ids"]) > 20)
    assert dataset_lengths(kept).tolist() == [len(x) for x in kept["input_ids"]]
    # several Arrow chunks
    both = datasets.concatenate_datasets([ds, ds.select(range(10))])
    assert (dataset_lengths(both) == np.r_[lengths, lengths[:10]]).all()
    # a length column wins; column= picks another
    with_len = ds.add_column("seq_len", (lengths + 1).tolist())
    assert (dataset_lengths(with_len) == lengths + 1).all()
    assert (dataset_lengths(with_len, column="labels") == lengths).all()
    with pytest.raises(BucketoptError, match="no column 'nope'"):
        dataset_lengths(ds, column="nope")
    with pytest.raises(BucketoptError, match="is empty"):
        dataset_lengths(ds.select([]))
    stream = ds.to_iterable_dataset()
    with pytest.raises(BucketoptError, match="bucketopt.training.streaming"):
        dataset_lengths(stream)
