"""Where training happens: bucketopt inside training frameworks.

- :mod:`bucketopt.integrations.transformers`: ``BucketedTrainer``, a ``transformers.Trainer``
  that batches with :class:`~bucketopt.BucketBatchSampler` (and ``bucketed(cls)`` for any Trainer
  subclass, e.g. TRL's ``SFTTrainer``).
- :mod:`bucketopt.integrations.lengths`: one length per sample of a dataset (a Hugging Face
  ``datasets.Dataset`` is read from its Arrow list offsets; the tokens are never materialised).

Nothing here is imported by ``import bucketopt``; each module imports its framework on first use.
"""
