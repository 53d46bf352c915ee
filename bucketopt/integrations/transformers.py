"""``BucketedTrainer``: the Hugging Face ``Trainer`` batching with :class:`BucketBatchSampler`.

>>> from bucketopt.integrations.transformers import BucketedTrainer  # doctest: +SKIP
>>> trainer = BucketedTrainer(model=model, args=args, train_dataset=ds,  # doctest: +SKIP
...                           data_collator=collator, boundaries=(256, 512, 1024, 2048),
...                           token_budget=16384)

What it changes, and nothing else:

- the training DataLoader: batches from :class:`~bucketopt.BucketBatchSampler` (one bucket per
  batch, at most ``token_budget`` padded tokens, sizes from the buckets, not
  ``per_device_train_batch_size``), with rank, world size, seed (``data_seed`` or ``seed``) and
  ``gradient_accumulation_steps`` taken from ``TrainingArguments``; ``set_epoch`` every epoch;
- every checkpoint also holds ``bucketopt_sampler.json``: the batches the training loop really
  consumed (counted where the loop receives them, never how far the loader prefetched);
- ``train(resume_from_checkpoint=...)`` puts the sampler at that position in O(1) (no replay of
  the consumed batches) where the Trainer would have skipped them, so nothing is skipped twice.

``bucketed(cls)`` makes the same subclass of any Trainer subclass (TRL's ``SFTTrainer``, ...).
transformers is imported on first use of these names (``pip install 'bucketopt[transformers]'``).
"""

from __future__ import annotations

import contextlib
import json
import os

from ..errors import BucketoptError

STATE_FILE = "bucketopt_sampler.json"
_CLASSES: dict = {}

# BucketedTrainer and BucketedTrainerMixin are built on first use (module __getattr__)
__all__ = ["STATE_FILE", "bucketed"]


def _require_transformers():
    try:
        import transformers
    except ImportError:
        raise BucketoptError("BucketedTrainer needs transformers: pip install "
                             "'bucketopt[transformers]' (after installing torch).") from None
    return transformers


def bucketed(trainer_class):
    """``trainer_class`` (a ``transformers.Trainer`` subclass) batching with bucketopt.

    >>> from trl import SFTTrainer  # doctest: +SKIP
    >>> BucketedSFTTrainer = bucketed(SFTTrainer)  # doctest: +SKIP
    """
    transformers = _require_transformers()
    if not (isinstance(trainer_class, type) and issubclass(trainer_class, transformers.Trainer)):
        raise BucketoptError(f"trainer_class must be a transformers.Trainer subclass; got "
                             f"{trainer_class!r}.")
    if trainer_class not in _CLASSES:
        _CLASSES[trainer_class] = type(f"Bucketed{trainer_class.__name__}",
                                       (_mixin(), trainer_class),
                                       {"__module__": __name__, "__doc__": _mixin().__doc__})
    return _CLASSES[trainer_class]


def __getattr__(name):  # PEP 562: the classes are built on first use, with transformers
    if name == "BucketedTrainer":
        return bucketed(_require_transformers().Trainer)
    if name == "BucketedTrainerMixin":
        _require_transformers()
        return _mixin()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _mixin():
    if "mixin" not in _CLASSES:
        _CLASSES["mixin"] = _build_mixin()
    return _CLASSES["mixin"]


def _build_mixin():
    import numpy as np
    import transformers.trainer as hf_trainer
    from torch.utils.data import DataLoader
    from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

    from ..data.histogram import validate_lengths
    from ..solution import batch_sizes_for, check_token_budget
    from ..training.sampler import BucketBatchSampler, _check_int
    from .accelerate import passthrough
    from .lengths import dataset_lengths

    class BucketedTrainerMixin:
        """A Trainer whose training batches come from :class:`bucketopt.BucketBatchSampler`.

        Extra keyword arguments (the rest go to the Trainer):

        boundaries : sequence of int
            Inclusive upper bucket edges (e.g. ``bucketopt.solve(lengths, k,
            token_budget=T).boundaries``).
        token_budget : int
            Most padded tokens per micro-batch per device (rows x padded length). The collator
            must pad each batch to its longest sample or to at most its bucket's edge (with
            ``pad_to_multiple_of=m``, solve with ``align=m``); a batch over the budget stops
            training with a clear error.
        lengths : array-like of int, optional
            One length per training sample, in dataset order. By default read from the train
            dataset (:func:`bucketopt.integrations.lengths.dataset_lengths`: a ``seq_len``-like
            column, else the ``input_ids`` list offsets).
        length_column : str, optional
            The column to read ``lengths`` from.
        sync_buckets, drop_last : as :class:`~bucketopt.BucketBatchSampler`.
        """

        def __init__(self, *args, boundaries=None, token_budget=None, lengths=None,
                     length_column=None, sync_buckets=True, drop_last=False, **kwargs):
            if boundaries is None:
                raise BucketoptError("boundaries are required: the bucket edges, e.g. "
                                     "bucketopt.solve(lengths, k, token_budget=T).boundaries.")
            if token_budget is None:
                raise BucketoptError("token_budget is required: the most padded tokens per "
                                     "micro-batch per device.")
            # cheap checks before the model and data are touched (the rest when the sampler is
            # built from the dataset's lengths)
            token_budget = check_token_budget(token_budget)
            edges = validate_lengths(boundaries, name="boundaries")
            batch_sizes_for(edges, token_budget)
            if length_column is not None and not isinstance(length_column, str):
                raise BucketoptError(f"length_column must be a column name (str); got "
                                     f"{length_column!r}.")
            self._bucket_options = {"boundaries": boundaries, "token_budget": token_budget,
                                    "sync_buckets": sync_buckets, "drop_last": drop_last}
            self._bucket_lengths = None if lengths is None else np.asarray(lengths)
            self._bucket_column = length_column
            self._bucket_sampler = None
            self._bucket_resume = None
            super().__init__(*args, **kwargs)

        # ------------------------------------------------------------------------- the sampler
        @property
        def bucket_sampler(self) -> BucketBatchSampler:
            """The training sampler (built from the train dataset on first use)."""
            if self._bucket_sampler is None:
                self._bucket_sampler = self._build_bucket_sampler()
            return self._bucket_sampler

        def _build_bucket_sampler(self):
            dataset = self.train_dataset
            if dataset is None:
                raise BucketoptError("BucketedTrainer needs a train_dataset to batch.")
            lengths = self._bucket_lengths
            if lengths is None:
                column = self._bucket_column
                names = getattr(dataset, "column_names", None) or ()
                if column is None and self.args.length_column_name in names:
                    column = self.args.length_column_name
                lengths = dataset_lengths(dataset, column=column)
            elif len(lengths) != len(dataset):
                raise BucketoptError(f"lengths has {len(lengths):,} entries but train_dataset "
                                     f"has {len(dataset):,} samples: one length per sample.")
            args = self.args
            seed = args.data_seed if args.data_seed is not None else args.seed
            return BucketBatchSampler(
                lengths, self._bucket_options["boundaries"],
                token_budget=self._bucket_options["token_budget"], seed=seed,
                rank=args.process_index if args.world_size > 1 else 0,
                world_size=max(1, args.world_size), grad_accum=args.gradient_accumulation_steps,
                packing="fixed",  # the same batch count every epoch, as the Trainer assumes
                sync_buckets=self._bucket_options["sync_buckets"],
                drop_last=self._bucket_options["drop_last"])

        def get_train_dataloader(self):
            if self.train_dataset is None:
                raise BucketoptError("BucketedTrainer needs a train_dataset to batch.")
            sampler = self.bucket_sampler
            dataset, collator = self.train_dataset, self.data_collator
            if _is_hf_dataset(dataset):
                dataset = self._remove_unused_columns(dataset, description="Training")
            else:
                collator = self._get_collator_with_removed_columns(collator,
                                                                   description="Training")
            args = self.args
            params = {"batch_sampler": sampler, "collate_fn": collator,
                      "num_workers": args.dataloader_num_workers,
                      "pin_memory": args.dataloader_pin_memory}
            if args.dataloader_num_workers > 0:
                params["persistent_workers"] = args.dataloader_persistent_workers
                if args.dataloader_prefetch_factor is not None:
                    params["prefetch_factor"] = args.dataloader_prefetch_factor
            loader = self.accelerator.prepare(DataLoader(dataset, **params))
            # the sampler is rank-aware already: a BatchSamplerShard around it (multi-process
            # accelerate) would shard it again, so make that wrapper a pass-through
            passthrough(loader, sampler)
            return loader

        def get_batch_samples(self, epoch_iterator, num_batches, *args, **kwargs):
            batches, items = super().get_batch_samples(epoch_iterator, num_batches, *args,
                                                       **kwargs)
            sampler = self._bucket_sampler
            if sampler is not None:
                budget = sampler.token_budget
                for batch in batches:
                    ids = batch.get("input_ids") if hasattr(batch, "get") else None
                    if ids is not None and ids.numel() > budget:
                        raise BucketoptError(
                            f"a collated batch holds {tuple(ids.shape)} = {ids.numel()} padded "
                            f"tokens, over token_budget={budget}: the collator pads beyond the "
                            "longest sample (pad_to_multiple_of? max_length padding?); solve "
                            "with align= that multiple, or pad to the longest sample.")
                sampler.mark_consumed(len(batches))  # what the loop really received
            return batches, items

        # ---------------------------------------------------------------- checkpoint / resume
        def _save_checkpoint(self, model, trial, *args, **kwargs):
            out = super()._save_checkpoint(model, trial, *args, **kwargs)
            if self._bucket_sampler is not None and self.args.should_save:
                folder = os.path.join(self._get_output_dir(trial=trial),
                                      f"{PREFIX_CHECKPOINT_DIR}-{self.state.global_step}")
                os.makedirs(folder, exist_ok=True)
                with open(os.path.join(folder, STATE_FILE), "w") as fh:
                    json.dump(self._bucket_sampler.state_dict(), fh)
            return out

        def _inner_training_loop(self, *args, **kwargs):
            resume = kwargs.get("resume_from_checkpoint")
            if resume is None and len(args) >= 3:
                resume = args[2]  # (batch_size, args, resume_from_checkpoint, ...)
            self._bucket_resume = resume
            with _seek_instead_of_skip(hf_trainer, self):
                return super()._inner_training_loop(*args, **kwargs)

        def _bucket_seek(self, loader, num_batches):
            """The Trainer's skip of ``num_batches`` already-trained batches, done as an O(1)
            resume of the sampler from the checkpoint's state."""
            sampler = self.bucket_sampler
            num_batches = _check_int("batches to skip", num_batches, 0)
            accum = self.args.gradient_accumulation_steps
            per_epoch = max(1, -(-sampler.plan(0).micro_steps // accum))  # the Trainer's count
            epoch = int(self.state.global_step // per_epoch)
            path = None if self._bucket_resume is None else os.path.join(
                str(self._bucket_resume), STATE_FILE)
            if path is not None and os.path.isfile(path):
                with open(path) as fh:
                    state = json.load(fh)
                if isinstance(state, dict) and state.get("world_size") not in (
                        None, sampler.world_size):
                    raise BucketoptError(
                        f"checkpoint {self._bucket_resume} was taken at world_size="
                        f"{state.get('world_size')}, this run has world_size="
                        f"{sampler.world_size}: the Trainer counts its steps per epoch from the "
                        "world size, so resume a Trainer run mid-epoch on as many processes "
                        "(BucketBatchSampler itself resumes elastically in a custom loop).")
                sampler.load_state_dict(state)
                if sampler.epoch != epoch:
                    raise BucketoptError(
                        f"checkpoint {self._bucket_resume} holds the sampler at epoch "
                        f"{sampler.epoch}, but the Trainer resumes epoch {epoch}: the checkpoint "
                        "comes from another run or its step count per epoch changed.")
                if sampler.consumed != num_batches:
                    raise BucketoptError(
                        f"checkpoint {self._bucket_resume} consumed {sampler.consumed} batches "
                        f"of epoch {sampler.epoch}, but the Trainer counts {num_batches} (its "
                        "global step x gradient_accumulation_steps): was "
                        "gradient_accumulation_steps or per-epoch step count changed?")
            else:  # a checkpoint without bucketopt's file: the plan is deterministic, seek
                sampler.set_epoch(epoch)
                state = sampler.state_dict(position=num_batches)
                sampler.load_state_dict(state)
            return loader

    return BucketedTrainerMixin


@contextlib.contextmanager
def _seek_instead_of_skip(module, trainer):
    """While ``trainer`` trains: the Trainer's ``skip_first_batches`` (a replay of the consumed
    batches, which would also skip them a second time after the sampler resumed) becomes an O(1)
    resume of the sampler, for this trainer's loader only."""
    original = getattr(module, "skip_first_batches", None)
    if original is None:  # a transformers without it: nothing to redirect
        yield
        return

    def skip_first_batches(dataloader, num_batches=0):
        sampler = trainer._bucket_sampler
        inner = getattr(dataloader, "batch_sampler", None)
        if sampler is not None and (inner is sampler
                                    or getattr(inner, "batch_sampler", None) is sampler):
            return trainer._bucket_seek(dataloader, num_batches)
        return original(dataloader, num_batches)

    module.skip_first_batches = skip_first_batches
    try:
        yield
    finally:
        module.skip_first_batches = original


def _is_hf_dataset(dataset) -> bool:
    try:
        import datasets
    except ImportError:
        return False
    return isinstance(dataset, datasets.Dataset)
