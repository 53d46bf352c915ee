"""Collate a packed row of documents for document-masked (varlen) attention.

A row from ``BucketBatchSampler(..., packing="varlen")`` is a list of documents. Padding-free
training flattens them into one row of ``total`` tokens and tells attention where each document
starts, so that no token attends to, or predicts, a token of another document:

- ``input_ids``: shape ``(1, total)``, the documents one after another;
- ``labels``: the same tokens (or the features' own ``labels``) with the first token of every
  document set to ``separator_id`` (-100): the last token of a document never learns to predict the
  first token of the next;
- ``position_ids``: ``0 .. d-1`` for every document (restarting at 0). Recent transformers
  builds the block-diagonal causal mask from these when no ``attention_mask`` and no cache is
  passed (checked in ``tests/test_collate.py`` for Llama, Qwen2, Mistral and GPT-2 with
  ``"eager"`` and ``"sdpa"`` attention; a model that derives positions from the attention mask,
  such as OPT, does not); its flash-attention path derives the varlen boundaries from them too
  (per transformers' source; not run in the tests, which have no GPU);
- ``attention="flash_attn"`` adds transformers' ``FlashAttentionKwargs``: ``cu_seq_lens_q`` /
  ``cu_seq_lens_k`` (int32, cumulative, starting at 0) and ``max_length_q`` / ``max_length_k``;
- ``attention="cu_seqlens"`` adds ``cu_seqlens`` (int32) and ``max_seqlen`` (int), the arguments of
  ``flash_attn.flash_attn_varlen_func``, for a model of your own;
- ``attention="mask"`` adds ``attention_mask``, the 4D block-diagonal causal mask itself, shape
  ``(1, 1, total, total)``, additive (0 where a token may attend, the dtype's minimum elsewhere),
  for attention code that does not read ``position_ids``. It costs ``total**2`` numbers; rows
  whose mask would exceed 1 GiB are refused.

The batch also holds ``use_cache=False`` (pass ``use_cache=None`` to leave it out): a transformers
model that builds a key/value cache, which most configs do by default even in training, skips the
per-document mask and lets the documents of a row attend to each other without a word.

>>> batch = varlen_collate([[5, 6, 7], [8, 9]], return_tensors="np")
>>> batch["position_ids"].tolist(), batch["labels"].tolist()
([[0, 1, 2, 0, 1]], [[-100, 6, 7, -100, 9]])
>>> varlen_collate([[5, 6, 7], [8, 9]], attention="cu_seqlens", return_tensors="np")["cu_seqlens"]
array([0, 3, 5], dtype=int32)

torch is imported only for ``return_tensors="pt"`` (the default): ``pip install torch``.
"""

from __future__ import annotations

import numpy as np

from ..errors import BucketoptError

__all__ = ["ATTENTIONS", "VarlenCollator", "varlen_collate"]

ATTENTIONS = ("position_ids", "flash_attn", "cu_seqlens", "mask")
MASK_LIMIT = 1 << 30  # bytes of one 4D mask


def varlen_collate(features, *, attention="position_ids", separator_id=-100, use_cache=False,
                   return_tensors="pt", mask_dtype=None) -> dict:
    """Flatten a row of documents into one padding-free, document-masked training row.

    Parameters
    ----------
    features : sequence
        The documents of one row: dicts with ``input_ids`` (and optionally ``labels`` of the same
        length), or token sequences (lists, numpy arrays, 1-D tensors) of integers.
    attention : {"position_ids", "flash_attn", "cu_seqlens", "mask"}
        What tells attention where documents start (see the module docstring). Every choice
        returns ``input_ids``, ``labels`` and ``position_ids``.
    separator_id : int
        Label of every document's first token (-100: ignored by the loss).
    use_cache : bool or None
        Stored in the batch as ``use_cache`` (``False`` keeps transformers' per-document mask);
        ``None`` leaves the key out (for a model whose ``forward`` does not take it).
    return_tensors : {"pt", "np"}
        torch tensors or numpy arrays.
    mask_dtype : dtype, optional
        Dtype of the additive mask of ``attention="mask"`` (float32 by default; use the model's).

    Returns
    -------
    dict
        ``input_ids``, ``labels``, ``position_ids`` (int64, shape ``(1, total)``) and the keys
        ``attention`` adds.
    """
    if attention not in ATTENTIONS:
        raise BucketoptError(f"attention must be one of {ATTENTIONS}; got {attention!r}.",
                             param="attention")
    if return_tensors not in ("pt", "np"):
        raise BucketoptError(f"return_tensors must be 'pt' or 'np'; got {return_tensors!r}.",
                             param="return_tensors")
    if use_cache is not None and not isinstance(use_cache, (bool, np.bool_)):
        raise BucketoptError(f"use_cache must be True, False or None; got {use_cache!r}.",
                             param="use_cache")
    separator_id = _int("separator_id", separator_id)
    tokens, labels = _documents(features)
    lengths = np.fromiter((t.size for t in tokens), dtype=np.int64, count=len(tokens))
    total = int(lengths.sum())
    starts = np.r_[0, np.cumsum(lengths)[:-1]]
    input_ids = np.concatenate(tokens)
    label_row = np.concatenate(labels)
    label_row[starts] = separator_id
    position_ids = np.arange(total, dtype=np.int64) - np.repeat(starts, lengths)
    batch = {"input_ids": input_ids[None], "labels": label_row[None],
             "position_ids": position_ids[None]}
    cu = np.r_[0, np.cumsum(lengths)].astype(np.int32)
    longest = int(lengths.max())
    if attention == "flash_attn":
        batch.update(cu_seq_lens_q=cu, cu_seq_lens_k=cu.copy(), max_length_q=longest,
                     max_length_k=longest)
    elif attention == "cu_seqlens":
        batch.update(cu_seqlens=cu, max_seqlen=longest)
    if return_tensors == "pt":
        torch = _torch()
        batch = {key: torch.from_numpy(value) if isinstance(value, np.ndarray) else value
                 for key, value in batch.items()}
        if attention == "mask":
            dtype = torch.float32 if mask_dtype is None else mask_dtype
            batch["attention_mask"] = _mask_pt(torch, starts, lengths, total, dtype)
    elif attention == "mask":
        batch["attention_mask"] = _mask_np(starts, lengths, total,
                                            np.float32 if mask_dtype is None else mask_dtype)
    if use_cache is not None:
        batch["use_cache"] = bool(use_cache)
    return batch


class VarlenCollator:
    """:func:`varlen_collate` with its options fixed, for ``DataLoader(collate_fn=...)``.

    >>> collate = VarlenCollator(attention="flash_attn", return_tensors="np")
    >>> collate([{"input_ids": [1, 2]}, {"input_ids": [3, 4, 5]}])["max_length_q"]
    3
    """

    def __init__(self, **options):
        varlen_collate([[1]], **{**options, "return_tensors": "np"})  # checks the options now
        self.options = options

    def __call__(self, features) -> dict:
        return varlen_collate(features, **self.options)

    def __repr__(self):
        return f"VarlenCollator({', '.join(f'{k}={v!r}' for k, v in self.options.items())})"


# ---------------------------------------------------------------------------------- helpers
def _documents(features):
    if isinstance(features, dict):
        raise BucketoptError("features must be a list of documents (dicts with input_ids, or "
                             "token lists); got one dict: pass [features].", param="features")
    try:
        features = list(features)
    except TypeError:
        raise BucketoptError(f"features must be a list of documents; got "
                             f"{type(features).__name__}.", param="features") from None
    if not features:
        raise BucketoptError("features must hold at least one document; got none.",
                             param="features")
    tokens, labels = [], []
    for i, feature in enumerate(features):
        if isinstance(feature, dict):
            if "input_ids" not in feature:
                raise BucketoptError(f"features[{i}] has no input_ids; got keys "
                                     f"{sorted(map(str, feature))}.", param="features")
            ids = _ids(feature["input_ids"], f"features[{i}]['input_ids']")
            own = feature.get("labels")
            if own is None:
                lab = ids.copy()
            else:
                lab = _ids(own, f"features[{i}]['labels']", allow_negative=True)
                if lab.size != ids.size:
                    raise BucketoptError(f"features[{i}]['labels'] has {lab.size} entries but "
                                         f"input_ids has {ids.size}: one label per token.",
                                         param="features")
                lab = lab.copy()
        else:
            ids = _ids(feature, f"features[{i}]")
            lab = ids.copy()
        tokens.append(ids)
        labels.append(lab)
    return tokens, labels


def _ids(value, name, allow_negative=False):
    if hasattr(value, "detach"):  # a torch tensor, on any device
        value = value.detach().cpu().numpy()
    arr = np.asarray(value)
    if arr.ndim != 1:
        raise BucketoptError(f"{name} must be a 1-D sequence of token ids; got shape "
                             f"{arr.shape}.")
    if arr.size == 0:
        raise BucketoptError(f"{name} is empty: every document needs at least one token.")
    if arr.dtype.kind not in "iu":
        raise BucketoptError(f"{name} must hold integer token ids; got dtype {arr.dtype}.")
    if not allow_negative and arr.min() < 0:
        raise BucketoptError(f"{name} must hold token ids >= 0; got {int(arr.min())}.")
    return arr.astype(np.int64, copy=False)


def _int(name, value):
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise BucketoptError(f"{name} must be an integer; got {value!r}.", param=name)
    return int(value)


def _check_mask_size(total, itemsize):
    size = total * total * itemsize
    if size > MASK_LIMIT:
        raise BucketoptError(
            f"attention='mask' would build a {total} x {total} mask ({size / 2**30:.1f} GiB) for a "
            f"row of {total} tokens, over the 1 GiB limit; use attention='position_ids' or "
            "'flash_attn', which cost no mask.")


def _mask_np(starts, lengths, total, dtype):
    dtype = np.dtype(dtype)
    if dtype.kind != "f":
        raise BucketoptError(f"mask_dtype must be a floating dtype; got {dtype}.",
                             param="mask_dtype")
    _check_mask_size(total, dtype.itemsize)
    doc = np.repeat(np.arange(lengths.size), lengths)
    pos = np.arange(total)
    allowed = (doc[:, None] == doc[None, :]) & (pos[None, :] <= pos[:, None])
    return np.where(allowed, 0, np.finfo(dtype).min).astype(dtype)[None, None]


def _mask_pt(torch, starts, lengths, total, dtype):
    if not (isinstance(dtype, torch.dtype) and dtype.is_floating_point):
        raise BucketoptError(f"mask_dtype must be a floating torch dtype; got {dtype!r}.",
                             param="mask_dtype")
    _check_mask_size(total, torch.finfo(dtype).bits // 8)
    doc = torch.repeat_interleave(torch.arange(lengths.size), torch.from_numpy(lengths))
    pos = torch.arange(total)
    allowed = (doc[:, None] == doc[None, :]) & (pos[None, :] <= pos[:, None])
    mask = torch.zeros((total, total), dtype=dtype)
    mask.masked_fill_(~allowed, torch.finfo(dtype).min)
    return mask[None, None]


def _torch():
    try:
        import torch
    except ImportError:
        raise BucketoptError("varlen_collate(return_tensors='pt') needs torch: pip install torch "
                             "(or pass return_tensors='np').") from None
    return torch
