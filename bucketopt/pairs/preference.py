"""Preference data (prompt, chosen, rejected), as DPO trains it: the pair is one unit of two rows
(prompt + chosen, prompt + rejected) in the same batch, so its lengths for planning are those
of the wider row.

How TRL's ``DPOTrainer`` pads a batch (``concatenated_inputs``): the prompt is repeated for both
rows and padded to the batch's longest prompt; chosen and rejected completions are padded to
one common length, the longest completion of either kind; ``concatenated_forward`` then glues
prompt and completion and, in the releases that flush left, drops the columns no row uses, so a
row's width is the batch's longest prompt + completion. Two units follow:

- ``collator="trl"`` (flush left, decoder-only): one length per pair,
  ``prompt + max(chosen, rejected)``: a 1-D plan; every pair takes two rows of the batch, so the
  token budget of the plan is the rows' budget halved (:func:`pair_budget`).
- ``collator="separate"`` (prompt and completion padded each to its own longest, e.g. an
  encoder-decoder, or a release that does not flush): pairs ``(prompt, max(chosen,
  rejected))``: a 2-D plan, the plan file's ``lengths`` field says so (:data:`UNITS`).
"""

from __future__ import annotations

import numpy as np

from ..errors import BucketoptError

UNITS = {"trl": "prompt+max(chosen,rejected)", "separate": "prompt,max(chosen,rejected)"}


def preference_lengths(prompt, chosen, rejected, *, collator="trl") -> np.ndarray:
    """The planning lengths of preference pairs (see the module): 1-D for ``collator="trl"``,
    an (n, 2) array for ``collator="separate"``."""
    from ..data.histogram import validate_lengths

    if collator not in UNITS:
        raise BucketoptError(f"`collator` must be one of {', '.join(UNITS)}; got {collator!r}.",
                             param="collator")
    p = validate_lengths(prompt, name="prompt", param="prompt")
    c = validate_lengths(chosen, name="chosen", param="chosen")
    r = validate_lengths(rejected, name="rejected", param="rejected")
    if not p.size == c.size == r.size:
        raise BucketoptError(f"prompt, chosen and rejected must hold one length per pair; got "
                             f"{p.size:,}, {c.size:,} and {r.size:,}.", param="rejected")
    completion = np.maximum(c, r)
    if collator == "trl":
        return p + completion
    return np.stack([p, completion], axis=1)


def pair_budget(rows_budget: int) -> int:
    """The token budget of a plan over preference units from the budget of one micro-batch's
    rows (rows x width <= rows_budget): each unit takes two rows."""
    from ..validate import check_positive_int

    return check_positive_int(rows_budget, "rows_budget") // 2
