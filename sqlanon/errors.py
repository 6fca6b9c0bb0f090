"""One exception type for everything a user can get wrong; its message is one line naming the culprit."""


class SqlanonError(Exception):
    """A user-facing error: the CLI prints ``error: <message>`` and exits with status 2."""


class PolicyError(SqlanonError):
    """The policy file is invalid; the message names the offending key."""


class EmptyRelationError(SqlanonError):
    """A measured relation has no record: a candidate release whose every class is suppressed
    (the search passes such a node over, :func:`sqlanon.metrics.optimum.choose`)."""
