"""The Hugging Face Trainer's step accounting, from the sampler's plans.

The Trainer counts the batches of one epoch once (``len(dataloader)``) and assumes every epoch has
as many. Packed rows (``packing="varlen"``) make a different number of rows every epoch, and an
elastic resume re-plans the rest of an epoch at another world size, so :func:`trainer_schedule`
gives the loop, epoch by epoch, the micro-steps the sampler really yields: the schedule's total
(``max_steps``, which sizes the learning-rate schedule), the epochs to run, and where a resumed
run starts (its epoch, the micro-steps already trained in it, the global step it began at).

Pure Python on the sampler's plans: no transformers, no torch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..errors import BucketoptError
from ..validate import INT64_MAX, check_int

__all__ = ["Schedule", "trainer_schedule"]


@dataclass
class Schedule:
    """Micro-steps per epoch as the Trainer's loop must see them, and where training starts.

    ``counts[e]`` is the number of micro-steps (batches on this rank) the loop runs in epoch
    ``e``; for the epoch a resume starts in, the micro-steps trained before the checkpoint count
    in it, at this run's ``grad_accum`` (``start_batches``), plus the rest the sampler yields.
    """

    grad_accum: int
    start_epoch: int = 0
    start_batches: int = 0
    first_step: int = 0  # the global step at which start_epoch began
    max_steps: int = 0
    num_epochs: int = 0
    counts: dict = field(default_factory=dict)

    def batches(self, epoch) -> int:
        return self.counts[epoch]

    def updates(self, epoch) -> int:
        """Optimizer steps of ``epoch`` (the last takes the remainder), as the Trainer counts."""
        return max(1, -(-self.counts[epoch] // self.grad_accum))


def _counter(sampler):
    """Micro-steps of a whole epoch at the sampler's layout (fixed packing: the same each epoch)."""
    memo = {}

    def count(epoch):
        key = 0 if sampler.packing == "fixed" else epoch
        if key not in memo:
            segments = sampler._segments if epoch == sampler.epoch else ()
            memo[key] = (sampler.plan(epoch).micro_steps if not segments else
                         sampler._chain(epoch, (), sampler.world_size,
                                        sampler.grad_accum).micro_steps)
        return memo[key]

    return count


def trainer_schedule(sampler, *, num_train_epochs, max_steps=-1, global_step=0, state=None,
                     resume=False, ignore_data_skip=False, where="the checkpoint") -> Schedule:
    """The Trainer's schedule over ``sampler``'s epochs, positioning the sampler for a resume.

    Parameters
    ----------
    sampler : BucketBatchSampler
        This run's sampler (its world size and ``grad_accum`` are the run's).
    num_train_epochs : float
        ``TrainingArguments.num_train_epochs`` (used when ``max_steps <= 0``).
    max_steps : int
        ``TrainingArguments.max_steps``; positive: the run's total, whatever the epochs hold.
    global_step : int
        The checkpoint's global step (``trainer_state.json``) when resuming.
    state : dict, optional
        The sampler state saved with the checkpoint (``bucketopt_sampler.json``), possibly with a
        ``"trainer"`` entry (the global step it was saved at and the global step its epoch began
        at). None: a checkpoint of a plain Trainer, resumed at the Trainer's own count, since the
        plan is a function of the seed and the epoch alone.
    resume, ignore_data_skip : bool
        Resuming from a checkpoint; restart its epoch from the beginning (the Trainer's
        ``ignore_data_skip``).

    Examples
    --------
    >>> from bucketopt import BucketBatchSampler
    >>> sampler = BucketBatchSampler([5, 3, 9, 4, 8, 2] * 4, None, token_budget=12,
    ...                              packing="varlen", grad_accum=2)
    >>> s = trainer_schedule(sampler, num_train_epochs=2)
    >>> s.max_steps == s.updates(0) + s.updates(1)
    True
    """
    A = sampler.grad_accum
    count = _counter(sampler)
    out = Schedule(grad_accum=A)
    if resume and isinstance(state, dict) and ignore_data_skip and "epoch" in state:
        # the checkpoint's epoch again from its start, as the plain Trainer does
        out.start_epoch = check_int(state["epoch"], "state epoch", low=0, high=INT64_MAX)
        out.first_step = int(global_step)
        sampler.set_epoch(out.start_epoch)
    elif resume and state is not None and not ignore_data_skip:
        _from_state(sampler, out, state, int(global_step), where)
    elif resume:
        _from_step(sampler, out, count, int(global_step), ignore_data_skip)
    if out.start_epoch not in out.counts:
        out.counts[out.start_epoch] = count(out.start_epoch)

    def steps_of(epoch):
        if epoch not in out.counts:
            out.counts[epoch] = count(epoch)
        return out.updates(epoch)

    total, epoch = out.first_step, out.start_epoch
    if max_steps is not None and max_steps > 0:
        while total < max_steps:
            total += steps_of(epoch)
            epoch += 1
        out.max_steps, out.num_epochs = int(max_steps), epoch
    else:
        whole = math.floor(num_train_epochs)
        for e in range(epoch, whole):
            total += steps_of(e)
        fraction = num_train_epochs - whole
        if fraction > 0 and whole >= epoch:
            total += math.ceil(fraction * steps_of(whole))
        out.max_steps, out.num_epochs = int(total), math.ceil(num_train_epochs)
    sampler.plan()  # the epoch training starts with, planned (counting planned others)
    return out


def _from_step(sampler, out, count, global_step, ignore_data_skip):
    """A checkpoint without the sampler's state: the Trainer's global step, over the plans."""
    first, epoch = 0, 0
    while True:
        out.counts[epoch] = count(epoch)
        if first + out.updates(epoch) > global_step:
            break
        first += out.updates(epoch)
        epoch += 1
    done = global_step - first
    out.start_epoch = epoch
    sampler.set_epoch(epoch)
    if ignore_data_skip or not done:  # the epoch from its start, as the plain Trainer does
        out.first_step = global_step
        return
    out.first_step, out.start_batches = first, done * out.grad_accum
    sampler.load_state_dict(sampler.state_dict(position=out.start_batches))


def _from_state(sampler, out, state, global_step, where):
    """Load the checkpoint's sampler state (elastic where its world size or grad_accum differ)."""
    if not isinstance(state, dict):
        raise BucketoptError(f"{where} holds a sampler state that is not a dict: "
                             f"{type(state).__name__}.")
    trainer = state.get("trainer")
    sampler.load_state_dict(state)  # checks the settings; re-plans the rest when elastic
    epoch, position = sampler.epoch, int(state["position"])  # checked by load_state_dict
    saved_accum = int(state.get("grad_accum", sampler.grad_accum))
    elastic = (int(state.get("world_size", sampler.world_size)), saved_accum) != (
        sampler.world_size, sampler.grad_accum)
    rest = sampler.plan().micro_steps - sampler.consumed
    done = -(-position // saved_accum)  # optimizer steps of the epoch before the checkpoint
    if isinstance(trainer, dict):
        if trainer.get("global_step") != global_step:
            raise BucketoptError(
                f"{where}: its sampler state was saved at global step "
                f"{trainer.get('global_step')!r}, its trainer_state.json is at step "
                f"{global_step}: the files come from different checkpoints.")
        into = global_step - check_int(trainer.get("epoch_first_step"), "state epoch_first_step",
                                       low=0, high=INT64_MAX)
    elif not elastic and not state.get("segments"):  # a state without the Trainer's count
        into = global_step - sum(max(1, -(-_counter(sampler)(e) // saved_accum))
                                 for e in range(epoch))
    else:
        into = done
    if into != done or (rest and position != done * saved_accum):
        raise BucketoptError(
            f"{where} consumed {position} batches of epoch {epoch}, but the Trainer counts "
            f"{into * saved_accum} (its global step {global_step} is {into} optimizer steps "
            f"into the epoch, x gradient_accumulation_steps={saved_accum}): the sampler state "
            "comes from another run or was edited.")
    if not rest:  # the checkpoint closed its epoch: the next one starts whole
        out.start_epoch, out.first_step = epoch + 1, global_step
        return
    out.start_epoch, out.first_step = epoch, global_step - done
    out.start_batches = done * out.grad_accum
    out.counts[epoch] = out.start_batches + rest
