"""Training with boundaries: epochs of batches, simulation, the DDP batch sampler and its plans,
packing into padding-free rows, diversity figures, streaming, and ``compare``: batching
strategies side by side.
"""
