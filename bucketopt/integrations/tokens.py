"""The loss of an optimizer step as the mean over all its tokens, however its batches differ.

With length buckets or packed rows the micro-batches of one optimizer step hold different numbers
of label tokens, so the mean of their per-batch means weights a token of a small batch more than a
token of a large one. The step's loss must be the mean over every label token of the step, across
gradient accumulation and ranks (what transformers' ``Trainer`` computes with
``num_items_in_batch``). In a loop of your own (Accelerate, Lightning), :class:`TokenMean` does it
without looking ahead: every micro-batch backpropagates its *summed* loss, and before the
optimizer step the gradients are scaled by ``world_size / (the step's label tokens over all
ranks)``. Under DDP the gradients are averaged over ranks, so this gives exactly the gradient of
the step's token mean.

>>> import torch  # doctest: +SKIP
>>> mean = TokenMean()
>>> logits, labels = torch.zeros(1, 4, 3), torch.tensor([[-100, 1, 2, -100]])  # doctest: +SKIP
>>> round(float(mean.loss(logits, labels)), 4), mean.tokens  # doctest: +SKIP
(2.1972, 2)

(2 tokens predicted, each at ln 3 from uniform logits.) torch is imported on first use
(``pip install torch``); :func:`label_tokens` also counts numpy arrays.
"""

from __future__ import annotations

from ..errors import BucketoptError

__all__ = ["TokenMean", "causal_lm_loss_sum", "label_tokens"]

IGNORE_INDEX = -100


def label_tokens(batch, *, ignore_index=IGNORE_INDEX) -> int:
    """Tokens a causal-LM batch predicts: ``labels[..., 1:] != ignore_index`` (or its
    ``shift_labels``, already shifted).

    >>> import numpy as np
    >>> label_tokens({"labels": np.array([[-100, 5, 6, -100, 9]])})
    3
    """
    if not hasattr(batch, "get"):
        raise BucketoptError(f"batch must be a dict with labels; got {type(batch).__name__}.",
                             param="batch")
    if batch.get("shift_labels") is not None:
        return int((batch["shift_labels"] != ignore_index).sum())
    labels = batch.get("labels")
    if labels is None:
        raise BucketoptError("batch has no labels: the step's token count needs them.",
                             param="batch")
    return int((labels[..., 1:] != ignore_index).sum())


def causal_lm_loss_sum(logits, labels, *, ignore_index=IGNORE_INDEX):
    """Sum of the next-token cross-entropies of a causal LM (``logits[..., t]`` predicts
    ``labels[..., t + 1]``), in float32; ``ignore_index`` labels count nothing (0 if none)."""
    import torch

    logits = logits[..., :-1, :].float()
    target = labels[..., 1:].to(logits.device)
    return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                             target.reshape(-1), ignore_index=ignore_index,
                                             reduction="sum")


class TokenMean:
    """Make each optimizer step's loss the mean over all its label tokens (accumulation, ranks).

    Per micro-batch, backpropagate ``mean.loss(logits, labels)`` (the summed loss; it counts the
    tokens); before the optimizer step, reduce ``mean.tokens`` over the ranks (a sum) and call
    ``mean.scale(parameters, total, factor)``: the gradients are multiplied by
    ``factor / total``, ``factor`` being the world size (DDP averages over ranks), times
    Lightning's ``accumulate_grad_batches`` where Lightning divides the loss by it. The count then
    starts again for the next step.

    Examples
    --------
    Accelerate (``accelerator.backward`` without its own accumulation)::

        mean = TokenMean()
        for i, batch in enumerate(loader):
            labels = batch.pop("labels")
            accelerator.backward(mean.loss(model(**batch).logits, labels))
            if (i + 1) % grad_accum == 0 or i + 1 == len(loader):
                total = accelerator.reduce(torch.tensor(mean.tokens, device=accelerator.device),
                                           "sum")
                mean.scale(model.parameters(), total, accelerator.num_processes)
                optimizer.step()
                optimizer.zero_grad()
    """

    def __init__(self, *, ignore_index=IGNORE_INDEX):
        self.ignore_index = ignore_index
        self.tokens = 0

    def loss(self, logits, labels):
        """The summed next-token loss of one micro-batch; its label tokens join the step's count."""
        self.tokens += int((labels[..., 1:] != self.ignore_index).sum())
        return causal_lm_loss_sum(logits, labels, ignore_index=self.ignore_index)

    def scale(self, parameters, total_tokens, factor=1) -> None:
        """Multiply every gradient by ``factor / total_tokens`` and start the next step's count."""
        total = float(total_tokens)
        if total > 0:
            for p in parameters:
                if p.grad is not None:
                    p.grad.mul_(float(factor) / total)
        self.tokens = 0
