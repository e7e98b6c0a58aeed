"""The one error type the library raises for user-facing problems."""


class TextAuditError(Exception):
    """A problem the user can fix (bad input, missing resource, corrupt file).

    The message is a single line that says what went wrong and what to do about it. The CLI turns
    it into ``error: <message>`` on stderr and exit code 2, in exactly one place
    (:mod:`textaudit.cli.app`).
    """

    def __init__(self, message: str):
        super().__init__(" ".join(str(message).split()))
