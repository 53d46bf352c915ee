"""``BucketedTrainer``: the Hugging Face ``Trainer`` batching with :class:`BucketBatchSampler`.

>>> from bucketopt.integrations.transformers import BucketedTrainer  # doctest: +SKIP
>>> trainer = BucketedTrainer(model=model, args=args, train_dataset=ds,  # doctest: +SKIP
...                           data_collator=collator, boundaries=(256, 512, 1024, 2048),
...                           token_budget=16384)
>>> packed = BucketedTrainer(model=model, args=args, train_dataset=ds,  # doctest: +SKIP
...                          boundaries=None, token_budget=16384, packing="varlen-balanced")

What it changes, and nothing else:

- the training DataLoader: batches from :class:`~bucketopt.BucketBatchSampler` (one bucket per
  batch, at most ``token_budget`` padded tokens, sizes from the buckets, not
  ``per_device_train_batch_size``; or, with ``packing="varlen"``, rows of documents flattened
  into one sequence), with rank, world size, seed (``data_seed`` or ``seed``) and
  ``gradient_accumulation_steps`` taken from ``TrainingArguments``; ``set_epoch`` every epoch;
- the step accounting: each epoch's optimizer steps, the total (``max_steps``, which sizes the
  learning-rate schedule) and the epoch boundaries come from the sampler's plans, so epochs of
  different row counts (packed rows) and an elastic resume count right;
- every checkpoint also holds ``bucketopt_sampler.json``: the batches the training loop really
  consumed (counted where the loop receives them, never how far the loader prefetched);
- ``train(resume_from_checkpoint=...)`` puts the sampler at that position in O(1) (no replay of
  the consumed batches) where the Trainer would have skipped them, so nothing is skipped twice;
  at another world size or ``gradient_accumulation_steps``, the rest of the epoch is re-planned;
- a causal LM whose forward takes no loss kwargs gets a loss function that divides by the step's
  token count (``num_items_in_batch``), so a step's loss is the mean over all its tokens.

``bucketed(cls)`` makes the same subclass of any Trainer subclass (TRL's ``SFTTrainer``, ...).
transformers is imported on first use of these names (``pip install '.[transformers]'`` in a
checkout of bucketopt, or ``pip install 'bucketopt[transformers]'``).
"""

from __future__ import annotations

import contextlib
import inspect
import json
import os
import warnings

from ..errors import BucketoptError, install_hint

STATE_FILE = "bucketopt_sampler.json"
_CLASSES: dict = {}

# BucketedTrainer and BucketedTrainerMixin are built on first use (module __getattr__)
__all__ = ["STATE_FILE", "bucketed"]


def _require_transformers():
    try:
        import transformers
    except ImportError:
        raise BucketoptError("BucketedTrainer needs transformers: "
                             f"{install_hint('transformers')}, after installing torch.") from None
    return transformers


def bucketed(trainer_class):
    """``trainer_class`` (a ``transformers.Trainer`` subclass) batching with bucketopt.

    >>> from trl import SFTTrainer  # doctest: +SKIP
    >>> BucketedSFTTrainer = bucketed(SFTTrainer)  # doctest: +SKIP
    """
    transformers = _require_transformers()
    if not (isinstance(trainer_class, type) and issubclass(trainer_class, transformers.Trainer)):
        raise BucketoptError(f"trainer_class must be a transformers.Trainer subclass; got "
                             f"{trainer_class!r}.", param="trainer_class")
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
    import transformers
    import transformers.trainer as hf_trainer
    from torch.utils.data import DataLoader
    from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

    from ..data.histogram import validate_lengths
    from ..solution import batch_sizes_for
    from ..training.sampler import PACKINGS, VARLEN, BucketBatchSampler
    from ..validate import INT64_MAX, check_int, check_token_budget
    from ._schedule import trainer_schedule
    from .accelerate import passthrough
    from .lengths import dataset_lengths

    has_epoch_hooks = all(hasattr(transformers.Trainer, name) for name in (
        "_run_epoch", "_init_training_state", "set_initial_training_values"))

    class BucketedTrainerMixin:
        """A Trainer whose training batches come from :class:`bucketopt.BucketBatchSampler`.

        Extra keyword arguments (the rest go to the Trainer):

        boundaries : sequence of int, or None
            Inclusive upper bucket edges (e.g. ``bucketopt.solve(lengths, k,
            token_budget=T).boundaries``). ``None`` with ``packing="varlen"``: one bucket (plain
            packing of a shuffle).
        token_budget : int
            Padded batches: most padded tokens per micro-batch per device (rows x padded length).
            The collator must pad each batch to its longest sample or to at most its bucket's edge
            (with ``pad_to_multiple_of=m``, solve with ``align=m``). Packed rows: most real tokens
            per row. A batch over the budget stops training with a clear error.
        packing : {"fixed", "greedy", "varlen", "varlen-balanced"}
            As :class:`~bucketopt.BucketBatchSampler`. ``"varlen"`` and ``"varlen-balanced"`` train
            rows of documents flattened into one sequence (``input_ids`` of shape ``(1, tokens)``,
            ``position_ids`` restarting per document, every document's first label -100); without
            a ``data_collator`` the trainer collates them with
            :class:`~bucketopt.integrations.collate.VarlenCollator` (adding flash-attention's
            ``cu_seq_lens`` when the model's attention is a flash one), or turns on
            ``padding_free`` in TRL's collator. Epochs may differ in rows: the trainer counts each
            epoch's steps from its plan.
        lengths : array-like of int, optional
            One length per training sample, in dataset order. By default read from the train
            dataset (:func:`bucketopt.integrations.lengths.dataset_lengths`: a ``seq_len``-like
            column, else the ``input_ids`` list offsets).
        length_column : str, optional
            The column to read ``lengths`` from.
        sync_buckets, drop_last : as :class:`~bucketopt.BucketBatchSampler`.
        plan : dict or path, optional
            A plan (``Solution.to_plan()``, ``bucketopt solve -o plan.json``): its boundaries,
            batch sizes, token budget, ``packing``, ``sync_buckets`` and ``max_length`` /
            ``overflow`` replace ``boundaries`` and ``token_budget`` (give one or the other;
            ``packing`` and ``sync_buckets`` given too must agree with it), as
            :meth:`BucketBatchSampler.from_plan` builds the sampler. The training lengths must
            have the plan's fingerprint, unless ``allow_other_lengths=True``. The world size is
            the Trainer's (``TrainingArguments``), whatever the plan was scored at.
        """

        def __init__(self, *args, boundaries=None, token_budget=None, lengths=None,
                     length_column=None, packing=None, sync_buckets=None, drop_last=False,
                     plan=None, allow_other_lengths=False, **kwargs):
            self._bucket_plan = None
            if plan is not None:
                from ..plan import load_plan

                if boundaries is not None or token_budget is not None:
                    raise BucketoptError("give plan= or boundaries= and token_budget=, not both "
                                         "(the plan holds the boundaries, batch sizes and token "
                                         "budget).", param="plan")
                plan = load_plan(plan)
                if plan["kind"] == "2d":
                    raise BucketoptError("BucketedTrainer takes 1-D plans; a 2-D plan (bins of "
                                         "pairs) trains through BucketBatchSampler.from_plan "
                                         "in your own loop.", param="plan")
                for name, given in (("packing", packing), ("sync_buckets", sync_buckets)):
                    if given is not None and given != plan[name]:
                        raise BucketoptError(
                            f"{name}={given!r} differs from the plan's {name}="
                            f"{plan[name]!r}; drop it (the plan sets it) or solve another "
                            "plan.", param=name)
                if not isinstance(allow_other_lengths, bool):
                    raise BucketoptError("allow_other_lengths must be True or False; got "
                                         f"{allow_other_lengths!r:.60}.",
                                         param="allow_other_lengths")
                self._bucket_plan = plan
                boundaries, packing = plan["boundaries"], plan["packing"]
                sync_buckets = plan["sync_buckets"]
                token_budget = plan["token_budget"]
                if token_budget is None:  # batch sizes from a memory model: their largest batch
                    token_budget = max(b * e for b, e in zip(plan["batch_sizes"], boundaries))
            self._bucket_allow_other = allow_other_lengths
            packing = "fixed" if packing is None else packing
            sync_buckets = True if sync_buckets is None else sync_buckets
            if packing not in PACKINGS:
                raise BucketoptError(f"packing must be one of {PACKINGS}; got {packing!r}.",
                                     param="packing")
            varlen = packing in VARLEN
            if boundaries is None and not varlen:
                raise BucketoptError("boundaries are required: the bucket edges, e.g. "
                                     "bucketopt.solve(lengths, k, token_budget=T).boundaries "
                                     "(None, one bucket, with packing='varlen' only).",
                                     param="boundaries")
            if token_budget is None:
                raise BucketoptError("token_budget is required: the most padded tokens per "
                                     "micro-batch per device (real tokens per row when packed).",
                                     param="token_budget")
            if packing != "fixed" and not has_epoch_hooks:
                raise BucketoptError(
                    f"packing={packing!r} makes epochs of different lengths, which needs a "
                    f"transformers Trainer with _run_epoch (5.x); transformers "
                    f"{transformers.__version__} has none: upgrade, or use packing='fixed'.",
                    param="packing")
            # cheap checks before the model and data are touched (the rest when the sampler is
            # built from the dataset's lengths)
            token_budget = check_token_budget(token_budget)
            if boundaries is not None and self._bucket_plan is None:
                edges = validate_lengths(boundaries, name="boundaries", param="boundaries")
                if not varlen:
                    batch_sizes_for(edges, token_budget)
            if length_column is not None and not isinstance(length_column, str):
                raise BucketoptError(f"length_column must be a column name (str); got "
                                     f"{length_column!r}.", param="length_column")
            self._bucket_options = {"boundaries": boundaries, "token_budget": token_budget,
                                    "packing": packing, "sync_buckets": sync_buckets,
                                    "drop_last": drop_last}
            self._bucket_lengths = None if lengths is None else np.asarray(lengths)
            self._bucket_column = length_column
            self._bucket_sampler = None
            self._bucket_resume = None
            self._bucket_schedule = None
            self._bucket_first_step = 0
            self._bucket_use_cache = None
            collator = kwargs.get("data_collator", args[2] if len(args) > 2 else None)
            super().__init__(*args, **kwargs)
            if varlen and collator is None:
                self._install_flattening_collator()
            self._install_token_mean_loss()

        def _install_flattening_collator(self):
            collator = self.data_collator
            if hasattr(collator, "padding_free"):  # TRL's collator flattens rows itself
                collator.padding_free = True
                return
            from .collate import VarlenCollator

            implementation = str(getattr(getattr(self.model, "config", None),
                                         "_attn_implementation", "") or "")
            self.data_collator = VarlenCollator(
                attention="flash_attn" if "flash" in implementation else "position_ids")

        def _install_token_mean_loss(self):
            """A causal LM whose forward takes no loss kwargs: the Trainer would average the
            micro-batches' means; a loss function of our own makes it count every token."""
            base = getattr(super(), "compute_loss", None)
            if (getattr(self, "model_accepts_loss_kwargs", True)
                    or getattr(self, "compute_loss_func", True) is not None
                    or getattr(self, "label_smoother", None) is not None
                    or not getattr(self, "_loss_shifts_labels", False)
                    or getattr(base, "__func__", None) is not transformers.Trainer.compute_loss):
                return
            self.compute_loss_func = _token_mean_loss

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
            options = self._bucket_options
            if args.world_size > 1 and not getattr(args, "average_tokens_across_devices", True):
                warnings.warn("average_tokens_across_devices=False: each rank's loss is the mean "
                              "over its own tokens, so a step's loss is a mean of per-rank means "
                              "(set it True for the mean over all the step's tokens).",
                              stacklevel=3)
            if self._bucket_plan is not None:
                return BucketBatchSampler.from_plan(
                    self._bucket_plan, lengths, seed=seed,
                    rank=args.process_index if args.world_size > 1 else 0,
                    world_size=max(1, args.world_size),
                    grad_accum=args.gradient_accumulation_steps,
                    drop_last=options["drop_last"],
                    allow_other_lengths=self._bucket_allow_other)
            return BucketBatchSampler(
                lengths, options["boundaries"], token_budget=options["token_budget"], seed=seed,
                rank=args.process_index if args.world_size > 1 else 0,
                world_size=max(1, args.world_size), grad_accum=args.gradient_accumulation_steps,
                packing=options["packing"], sync_buckets=options["sync_buckets"],
                drop_last=options["drop_last"])

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
                varlen = sampler.packing in VARLEN
                for batch in batches:
                    _check_batch(batch, self._bucket_options["token_budget"],
                                 sampler.packing if varlen else None)
                    if varlen and self._takes_use_cache():
                        # a key/value cache (most configs make one, even in training) makes
                        # transformers skip the per-document mask: the documents would attend to
                        # each other (DataCollatorWithFlattening's rows, for one)
                        batch.setdefault("use_cache", False)
                sampler.mark_consumed(len(batches))  # what the loop really received
            return batches, items

        def _takes_use_cache(self) -> bool:
            if self._bucket_use_cache is None:
                forward = getattr(self.accelerator.unwrap_model(self.model), "forward", None)
                try:
                    self._bucket_use_cache = "use_cache" in inspect.signature(forward).parameters
                except (TypeError, ValueError):
                    self._bucket_use_cache = False
            return self._bucket_use_cache

        # ------------------------------------------------------------ steps, epochs, resuming
        def _make_schedule(self, global_step=None):
            """Per-epoch micro-steps from the plans, and where a resume starts (the sampler is
            put there: O(1) in the consumed batches, no replay)."""
            args, resume = self.args, self._bucket_resume
            state, where = None, f"checkpoint {resume}"
            if resume is not None:
                path = os.path.join(str(resume), STATE_FILE)
                if os.path.isfile(path):
                    from ..data.guards import read_json

                    state = read_json(path, f"sampler state {path}")
                if global_step is None:
                    global_step = _checkpoint_step(resume)
            return trainer_schedule(
                self.bucket_sampler, num_train_epochs=args.num_train_epochs,
                max_steps=args.max_steps, global_step=global_step or 0, state=state,
                resume=global_step is not None, ignore_data_skip=args.ignore_data_skip,
                where=where)

        def set_initial_training_values(self, args, dataloader, *rest, **kwargs):
            values = list(super().set_initial_training_values(args, dataloader, *rest, **kwargs))
            schedule = self._bucket_schedule = self._make_schedule()
            start = schedule.start_epoch
            # (num_train_epochs, num_update_steps_per_epoch, num_examples, num_train_samples,
            #  total_train_batch_size, steps_in_epoch, max_steps)
            values[0], values[1] = schedule.num_epochs, schedule.updates(start)
            values[5], values[6] = schedule.batches(start), schedule.max_steps
            return tuple(values)

        def _init_training_state(self, *args, **kwargs):
            super()._init_training_state(*args, **kwargs)
            schedule = self._bucket_schedule
            return schedule.start_epoch, schedule.start_batches

        def _run_epoch(self, *args, **kwargs):
            bound = inspect.signature(super()._run_epoch).bind(*args, **kwargs)
            call, schedule = bound.arguments, self._bucket_schedule
            epoch = call["epoch"]
            if epoch not in schedule.counts:
                schedule.counts[epoch] = self.bucket_sampler.plan(epoch).micro_steps
            call["steps_in_epoch"] = schedule.batches(epoch)
            call["num_update_steps_per_epoch"] = schedule.updates(epoch)
            call["epochs_trained"] = schedule.start_epoch
            call["steps_trained_in_current_epoch"] = schedule.start_batches
            done = schedule.start_batches // schedule.grad_accum  # optimizer steps before
            self._bucket_first_step = self.state.global_step - (
                done if epoch == schedule.start_epoch else 0)
            return super()._run_epoch(*bound.args, **bound.kwargs)

        def _save_checkpoint(self, model, trial, *args, **kwargs):
            out = super()._save_checkpoint(model, trial, *args, **kwargs)
            if self._bucket_sampler is not None and self.args.should_save:
                folder = os.path.join(self._get_output_dir(trial=trial),
                                      f"{PREFIX_CHECKPOINT_DIR}-{self.state.global_step}")
                os.makedirs(folder, exist_ok=True)
                state = self._bucket_sampler.state_dict()
                state["trainer"] = {"global_step": int(self.state.global_step),
                                    "epoch_first_step": int(self._bucket_first_step)}
                save_sampler_state(state, os.path.join(folder, STATE_FILE))
            return out

        def _inner_training_loop(self, *args, **kwargs):
            resume = kwargs.get("resume_from_checkpoint")
            if resume is None and len(args) >= 3:
                resume = args[2]  # (batch_size, args, resume_from_checkpoint, ...)
            self._bucket_resume = resume
            self._bucket_schedule = None
            with _seek_instead_of_skip(hf_trainer, self):
                return super()._inner_training_loop(*args, **kwargs)

        def _bucket_seek(self, loader, num_batches):
            """The Trainer's skip of ``num_batches`` already-trained batches: the sampler was
            resumed from the checkpoint's state when the schedule was made (O(1), no replay)."""
            num_batches = check_int(num_batches, "batches to skip", low=0, high=INT64_MAX)
            if self._bucket_schedule is None:  # a Trainer without the epoch hooks
                self._bucket_schedule = self._make_schedule(self.state.global_step)
            expected = self._bucket_schedule.start_batches
            if num_batches != expected:
                raise BucketoptError(
                    f"checkpoint {self._bucket_resume}: the Trainer skips {num_batches} batches "
                    f"of the epoch, the sampler resumes after {expected}: the Trainer's step "
                    "count per epoch differs from the plan's.")
            return loader

    return BucketedTrainerMixin


def save_sampler_state(state: dict, path) -> None:
    """Write the sampler's state into a checkpoint atomically: the file keeps its old content (or
    stays absent) unless the new one is complete, whatever ends the write (a full disk, a
    signal), and no partial or temporary file is left; a failed write is one
    :class:`BucketoptError` line."""
    from ..data.output import write_text

    write_text(path, json.dumps(state), what="the sampler state")


def _checkpoint_step(folder):
    """The global step of a checkpoint's trainer_state.json; None without one (the Trainer then
    starts afresh)."""
    from ..data.guards import read_json, short
    from ..validate import shown

    path = os.path.join(str(folder), "trainer_state.json")
    if not os.path.isfile(path):
        return None
    data = read_json(path, f"trainer state {short(path)}")
    step = data.get("global_step", 0) if isinstance(data, dict) else None
    if isinstance(step, bool) or not isinstance(step, int) or not 0 <= step < 2**63:
        what = f"`global_step` {shown(step)}" if isinstance(data, dict) else shown(data)
        raise BucketoptError(f"trainer state {short(path)} holds {what}: the checkpoint's step "
                             "must be an integer >= 0 (resume from another checkpoint or fix "
                             "the file).", param=None)
    return step


def _check_batch(batch, budget, packed):
    """A collated batch within the budget; with packed rows (``packed``: the packing), one
    flattened row."""
    ids = batch.get("input_ids") if hasattr(batch, "get") else None
    if ids is None:
        return
    if packed and ids.dim() == 2 and ids.shape[0] != 1:
        raise BucketoptError(
            f"packing={packed!r} trains rows of documents flattened into one sequence, "
            f"but the collator returned input_ids of shape {tuple(ids.shape)}: collate with "
            "bucketopt.integrations.collate.VarlenCollator, transformers' "
            "DataCollatorWithFlattening or TRL's padding_free (or pass no data_collator).",
            param="packing")
    if ids.numel() <= budget:
        return
    if packed:
        raise BucketoptError(
            f"a collated row holds {ids.numel()} tokens, over token_budget={budget}: the "
            "collator pads the flattened row (pad_to_multiple_of?); collate without padding.",
            param="token_budget")
    raise BucketoptError(
        f"a collated batch holds {tuple(ids.shape)} = {ids.numel()} padded tokens, over "
        f"token_budget={budget}: the collator pads beyond the longest sample "
        "(pad_to_multiple_of? max_length padding?); solve with align= that multiple, or pad "
        "to the longest sample.", param=None)


def _token_mean_loss(outputs, labels, num_items_in_batch=None):
    """Summed next-token loss over the step's label-token count (``num_items_in_batch``)."""
    from .tokens import causal_lm_loss_sum, label_tokens

    logits = outputs["logits"] if isinstance(outputs, dict) else outputs[0]
    total = causal_lm_loss_sum(logits, labels)
    if num_items_in_batch is None:
        num_items_in_batch = max(1, label_tokens({"labels": labels}))
    return total / num_items_in_batch


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
