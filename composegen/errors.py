"""One error root; each class knows its exit code. The CLI maps them in one place."""

from __future__ import annotations

OK = 0
CHECK_FAILED = 1  # a check failed, or compared things differ
BAD_INPUT = 2  # the user's input (profile, argument, file) is wrong
RUNTIME = 3  # the engine, a container or the stack failed
INTERRUPTED = 130  # Ctrl-C


class ComposegenError(Exception):
    """Base of every error composegen reports to a user (never with a traceback)."""

    exit_code = RUNTIME

    def __init__(self, message: str, *, hint: str | None = None, details: str | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.details = details  # extra lines (e.g. a container's last log lines)


class BadInput(ComposegenError):
    """A profile, argument or input file is wrong. Message: `file:line: field: problem`."""

    exit_code = BAD_INPUT


class CheckFailed(ComposegenError):
    """A check ran and did not pass (stale out/, failed gate, leftovers with --fail-on-leftover)."""

    exit_code = CHECK_FAILED


class EngineError(ComposegenError):
    """Docker engine, compose or the stack itself failed."""

    exit_code = RUNTIME


class WriteFailed(ComposegenError):
    """A file could not be written (disk full, too large, read-only): nothing half-written left."""

    exit_code = RUNTIME


class Interrupted(ComposegenError):
    exit_code = INTERRUPTED
