"""Where training happens: bucketopt inside training frameworks.

- :mod:`bucketopt.integrations.transformers`: ``BucketedTrainer``, a ``transformers.Trainer``
  that batches with :class:`~bucketopt.BucketBatchSampler`, padded buckets or packed rows (and
  ``bucketed(cls)`` for any Trainer subclass, e.g. TRL's ``SFTTrainer``).
- :mod:`bucketopt.integrations.collate`: ``VarlenCollator``, a row of documents flattened for
  document-masked attention (``position_ids``, ``cu_seq_lens``, labels cut at documents).
- :mod:`bucketopt.integrations.tokens`: ``TokenMean``, a step's loss as the mean over all its
  tokens in a loop of your own (Accelerate, Lightning).
- :mod:`bucketopt.integrations.accelerate`: ``prepare(accelerator, loader)``, one line.
- :mod:`bucketopt.integrations.lengths`: one length per sample of a dataset (a Hugging Face
  ``datasets.Dataset`` is read from its Arrow list offsets; the tokens are never materialised).

Nothing here is imported by ``import bucketopt``; each module imports its framework on first use.
"""
