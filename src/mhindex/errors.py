"""Errors a user can act on. The CLI prints them as one line on stderr, never a traceback."""


class MhindexError(Exception):
    """A failure with a message that says what went wrong and, where possible, what to run."""

    exit_code = 1
    label = "error"  # printed as "mhindex: <label>: <message>"


class BadInput(MhindexError):
    """Input data (a file, a record, a field) is malformed; the message names file, line and field."""

    exit_code = 2


class UsageError(MhindexError):
    """The command line asks for something that does not exist (unknown corpus, backend, dataset)."""

    exit_code = 2


class Interrupted(MhindexError):
    """Ctrl-C during long work (an evaluation, a training run); what is done is kept."""

    exit_code = 130
    label = "interrupted"
