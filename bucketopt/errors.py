"""The one exception family of bucketopt."""

from __future__ import annotations


class BucketoptError(ValueError):
    """Raised for every invalid input or infeasible request.

    It is a ``ValueError``, so callers that already catch ``ValueError`` keep working. The message
    is one line that names the parameter, the rule and the offending value. The CLI prints it on
    stderr and exits with code 2.
    """
