"""The errors a request on a trace can end in, each with the HTTP status it maps to.

A leaf module (it imports nothing of the project) so that the runner, the services
and the selectors can all raise them; `traces/runner/config.py` and
`traces.runner` re-export them.
"""

from __future__ import annotations


class RunError(Exception):
    """Base class of run request errors; `status` is the HTTP status it maps to."""

    status = 400


class InvalidRun(RunError):
    """The request cannot be run as given (bad after_sequence, malformed messages)."""


class TraceNotFound(RunError):
    status = 404


class NotAllowed(RunError):
    """The user may see the trace but not do this to it (deciding an approval)."""

    status = 403


class RunConflict(RunError):
    """The trace is already being run by someone else (W5: one active run)."""

    status = 409


class LeaseLost(RunError):
    """Another run claimed the trace; this one must not write again (fencing)."""

    status = 409
