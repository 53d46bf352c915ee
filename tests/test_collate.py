"""varlen_collate: a packed row on a real transformers causal LM (random weights, CPU) has the
loss of its documents run one by one. Skipped where torch or transformers is absent."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bucketopt import BucketoptError
from bucketopt.integrations.collate import VarlenCollator, varlen_collate

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

VOCAB = 61
DOC_LENGTHS = (9, 1, 17, 4, 2, 23, 12)  # a one-token document: nothing to predict, still masked


def tiny_model(family, attention):
    """A causal LM with random weights and tiny dimensions, in eval mode (no dropout)."""
    common = dict(vocab_size=VOCAB, attn_implementation=attention, bos_token_id=1,
                  eos_token_id=2, pad_token_id=0)
    if family == "gpt2":
        config = transformers.GPT2Config(n_embd=32, n_layer=2, n_head=4, n_positions=128,
                                         **common)
        cls = transformers.GPT2LMHeadModel
    else:
        config_cls, cls = {
            "llama": (transformers.LlamaConfig, transformers.LlamaForCausalLM),
            "qwen2": (transformers.Qwen2Config, transformers.Qwen2ForCausalLM),
            "mistral": (transformers.MistralConfig, transformers.MistralForCausalLM),
        }[family]
        config = config_cls(hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                            num_attention_heads=4, num_key_value_heads=2, head_dim=8,
                            max_position_embeddings=128, **common)
    torch.manual_seed(0)
    return cls(config).eval()


def documents(seed=0):
    rng = np.random.default_rng(seed)
    return [rng.integers(3, VOCAB, d).tolist() for d in DOC_LENGTHS]


def one_by_one(model, docs):
    """Token-weighted mean of the per-document losses and each document's logits, run alone."""
    losses, weights, logits = [], [], []
    with torch.no_grad():
        for doc in docs:
            ids = torch.tensor([doc])
            out = model(input_ids=ids, labels=ids if len(doc) > 1 else None, use_cache=False)
            logits.append(out.logits[0])
            if len(doc) > 1:  # a document of d tokens predicts d - 1 of them
                losses.append(out.loss.item())
                weights.append(len(doc) - 1)
    return float(np.dot(losses, weights) / np.sum(weights)), torch.cat(logits)


@pytest.mark.parametrize("family", ["llama", "qwen2", "mistral", "gpt2"])
@pytest.mark.parametrize("implementation", ["eager", "sdpa"])
def test_packed_row_loss_equals_the_documents_one_by_one(family, implementation):
    model = tiny_model(family, implementation)
    docs = documents()
    expected, expected_logits = one_by_one(model, docs)
    for attention in ("position_ids", "flash_attn", "mask"):
        batch = varlen_collate(docs, attention=attention)
        with torch.no_grad():
            out = model(**batch)
        assert abs(out.loss.item() - expected) <= 1e-5, (family, implementation, attention)
        torch.testing.assert_close(out.logits[0], expected_logits, atol=1e-5, rtol=1e-5)


def test_the_check_can_fail_without_the_document_mask():
    """The same row with plain causal attention over the whole row (documents see each other),
    or with a key/value cache (transformers then skips the per-document mask), is measurably off:
    the 1e-5 agreement above comes from the document mask."""
    model = tiny_model("llama", "sdpa")
    docs = documents()
    expected, _ = one_by_one(model, docs)
    batch = varlen_collate(docs)
    with torch.no_grad():
        crossed = model(input_ids=batch["input_ids"], labels=batch["labels"], use_cache=False)
        cached = model(**{**batch, "use_cache": True})
        leaky = model(**varlen_collate(docs, use_cache=None))  # the config's default: a cache
    assert abs(crossed.loss.item() - expected) > 1e-4
    assert abs(cached.loss.item() - expected) > 1e-4
    assert model.config.use_cache and abs(leaky.loss.item() - expected) > 1e-4


def test_gradients_match_the_documents_one_by_one():
    model = tiny_model("llama", "sdpa")
    docs = documents(1)
    weights = [len(d) - 1 for d in docs]
    model.zero_grad()
    model(**varlen_collate(docs)).loss.backward()
    packed = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    for doc, w in zip(docs, weights):
        if w:
            ids = torch.tensor([doc])
            (model(input_ids=ids, labels=ids, use_cache=False).loss * w / sum(weights)).backward()
    for a, p in zip(packed, model.parameters()):
        torch.testing.assert_close(a, p.grad, atol=1e-5, rtol=1e-4)


def test_same_tensors_as_transformers_flattening_collator():
    docs = documents(2)
    features = [{"input_ids": d, "labels": [-100] * min(2, len(d)) + d[2:]} for d in docs]
    theirs = transformers.DataCollatorWithFlattening(return_flash_attn_kwargs=True)(features)
    ours = varlen_collate(features, attention="flash_attn")
    for key in ("input_ids", "labels", "position_ids", "cu_seq_lens_q", "cu_seq_lens_k"):
        assert torch.equal(ours[key].reshape(-1), theirs[key].reshape(-1)), key
        assert ours[key].dtype == theirs[key].dtype, key
    assert ours["max_length_q"] == theirs["max_length_q"] == max(DOC_LENGTHS)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.integers(0, 500), min_size=1, max_size=30), min_size=1, max_size=12),
       st.booleans(), st.integers(-200, 0))
def test_matches_transformers_flattening_on_random_rows(docs, with_labels, separator):
    features = [{"input_ids": d, **({"labels": [t - 1 for t in d]} if with_labels else {})}
                for d in docs]
    theirs = transformers.DataCollatorWithFlattening(
        return_flash_attn_kwargs=True, separator_id=separator, return_tensors="np")(features)
    ours = varlen_collate(features, attention="flash_attn", separator_id=separator,
                          return_tensors="np")
    for key in ("input_ids", "labels", "position_ids", "cu_seq_lens_q", "cu_seq_lens_k"):
        np.testing.assert_array_equal(ours[key].reshape(-1), theirs[key].reshape(-1))
        assert ours[key].dtype == theirs[key].dtype, key
    assert ours["max_length_k"] == theirs["max_length_k"]
    plain = varlen_collate(docs, attention="cu_seqlens", return_tensors="np")
    np.testing.assert_array_equal(plain["cu_seqlens"], ours["cu_seq_lens_q"])


def test_cu_seqlens_mask_and_numpy():
    docs = [[4, 5, 6], [7], [8, 9]]
    batch = varlen_collate(docs, attention="cu_seqlens", return_tensors="np")
    assert batch["cu_seqlens"].tolist() == [0, 3, 4, 6] and batch["cu_seqlens"].dtype == np.int32
    assert batch["max_seqlen"] == 3 and batch["use_cache"] is False
    assert batch["input_ids"].tolist() == [[4, 5, 6, 7, 8, 9]]
    assert batch["labels"].tolist() == [[-100, 5, 6, -100, -100, 9]]
    mask = varlen_collate(docs, attention="mask", return_tensors="np")["attention_mask"][0, 0]
    pt = varlen_collate(docs, attention="mask")["attention_mask"][0, 0].numpy()
    np.testing.assert_array_equal(mask, pt)
    doc = np.repeat([0, 1, 2], [3, 1, 2])
    i, j = np.indices(mask.shape)
    np.testing.assert_array_equal(mask == 0, (doc[i] == doc[j]) & (j <= i))
    # tensors and arrays in, the same row out; a collator for DataLoader(collate_fn=...)
    same = VarlenCollator(attention="cu_seqlens")([torch.tensor(d) for d in docs])
    assert same["cu_seqlens"].tolist() == [0, 3, 4, 6]


@pytest.mark.parametrize(("features", "kwargs", "match"), [
    ([], {}, "at least one document"),
    ({"input_ids": [1]}, {}, "one dict"),
    ([[1, 2], []], {}, r"features\[1\] is empty"),
    ([[1.5, 2]], {}, "integer token ids"),
    ([[[1, 2]]], {}, "1-D"),
    ([[1, -2]], {}, ">= 0"),
    ([{"ids": [1]}], {}, "no input_ids"),
    ([{"input_ids": [1, 2], "labels": [1]}], {}, "one label per token"),
    ([[1]], {"attention": "flash"}, "attention must be one of"),
    ([[1]], {"return_tensors": "tf"}, "return_tensors"),
    ([[1]], {"separator_id": "x"}, "separator_id"),
    ([[1]], {"use_cache": "no"}, "use_cache"),
    ([[1]], {"attention": "mask", "mask_dtype": "int64"}, "mask_dtype"),
    ([list(range(20_000))], {"attention": "mask"}, "1 GiB"),
])
def test_bad_input_is_one_clear_error(features, kwargs, match):
    kwargs.setdefault("return_tensors", "np")
    with pytest.raises(BucketoptError, match=match):
        varlen_collate(features, **kwargs)
    with pytest.raises(BucketoptError, match="attention"):
        VarlenCollator(attention="none")
