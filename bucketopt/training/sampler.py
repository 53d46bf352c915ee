"""BucketBatchSampler: the length-bucketed shuffle as a drop-in, DDP-aware, resumable batch sampler.

Every epoch is planned whole, for all ranks at once, from ``(seed, epoch)`` alone: samples are
shuffled inside their buckets, cut into batches under the token budget, and the batches are laid
out as global micro-steps of ``world_size`` batches (global batch ``i`` = micro-step
``i // world_size`` on rank ``i % world_size``). Each rank takes its column, so all ranks agree on
the plan without talking to each other, and resuming is an index into the plan (no replay).

The state saved for a resume is the position the training loop consumed (:meth:`track`,
:meth:`mark_consumed`), never a guess from how far a prefetching loader has run ahead; a state
saved at another world size or ``grad_accum`` re-plans the rest of the epoch (elastic resume).
See ``docs/sampler.md`` for the semantics and the measured diversity figures.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys

import numpy as np

from ..data.histogram import Histogram, validate_lengths
from ..errors import BucketoptError
from ..solution import batch_sizes_for, check_boundaries
from ..validate import (
    DEFAULT_PACKING,
    DEFAULT_SYNC_BUCKETS,
    INT64_MAX,
    WORLD_SIZE_LIMIT,
    check_fields,
    check_int,
    check_sync,
    check_token_budget,
    shown,
    state_int,
    state_text,
)
from ._sampler_plan import EpochPlan, build_plan, infeasible
from ._varlen_plan import VARLEN, build_varlen_plan, most_rows
from .ranks import RankedSampler, _check_bool

__all__ = ["BucketBatchSampler", "EpochPlan", "TrackedLoader"]

PACKINGS = ("fixed", "greedy", *VARLEN)
STATE_VERSION = 2
_STATE_KEYS = ("version", "epoch", "position", "seed", "fingerprint")
_V2_KEYS = ("world_size", "grad_accum", "settings", "segments")
# The kind of each field of a state (its relations are checked by load_state_dict)
_SCALARS = {"version": state_int(1, 2), "epoch": state_int(), "position": state_int(),
            "seed": state_int(), "fingerprint": state_text(64)}
_WORLD, _ACCUM = state_int(1, WORLD_SIZE_LIMIT), state_int(1, INT64_MAX)
_V2_SCALARS = {"world_size": _WORLD, "grad_accum": _ACCUM}
MAX_SEGMENTS = 64  # elastic resumes inside one epoch; each one rebuilds one plan on load
# a batch sampler pulled by one of these runs ahead of the training loop (workers, prefetch)
_LOADER_FILES = tuple(os.sep + os.path.join(*parts) + os.sep for parts in (
    ("torch", "utils", "data"), ("accelerate",), ("lightning",), ("pytorch_lightning",),
    ("transformers",)))


def _check_batch_sizes(batch_sizes, edges, token_budget) -> np.ndarray:
    """One positive integer per bucket (at most token_budget // edge when a budget is given);
    a bool, a string or an integer of thousands of digits is one clear error."""
    if isinstance(batch_sizes, (list, tuple)):
        if len(batch_sizes) != edges.size:
            raise BucketoptError(f"batch_sizes must hold one integer per bucket ({edges.size}); "
                                 f"got {shown(batch_sizes)}.", param="batch_sizes")
        batch_sizes = [check_int(v, f"batch_sizes[{i}]", low=1, high=1 << 40,
                                 param="batch_sizes") for i, v in enumerate(batch_sizes)]
    try:
        sizes = np.asarray(batch_sizes)
    except (TypeError, ValueError, OverflowError):
        raise BucketoptError(f"batch_sizes must be a list of integers >= 1; got "
                             f"{shown(batch_sizes)}.", param="batch_sizes") from None
    if sizes.ndim != 1 or sizes.size != edges.size:
        raise BucketoptError(f"batch_sizes must hold one integer per bucket ({edges.size}); got "
                             f"{shown(batch_sizes)}.", param="batch_sizes")
    if sizes.dtype.kind == "f" and np.all(np.isfinite(sizes)) and np.all(sizes == np.round(sizes)):
        sizes = sizes.astype(np.int64)
    if sizes.dtype.kind not in "iu" or np.any(sizes < 1) or np.any(sizes > 1 << 40):
        raise BucketoptError(f"batch_sizes must be integers in [1, 2**40]; got "
                             f"{shown(batch_sizes)}.", param="batch_sizes")
    sizes = sizes.astype(np.int64)
    if token_budget is not None:
        over = sizes > token_budget // edges  # no product: it could pass int64
        if over.any():
            k = int(np.flatnonzero(over)[0])
            raise BucketoptError(
                f"batch_sizes[{k}]={int(sizes[k])} rows of length {int(edges[k])} exceed "
                f"token_budget={token_budget}.", param="batch_sizes")
    return sizes


class BucketBatchSampler(RankedSampler):
    """Shuffle inside length buckets every epoch and yield batches of dataset indices.

    Iterating yields lists of ``int`` indices, so it drops into
    ``torch.utils.data.DataLoader(dataset, batch_sampler=sampler)`` (torch is never imported).

    Parameters
    ----------
    lengths : array-like of int
        Length of every sample of the dataset, in dataset order.
    boundaries : array-like of int, or None
        Inclusive upper bucket edges (e.g. ``bucketopt.solve(...).boundaries``). ``None`` only
        with ``packing="varlen"``: one bucket (plain packing of a shuffle).
    token_budget : int, optional
        Most padded tokens in one micro-batch on one GPU. ``packing="fixed"`` gives bucket ``k``
        batches of ``floor(token_budget / b_k)`` samples; ``"greedy"`` fills each batch inside
        a bucket while ``(count + 1) * max_len <= token_budget``; ``"varlen"`` packs rows of
        documents of one bucket while their real tokens stay ``<= token_budget``.
    seed : int
        The shuffle of epoch ``e`` depends only on ``(seed, e)``.
    rank, world_size : int
        This process's data-parallel rank and the number of ranks.
    grad_accum : int
        Micro-steps per optimizer step. It may not exceed the batches per rank one epoch makes.
    packing : {"fixed", "greedy", "varlen", "varlen-balanced"}
        ``"varlen"`` yields rows of documents for padding-free, document-masked attention
        (collate them with :func:`bucketopt.integrations.collate.varlen_collate`);
        ``"varlen-balanced"`` also balances the ranks inside every optimizer step (its
        documents re-dealt over the ranks of each micro-step, heavy rows grouped) so the
        heaviest rank's attention (sum of d**2) is lighter. See docs/sampler.md.
    sync_buckets : bool or "step"
        ``True``: at every micro-step all ranks take a batch of the same bucket (equal shapes, no
        stragglers), and micro-steps of each bucket are spread over the epoch in proportion to
        its batches. ``False``: batches (not micro-steps) are spread that way, so every optimizer
        step holds close to the dataset's mix, but ranks hold different buckets. ``"step"``: as
        ``False``, then the batches of each optimizer step are ordered by bucket, so the ranks
        of a micro-step hold the same or neighbouring buckets (see docs/sampler.md).
    batch_sizes : list of int, optional
        One batch size per bucket (``packing="fixed"``), e.g. ``Solution.batch_sizes`` of a
        plan solved with a memory model; ``token_budget`` is then optional (when given, every
        batch must fit it too).
    memory, memory_headroom, gpu_memory : optional
        A memory model (as :func:`bucketopt.solve` takes it): each bucket's batch size is the
        largest whose predicted peak memory fits (docs/cost_model.md).
    drop_last : bool
        ``False`` (default) keeps every sample: when the batches do not divide evenly over the
        ranks, the largest batches are split in two. ``True`` drops whole batches instead and
        :attr:`dropped` says how many samples.

    Examples
    --------
    >>> lengths = [5, 3, 9, 4, 8, 2]
    >>> ranks = [BucketBatchSampler(lengths, [4, 9], token_budget=18, world_size=2, rank=r)
    ...          for r in (0, 1)]
    >>> [len(sampler) for sampler in ranks]  # every rank the same number of batches
    [2, 2]
    >>> sorted(i for sampler in ranks for batch in sampler for i in batch)  # each index once
    [0, 1, 2, 3, 4, 5]
    >>> rows = list(BucketBatchSampler(lengths, None, token_budget=12, packing="varlen"))
    >>> sorted(i for row in rows for i in row), all(sum(lengths[i] for i in r) <= 12 for r in rows)
    ([0, 1, 2, 3, 4, 5], True)
    """

    def __init__(self, lengths, boundaries, *, token_budget=None, seed=0, rank=0, world_size=1,
                 grad_accum=1, packing=DEFAULT_PACKING, sync_buckets=DEFAULT_SYNC_BUCKETS,
                 drop_last=False, max_length=None, overflow="truncate", batch_sizes=None,
                 memory=None, memory_headroom=None, gpu_memory=None):
        if isinstance(lengths, Histogram):
            raise BucketoptError("lengths must hold one length per sample in dataset order; got "
                                 "a Histogram, which has no sample order.", param="lengths")
        from ..pairs.data import is_pairs

        self.pairs = self.bins = None
        if is_pairs(lengths):  # 2-D bins: the 1-D machinery on every sample's bin index
            from ..pairs.sampling import pair_buckets

            lengths, boundaries, batch_sizes, self.pairs, self.bins = pair_buckets(
                lengths, boundaries, token_budget=token_budget, batch_sizes=batch_sizes,
                packing=packing, max_length=max_length, memory=memory)
            token_budget = None
        from ..data.overflow import overflow_items

        # with max_length, the sampler plans items: whole samples, or chunks of long ones
        self.max_length, self.overflow = max_length, overflow
        lengths, self._item_index, self._item_chunk = overflow_items(
            validate_lengths(lengths), max_length, overflow)
        hist = Histogram.from_lengths(lengths)
        from ..cost.memory import load_memory

        memory = load_memory(memory, gpu_memory=gpu_memory, headroom=memory_headroom)
        if batch_sizes is not None and memory is not None:
            raise BucketoptError("give batch_sizes or memory, not both (the memory model sets "
                                 "the batch sizes).", param=None)
        if packing not in PACKINGS:
            raise BucketoptError(f"packing must be one of {PACKINGS}; got {shown(packing)}.",
                                 param="packing")
        own_sizes = batch_sizes is not None or memory is not None
        if token_budget is None and (packing != "fixed" or not own_sizes):
            raise BucketoptError("token_budget is required: the most padded tokens per "
                                 "micro-batch; got None" + (
                                     " (batch_sizes= or memory= replace it with "
                                     "packing='fixed')." if packing == "fixed" else "."),
                                 param="token_budget")
        self.token_budget = check_token_budget(token_budget, hist)
        varlen = packing in VARLEN
        if own_sizes and packing != "fixed":
            raise BucketoptError(f"batch_sizes and memory apply to packing='fixed'; got "
                                 f"packing={shown(packing)}.", param=None)
        if boundaries is None and varlen:
            boundaries = [hist.max_length]  # one bucket: plain packing of a shuffle
        elif boundaries is None:
            raise BucketoptError(f"boundaries are required with packing={shown(packing)}, e.g. "
                                 "bucketopt.solve(lengths, k, token_budget=T).boundaries; None "
                                 "(one bucket) is for packing='varlen' only.", param="boundaries")
        self.edges = check_boundaries(boundaries, hist)
        # rows of documents hold real tokens: a bucket edge above the budget is no obstacle
        if batch_sizes is not None:
            self.batch_sizes = _check_batch_sizes(batch_sizes, self.edges, self.token_budget)
        else:
            self.batch_sizes = None if varlen else batch_sizes_for(self.edges, self.token_budget,
                                                                   memory)
        self.memory = memory
        self._init_ranks(seed=seed, rank=rank, world_size=world_size)
        self.grad_accum = check_int(grad_accum, "grad_accum", low=1, high=INT64_MAX)
        self.packing = packing
        self.sync_buckets = check_sync(sync_buckets)
        self.drop_last = _check_bool("drop_last", drop_last)
        self.lengths = lengths
        self._bucket_of = _bucket_ids(self.edges, lengths)
        self._members = np.argsort(self._bucket_of, kind="stable")  # indices grouped by bucket
        self._bucket_counts = np.bincount(self._bucket_of, minlength=self.edges.size)
        self._settings = {
            "samples": int(lengths.size),
            "lengths": _digest(lengths),
            "boundaries": [int(b) for b in self.edges],
            "token_budget": None if self.token_budget is None else int(self.token_budget),
            "packing": packing,
            "sync_buckets": self.sync_buckets,
            "drop_last": self.drop_last,
        }
        if own_sizes:  # states saved with T // b batch sizes keep their fingerprint
            self._settings["batch_sizes"] = [int(b) for b in self.batch_sizes]
        if max_length is not None:  # states saved without max_length keep their fingerprint
            self._settings.update(max_length=int(max_length), overflow=overflow)
        self._fingerprint = _digest(json.dumps(self._settings, sort_keys=True).encode())
        if not self.drop_last:
            # greedy never makes more batches than fixed packing, so when the fixed count can be
            # split up to a multiple of world_size every epoch can: refuse now, not mid-training
            most = (most_rows(lengths, self._bucket_of, self.edges.size, self.token_budget)
                    if varlen else int(np.sum(-(-self._bucket_counts // self.batch_sizes))))
            if -(-most // self.world_size) * self.world_size > lengths.size:
                raise infeasible(self, lengths.size, most, self.world_size)
        self._epoch = 0
        self._segments = ()  # elastic history of self._epoch: ((world_size, grad_accum, pos),..)
        self._resume = 0  # where the next iteration starts (set by load_state_dict)
        self._handed = 0  # batches of this rank handed out in the current epoch
        self._consumed = 0  # of those, batches the training loop reported (track/mark_consumed)
        self._tracked = False  # the loop reports what it consumed
        self._driven = False  # the current iteration is pulled by a (prefetching) loader
        self._cache: tuple | None = None
        self._check_epoch_fits(self.plan(0))  # fail now when the configuration cannot train

    @classmethod
    def from_plan(cls, plan, lengths, *, rank=0, world_size=None, seed=0,
                  allow_other_lengths=False, **overrides) -> BucketBatchSampler:
        """The sampler a plan describes (:mod:`bucketopt.plan`): its boundaries, batch sizes,
        token budget, ``sync_buckets``, ``packing``, ``max_length`` and ``overflow``.

        ``plan``: a dict (``Solution.to_plan()``) or the path of a plan JSON. ``lengths``: one
        length per sample, in dataset order; their fingerprint (count, tokens, histogram hash)
        must be the plan's, unless ``allow_other_lengths=True`` (e.g. a later shard of the same
        data). ``world_size`` defaults to the plan's. ``overrides``: any other keyword of the
        constructor (``grad_accum``, ``drop_last``, ...) or a plan setting to replace.

        Examples
        --------
        >>> import bucketopt
        >>> lengths = [5, 3, 9, 4, 8, 2]
        >>> plan = bucketopt.solve(lengths, 2, token_budget=18).to_plan()
        >>> sampler = BucketBatchSampler.from_plan(plan, lengths)
        >>> sorted(i for batch in sampler for i in batch)
        [0, 1, 2, 3, 4, 5]
        """
        from ..plan import check_lengths, load_plan

        plan = load_plan(plan)
        if plan["kind"] == "2d":  # bins of pairs (bucketopt.pairs.sampling)
            check_lengths(plan, lengths, allow_other_lengths=allow_other_lengths)
            kwargs = dict(token_budget=plan["token_budget"], batch_sizes=plan["batch_sizes"])
            kwargs.update(overrides)
            return cls(lengths, kwargs.pop("boundaries", plan["bins"]), seed=seed, rank=rank,
                       world_size=plan["world_size"] if world_size is None else world_size,
                       **kwargs)
        if isinstance(lengths, Histogram):
            raise BucketoptError("lengths must hold one length per sample in dataset order; "
                                 "got a Histogram, which has no sample order.", param="lengths")
        lengths = validate_lengths(lengths)
        check_lengths(plan, lengths, allow_other_lengths=allow_other_lengths)
        kwargs = dict(token_budget=plan["token_budget"], packing=plan["packing"],
                      sync_buckets=plan["sync_buckets"], max_length=plan["max_length"],
                      overflow=plan["overflow"] or "truncate",
                      batch_sizes=plan["batch_sizes"] if plan["packing"] == "fixed" else None)
        kwargs.update(overrides)
        if "memory" in overrides and "batch_sizes" not in overrides:
            kwargs["batch_sizes"] = None  # the memory model given sets them
        return cls(lengths, kwargs.pop("boundaries", plan["boundaries"]), seed=seed, rank=rank,
                   world_size=plan["world_size"] if world_size is None else world_size,
                   **kwargs)

    def _check_epoch_fits(self, plan: EpochPlan) -> None:
        if plan.n_batches == 0:
            raise BucketoptError(
                f"drop_last=True leaves no batch: {self.lengths.size} samples make "
                f"{plan.natural_batches} batches under token_budget={self.token_budget}, fewer "
                f"than one per rank for world_size={self.world_size}; pass drop_last=False, "
                "use fewer ranks or a smaller token_budget.", param="drop_last")
        if self.grad_accum > plan.micro_steps:
            raise BucketoptError(
                f"grad_accum={self.grad_accum} is more than the {plan.micro_steps} "
                f"batch{'es' if plan.micro_steps != 1 else ''} per rank one epoch makes "
                f"({self.lengths.size} samples, token_budget="
                f"{self.token_budget}, world_size={self.world_size}): not one optimizer step "
                f"could be filled; use grad_accum <= {plan.micro_steps}, a smaller token_budget "
                "or more data.", param=None)

    # ----------------------------------------------------------------------------- the torch API
    def _new_epoch(self) -> None:
        # another epoch: its plan starts at its beginning (re-selecting a checkpoint's epoch
        # keeps its resume point, as set_epoch only calls this for a new epoch)
        self._segments = ()
        self._resume = self._handed = self._consumed = 0
        self._driven = False

    def __len__(self) -> int:
        """Batches the next iteration yields on this rank (the epoch, less a resume point)."""
        return self.plan().micro_steps - self._resume

    def __iter__(self):
        plan = self.plan()
        start, self._resume = self._resume, 0
        self._handed = self._consumed = start
        self._driven = False
        order, starts, stops = plan.order, plan.starts, plan.stops
        first = True
        for i in range(start * plan.world_size + self.rank, plan.n_batches, plan.world_size):
            if first:  # who pulls the batches: a DataLoader (or wrapper) fetches ahead
                self._driven = _pulled_by_loader(sys._getframe(1))
                first = False
            self._handed += 1
            yield self._items(order[starts[i]:stops[i]])

    def _items(self, rows) -> list:
        """Dataset indices of planned items; (index, chunk) pairs with overflow="split"."""
        if self._item_index is None:
            return rows.tolist()
        if self._item_chunk is None:
            return self._item_index[rows].tolist()
        return list(zip(self._item_index[rows].tolist(), self._item_chunk[rows].tolist()))

    # ---------------------------------------------------------------------- what was consumed
    def track(self, loader) -> TrackedLoader:
        """Wrap the loader built on this sampler so that every batch the loop receives counts.

        ``state_dict()`` then records the batches the training loop really consumed, however far
        the loader's workers have prefetched.
        """
        self._tracked = True
        return TrackedLoader(loader, self)

    def mark_consumed(self, batches=1) -> None:
        """Report that the training loop received ``batches`` more batches of this epoch (for
        loops that count themselves; :meth:`track` does it for you)."""
        batches = check_int(batches, "batches", low=0, high=INT64_MAX)
        if self._consumed + batches > self._handed:
            raise BucketoptError(
                f"batches={batches} would bring the consumed count to "
                f"{self._consumed + batches}, more than the {self._handed} batches this sampler "
                f"has handed out in epoch {self._epoch}; report batches of this sampler's "
                "current iteration only.", param="batches")
        self._tracked = True
        self._consumed += batches

    @property
    def consumed(self) -> int:
        """Batches of this epoch the loop has reported (or the resume point)."""
        return self._consumed

    # -------------------------------------------------------------------------- resume state
    def state_dict(self, *, position=None) -> dict:
        """The resume point: epoch, batches the loop consumed this epoch, seed and settings.

        The position is the count the training loop reported (:meth:`track` or
        :meth:`mark_consumed`); or ``position``, the number of batches the loop has consumed in
        this epoch; or, for a sampler iterated directly, the batches it handed out. Without one of
        these, a sampler pulled by a DataLoader is refused: its workers run ahead of the loop, so
        the count handed out is not what was trained. Every rank is at the same position, so
        rank 0's state resumes all ranks, at this world size or another (elastic).
        """
        steps = self.plan().micro_steps
        if position is not None:
            position = check_int(position, "position", low=0, high=INT64_MAX)
            if position > steps:
                raise BucketoptError(f"position must be <= {steps} (batches per rank in epoch "
                                     f"{self._epoch}); got {position}.", param="position")
        elif self._tracked:
            position = self._consumed
        elif self._driven:
            raise BucketoptError(
                f"state_dict() cannot tell how many of the {self._handed} batches handed out in "
                f"epoch {self._epoch} the training loop consumed: a DataLoader fetches ahead of "
                "the loop (workers, prefetch_factor, accelerate); iterate "
                "sampler.track(loader) or pass position=<batches consumed this epoch>.", param=None)
        else:
            position = self._handed
        return {"version": STATE_VERSION, "epoch": self._epoch, "position": int(position),
                "seed": self.seed, "fingerprint": self._fingerprint,
                "world_size": self.world_size, "grad_accum": self.grad_accum,
                "segments": [list(s) for s in self._segments], "settings": dict(self._settings)}

    def load_state_dict(self, state) -> None:
        """Resume at the state's epoch and position: the next iteration yields exactly the
        batches that were still to come.

        A state saved at another ``world_size`` or ``grad_accum`` re-plans the rest of the epoch
        over this sampler's ranks: every sample not yet consumed comes exactly once, and every
        rank gets the same number of batches. Any other setting must match; the message names
        the one that differs.
        """
        if not isinstance(state, dict):
            raise BucketoptError(f"state must be a dict from state_dict(); got "
                                 f"{type(state).__name__}.", param="state")
        missing = [key for key in _STATE_KEYS if key not in state]
        if missing:
            raise BucketoptError(f"state is missing {', '.join(missing)}: pass a dict returned "
                                 "by BucketBatchSampler.state_dict().", param="state")
        version = state["version"]
        if isinstance(version, (bool, np.bool_)) or not isinstance(version, (int, np.integer)):
            version = None  # an array, a string, ...: refused below
        check_fields(state, _SCALARS)  # each field's kind: never an array, a string for a number
        if version == 1:
            saved_ws, saved_ga, segments = self._check_v1(state)
        elif version == STATE_VERSION:
            saved_ws, saved_ga, segments = self._check_v2(state)
        else:
            raise BucketoptError(f"state version must be 1 or {STATE_VERSION}"
                                 f"; got {shown(version)}.", param="state")
        if int(state["seed"]) != self.seed:
            raise BucketoptError(f"state seed={shown(state['seed'])} does not match this sampler's "
                                 f"seed={self.seed}.", param="state")
        epoch = check_int(state["epoch"], "state epoch", low=0, high=INT64_MAX)
        position = check_int(state["position"], "state position", low=0, high=INT64_MAX)
        saved = self._chain(epoch, segments, saved_ws, saved_ga)
        if position > saved.micro_steps:
            raise BucketoptError(f"state position must be <= {saved.micro_steps} (batches per "
                                 f"rank in epoch {epoch}); got {position}.", param="state")
        plan = saved
        if (saved_ws, saved_ga) != (self.world_size, self.grad_accum):  # elastic: re-plan the rest
            members = saved.indices_from(position * saved_ws)
            segments = (*segments, (saved_ws, saved_ga, position))
            position = 0
            # the re-planned rest, built (and checked) now, not mid-training; each plan of the
            # chain is built once
            plan = self._chain(epoch, segments, self.world_size, self.grad_accum, members)
        self._epoch = epoch
        self._segments = segments
        self._cache = ((epoch, segments), plan)
        self._resume = self._handed = self._consumed = position
        self._driven = False

    def _check_v1(self, state):
        legacy = _legacy_fingerprint(self)
        if str(state["fingerprint"]) != legacy:
            raise BucketoptError(
                "state (version 1) was saved by a sampler with other lengths, boundaries, "
                "token_budget, world_size, grad_accum, packing, sync_buckets or drop_last; "
                "version 1 states do not record which (fingerprint "
                f"{shown(state['fingerprint'])}, this sampler {shown(legacy)}).", param="state")
        return self.world_size, self.grad_accum, ()

    def _check_v2(self, state):
        missing = [key for key in _V2_KEYS if key not in state]
        if missing:
            raise BucketoptError(f"state is missing {', '.join(missing)}: pass a dict returned "
                                 "by BucketBatchSampler.state_dict().", param="state")
        saved = state["settings"]
        if not isinstance(saved, dict):
            raise BucketoptError(f"state settings must be a dict; got {type(saved).__name__}.",
                                 param="state")
        differ = [key for key in self._settings if not _same(saved.get(key), self._settings[key])]
        if differ:
            raise BucketoptError("state was saved by a sampler with other settings: " + "; ".join(
                _describe(key, saved.get(key), self._settings[key]) for key in differ) + ".",
                                 param="state")
        if str(state["fingerprint"]) != self._fingerprint:
            raise BucketoptError(f"state fingerprint {shown(state['fingerprint'])} does not "
                                 f"match its settings (this sampler "
                                 f"{shown(self._fingerprint)}): the state was edited or "
                                 "corrupted.", param="state")
        v2 = check_fields(state, _V2_SCALARS)
        saved_ws, saved_ga = v2["world_size"], v2["grad_accum"]
        n = self.lengths.size
        if max(saved_ws, saved_ga) > max(n, self.world_size, self.grad_accum):
            raise BucketoptError(f"state world_size={saved_ws}, grad_accum={saved_ga}: more than "
                                 f"the {n:,} samples; the state was edited or corrupted.",
                                 param="state")
        raw = state["segments"]
        if not isinstance(raw, (list, tuple)) or len(raw) > MAX_SEGMENTS:
            raise BucketoptError(f"state segments must be a list of at most {MAX_SEGMENTS} "
                                 "[world_size, grad_accum, position] entries.", param="state")
        segments = []
        for entry in raw:
            if not isinstance(entry, (list, tuple)) or len(entry) != 3:
                raise BucketoptError("state segments must hold [world_size, grad_accum, "
                                     f"position] entries; got {shown(entry)}.", param="state")
            segment = (_WORLD(entry[0], "segments[][0] (world_size)"),
                       _ACCUM(entry[1], "segments[][1] (grad_accum)"),
                       state_int()(entry[2], "segments[][2] (position)"))
            if segment[:2] == (segments[-1][:2] if segments else None):
                raise BucketoptError(f"state segment {list(segment)} repeats the world size and "
                                     "grad_accum of the one before it: a segment is recorded only "
                                     "when they change; the state was edited or corrupted.",
                                     param="state")
            if max(segment[:2]) > max(n, self.world_size, self.grad_accum):
                raise BucketoptError(f"state segment {list(segment)}: more ranks or micro-steps "
                                     f"than the {n:,} samples; the state was edited or corrupted.",
                                     param="state")
            segments.append(segment)
        if segments and segments[-1][:2] == (saved_ws, saved_ga):
            raise BucketoptError(f"state segment {list(segments[-1])} has the state's own world "
                                 f"size and grad_accum ({saved_ws}, {saved_ga}): a segment is "
                                 "recorded only when they change; the state was edited or "
                                 "corrupted.", param="state")
        return saved_ws, saved_ga, tuple(segments)

    # ---------------------------------------------------------------------------- introspection
    @property
    def dropped(self) -> int:
        """Samples the current epoch leaves out (0 unless ``drop_last=True``)."""
        return self.plan().dropped

    def plan(self, epoch=None) -> EpochPlan:
        """The whole epoch for every rank (built from ``(seed, epoch)``, cached per epoch).

        After an elastic resume, the resumed epoch's plan holds only the rest of that epoch.
        """
        epoch = self._epoch if epoch is None else check_int(epoch, "epoch", low=0, high=INT64_MAX)
        segments = self._segments if epoch == self._epoch else ()
        key = (epoch, segments)
        if self._cache is None or self._cache[0] != key:
            self._cache = (key, self._chain(epoch, segments, self.world_size, self.grad_accum))
        return self._cache[1]

    def _chain(self, epoch, segments, world_size, grad_accum, members=False) -> EpochPlan:
        """The plan of ``epoch`` at (world_size, grad_accum) after the elastic ``segments``
        (``members``: the samples they leave, when already known)."""
        build = build_varlen_plan if self.packing in VARLEN else build_plan
        if members is False:
            members = self._members_after(epoch, segments)
        return build(self, epoch, _rng(self.seed, epoch, len(segments)),
                     world_size=world_size, grad_accum=grad_accum, members=members,
                     segments=segments)

    def _members_after(self, epoch, segments):
        """The samples the elastic ``segments`` of ``epoch`` leave (None: every sample): one
        plan built per segment that consumed batches (a segment at position 0 consumed nothing
        and, without drop_last, leaves every sample it had: no plan to build)."""
        members = None
        build = build_varlen_plan if self.packing in VARLEN else build_plan
        for i, (G, A, position) in enumerate(segments):
            if position == 0 and not self.drop_last:
                continue
            earlier = build(self, epoch, _rng(self.seed, epoch, i), world_size=G,
                            grad_accum=A, members=members, segments=segments[:i])
            if position > earlier.micro_steps:
                raise BucketoptError(f"state segment position must be <= {earlier.micro_steps} "
                                     f"(batches per rank at world_size={G}); got {position}.",
                                     param="state")
            members = earlier.indices_from(position * G)
        return members

    def epoch_view(self, epoch=None, *, pad=None):
        """The epoch as an :class:`bucketopt.training.epoch.Epoch` over all ranks in step order
        (global batches ``i*G .. i*G + G - 1`` form micro-step ``i``), for the cost model.

        ``pad="batch"`` (the default for padded batches) pads each batch to its longest sample;
        ``"edge"`` to its bucket edge; ``"varlen"`` (the default for ``packing="varlen"``) times
        each batch as one padding-free row (real tokens, attention on the sum of d**2).
        """
        from .epoch import epoch_from_batches

        plan = self.plan(epoch)
        if pad is None:
            pad = "varlen" if self.packing in VARLEN else "batch"
        if self.packing in VARLEN:
            name = "packed" if self.edges.size == 1 else "packed-bucketed"
            name += "-balanced" if self.packing == "varlen-balanced" else ""
        else:
            name = {True: "bucketed", False: "bucketed-unsynced", "step": "bucketed-step"}[
                self.sync_buckets]
        return epoch_from_batches(self.lengths, plan.batches(), strategy=name, pad=pad,
                                  edges=self.edges, buckets=plan.buckets)

    def __repr__(self):
        return (f"BucketBatchSampler(n={self.lengths.size:,}, buckets={self.edges.size}, "
                f"token_budget={self.token_budget}, rank={self.rank}, "
                f"world_size={self.world_size}, grad_accum={self.grad_accum}, "
                f"packing={shown(self.packing)}, sync_buckets={self.sync_buckets}, "
                f"drop_last={self.drop_last}, epoch={self._epoch})")


class TrackedLoader:
    """A loader whose batches count as consumed when the training loop receives them.

    Built by :meth:`BucketBatchSampler.track`. Iterating it iterates the wrapped loader; every
    other attribute (``dataset``, ``batch_size``, ...) is the wrapped loader's.
    """

    def __init__(self, loader, sampler: BucketBatchSampler):
        self.loader = loader
        self.sampler = sampler

    def __iter__(self):
        for batch in self.loader:
            self.sampler.mark_consumed(1)
            yield batch

    def __len__(self):
        return len(self.loader)

    def state_dict(self) -> dict:
        return self.sampler.state_dict()

    def load_state_dict(self, state) -> None:
        self.sampler.load_state_dict(state)

    def __getattr__(self, name):
        if name in ("loader", "sampler"):
            raise AttributeError(name)
        return getattr(self.loader, name)


# ---------------------------------------------------------------------------------- validation
def _rng(seed, epoch, segment):
    # segment 0 is the epoch as first planned: the same generator as ever
    return np.random.default_rng([seed, epoch] if segment == 0 else [seed, epoch, segment])


def _pulled_by_loader(frame) -> bool:
    name = frame.f_code.co_filename if frame is not None else ""
    return any(part in name for part in _LOADER_FILES)


def _same(saved, mine) -> bool:
    """Whether a saved setting equals this sampler's (an array, or anything whose comparison
    fails, is not)."""
    if isinstance(saved, np.ndarray):
        return False
    try:
        return bool(saved == mine)
    except (TypeError, ValueError):
        return False


def _describe(key, saved, mine) -> str:
    if key == "lengths":
        return "the lengths differ (same count, other values)"
    if key == "samples":
        return f"samples={shown(saved)} (this sampler: {shown(mine)}): the dataset differs"
    return f"{key}={shown(saved)} (this sampler: {key}={shown(mine)})"


CHUNK = 1 << 20  # samples per step of the per-sample passes (bounded temporaries)


def _bucket_ids(edges, lengths) -> np.ndarray:
    """Each sample's bucket, in the smallest integer type that holds it (one byte for up to 127
    buckets), computed a chunk at a time: no full-size int64 temporary."""
    out = np.empty(lengths.size, dtype=np.min_scalar_type(-int(edges.size)))
    for lo in range(0, lengths.size, CHUNK):
        out[lo:lo + CHUNK] = np.searchsorted(edges, lengths[lo:lo + CHUNK], side="left")
    return out


def _digest(data) -> str:
    """First 16 hex digits of the SHA-256 of ``data`` (an array: of its int64 values, hashed a
    chunk at a time, the same digest as hashing the whole int64 buffer)."""
    h = hashlib.sha256()
    if isinstance(data, np.ndarray):
        for lo in range(0, data.size, CHUNK):
            h.update(np.ascontiguousarray(data[lo:lo + CHUNK], dtype=np.int64).tobytes())
    else:
        h.update(data)
    return h.hexdigest()[:16]


def _legacy_fingerprint(sampler) -> str:
    """The configuration hash of version-1 states (world size and grad_accum included)."""
    digest = hashlib.sha256()
    digest.update(np.ascontiguousarray(sampler.lengths, dtype=np.int64).tobytes())
    digest.update(np.ascontiguousarray(sampler.edges, dtype=np.int64).tobytes())
    config = dict(token_budget=sampler.token_budget, world_size=sampler.world_size,
                  grad_accum=sampler.grad_accum, packing=sampler.packing,
                  sync_buckets=sampler.sync_buckets, drop_last=sampler.drop_last)
    digest.update(json.dumps(config, sort_keys=True).encode())
    return digest.hexdigest()[:16]
