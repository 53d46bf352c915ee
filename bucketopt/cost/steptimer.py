"""Training logs as measurements: time the steps of a real run, write the CSV calibrate reads.

A production run times every micro-batch it trains anyway; writing those times down lets the
run refine its own profile (``bucketopt calibrate --measurements steps.csv``), on the real
model, data, kernels and machine, with no separate probe.

Plain training loop::

    from bucketopt.cost.steptimer import StepTimer

    timer = StepTimer("steps.csv")
    for batch in loader:
        with timer.step(batch["input_ids"]):        # or timer.step(batch_size, padded_len)
            loss = model(**batch).loss
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
    timer.close()                                   # also when used as a context manager

transformers ``Trainer``::

    from bucketopt.cost.steptimer import step_timer_callback

    trainer = Trainer(..., callbacks=[step_timer_callback("steps.csv")])

On CUDA every step is bracketed by ``torch.cuda.synchronize()`` (kernels run asynchronously:
without it a step's time would be the time to *queue* it). The first ``skip`` steps (compile,
allocator warm-up) are not written. Rows are flushed every ``flush_every`` steps, so a crashed
run keeps what it measured.
"""

from __future__ import annotations

import csv
import time
from contextlib import contextmanager
from pathlib import Path

from ..errors import BucketoptError

COLUMNS = ("batch_size", "padded_len", "seconds", "step")


def _shape(batch, padded_len=None):
    """(batch_size, padded_len) from two ints, a (s, L) pair, or a 2-D tensor/array."""
    if padded_len is not None:
        sizes = (batch, padded_len)
    elif hasattr(batch, "shape"):
        shape = tuple(batch.shape)
        if len(shape) != 2:
            raise BucketoptError(f"StepTimer.step() needs a 2-D (batch, length) tensor; got "
                                 f"shape {shape}.")
        sizes = shape
    elif isinstance(batch, (tuple, list)) and len(batch) == 2:
        sizes = tuple(batch)
    else:
        raise BucketoptError("StepTimer.step() takes (batch_size, padded_len), a (s, L) pair "
                             f"or a 2-D tensor; got {type(batch).__name__}.", param=None)
    out = []
    for name, value in zip(("batch_size", "padded_len"), sizes):
        try:
            number = int(value)
        except (TypeError, ValueError):
            raise BucketoptError(f"StepTimer: `{name}` must be an integer >= 1; got "
                                 f"{value!r}.") from None
        if number < 1 or number != value:
            raise BucketoptError(f"StepTimer: `{name}` must be an integer >= 1; got {value!r}.")
        out.append(number)
    return tuple(out)


def _cuda_sync():
    """A function that waits for queued CUDA work (a no-op without torch or CUDA)."""
    try:
        import torch
    except ImportError:
        return lambda: None
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        return torch.cuda.synchronize
    return lambda: None


class StepTimer:
    """Time training steps and write ``batch_size,padded_len,seconds,step`` rows.

    Parameters
    ----------
    path : str or Path, optional
        CSV to write (rows are also kept in ``rows``).
    sync : bool or None
        Synchronise CUDA before and after each step. ``None``: when torch has initialised CUDA.
    skip : int
        Steps at the start not written (warm-up, compilation).
    flush_every : int
        Write the CSV every this many steps.
    clock : callable
        Seconds (default ``time.perf_counter``).

    Examples
    --------
    >>> timer = StepTimer(skip=0)
    >>> with timer.step(8, 512):
    ...     pass
    >>> timer.rows[0][:2]
    (8, 512)
    """

    def __init__(self, path=None, *, sync=None, skip: int = 1, flush_every: int = 100,
                 clock=time.perf_counter):
        for name, value in (("skip", skip), ("flush_every", flush_every)):
            if isinstance(value, bool) or not isinstance(value, int) or value < (
                    0 if name == "skip" else 1):
                raise BucketoptError(f"StepTimer: `{name}` must be an integer >= "
                                     f"{0 if name == 'skip' else 1}; got {value!r}.", param=name)
        self.path = None if path is None else Path(path)
        self.skip = skip
        self.flush_every = flush_every
        self.clock = clock
        self.rows = []
        self._sync_flag = sync
        self._sync = None
        self._seen = 0
        self._written = 0
        self._start = None
        self._shape = None
        if self.path is not None:
            try:
                with self.path.open("w", newline="") as fh:
                    csv.writer(fh).writerow(COLUMNS)
            except OSError as exc:
                raise BucketoptError(f"StepTimer: could not write {self.path}: "
                                     f"{exc.strerror}.") from None

    def _synchronize(self):
        if self._sync is None:
            if self._sync_flag is False:
                self._sync = lambda: None
            else:
                self._sync = _cuda_sync()
        self._sync()

    def start(self, batch, padded_len=None) -> None:
        """Begin timing a step of ``batch`` (see :meth:`step`)."""
        self._shape = _shape(batch, padded_len)
        self._synchronize()
        self._start = self.clock()

    def stop(self) -> float | None:
        """End the step begun by :meth:`start`; returns its seconds (None when none began)."""
        if self._start is None:
            return None
        self._synchronize()
        seconds = self.clock() - self._start
        self._start = None
        self._seen += 1
        if self._seen > self.skip and seconds > 0:
            self.rows.append((*self._shape, float(seconds), self._seen))
            if len(self.rows) - self._written >= self.flush_every:
                self.flush()
        return seconds

    def cancel(self) -> None:
        """Forget a step begun by :meth:`start` (e.g. it was interrupted by evaluation)."""
        self._start = None

    @contextmanager
    def step(self, batch, padded_len=None):
        """Context manager timing one training step of ``batch`` (a 2-D tensor, or ``s, L``).

        A step that raises is not written.
        """
        self.start(batch, padded_len)
        try:
            yield self
        except BaseException:
            self.cancel()
            raise
        self.stop()

    def flush(self) -> None:
        """Append the rows not yet written to the CSV."""
        if self.path is None or self._written == len(self.rows):
            return
        try:
            with self.path.open("a", newline="") as fh:
                writer = csv.writer(fh)
                for row in self.rows[self._written:]:
                    writer.writerow([row[0], row[1], repr(row[2]), row[3]])
        except OSError as exc:
            raise BucketoptError(f"StepTimer: could not write {self.path}: "
                                 f"{exc.strerror}.") from None
        self._written = len(self.rows)

    def close(self) -> None:
        self.flush()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


def step_timer_callback(path, *, sync=None, skip: int = 1, flush_every: int = 100,
                        input_key: str = "input_ids"):
    """A ``transformers.TrainerCallback`` that writes the step-time CSV calibrate reads.

    Each micro-batch is timed from the start of the model's forward (a forward pre-hook sees
    its ``input_ids``, giving (batch_size, padded_len)) to the end of its (sub)step, so the
    backward and, for the last micro-batch of a step, the optimizer step are included; logging,
    evaluation and checkpointing between steps are not. transformers is imported here, not at
    ``import bucketopt``.
    """
    try:
        from transformers import TrainerCallback
    except ImportError:
        raise BucketoptError("step_timer_callback needs transformers: pip install "
                             "transformers.") from None

    timer = StepTimer(path, sync=sync, skip=skip, flush_every=flush_every)

    class StepTimerCallback(TrainerCallback):
        """Times every micro-batch of a Trainer run into ``timer`` (see step_timer_callback)."""

        def __init__(self):
            self.timer = timer
            self._handle = None

        def on_train_begin(self, args, state, control, model=None, **kwargs):
            if model is not None and self._handle is None:
                self._handle = model.register_forward_pre_hook(self._pre_forward,
                                                               with_kwargs=True)

        def _pre_forward(self, module, inputs, kwargs):
            if not module.training or self.timer._start is not None:
                return  # evaluation, or a nested forward inside the timed micro-batch
            ids = kwargs.get(input_key, inputs[0] if inputs else None)
            if ids is not None and getattr(ids, "ndim", 0) == 2:
                self.timer.start(ids)

        def on_substep_end(self, args, state, control, **kwargs):
            self.timer.stop()

        def on_step_end(self, args, state, control, **kwargs):
            self.timer.stop()

        def on_train_end(self, args, state, control, **kwargs):
            self.timer.cancel()
            self.timer.close()
            if self._handle is not None:
                self._handle.remove()
                self._handle = None

    return StepTimerCallback()
