"""The one exception family of bucketopt."""

from __future__ import annotations


class BucketoptError(ValueError):
    """Raised for every invalid input or infeasible request.

    It is a ``ValueError``, so callers that already catch ``ValueError`` keep working. The message
    is one line that names the parameter, the rule and the offending value. The CLI prints it on
    stderr and exits with code 2.

    ``param`` is the name of the Python parameter the error is about (``"token_budget"``), or
    ``None`` when it is about no single parameter. The CLI names the matching flag from it
    (``--token-budget``); ``str(exc)`` is the message alone.

    Examples
    --------
    >>> err = BucketoptError("`k` must be an integer >= 1; got 0.", param="k")
    >>> str(err), err.param
    ('`k` must be an integer >= 1; got 0.', 'k')
    """

    def __init__(self, message="", param: str | None = None):
        if isinstance(message, str) and not message.isprintable():
            # one line always: a control character from a file name (a newline) is escaped
            message = "".join(c if c.isprintable() else repr(c)[1:-1] for c in message)
        super().__init__(message)
        self.param = param

    def __reduce__(self):  # pickling and copying keep the parameter
        return type(self), (self.args[0] if self.args else "", self.param)


def install_hint(extra: str) -> str:
    """How to install one of bucketopt's optional extras, from a checkout of this repository (as
    the docs install it) or from a package index: every "needs X" message says it this way.

    Examples
    --------
    >>> install_hint("dask")
    "pip install '.[dask]' in a checkout of bucketopt (or pip install 'bucketopt[dask]')"
    """
    return (f"pip install '.[{extra}]' in a checkout of bucketopt "
            f"(or pip install 'bucketopt[{extra}]')")
