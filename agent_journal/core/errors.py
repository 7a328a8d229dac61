"""One exception hierarchy for the whole package.

Invariant: every failure a user can cause or meet is a JournalError subclass
carrying a one-line message; the CLI maps `exit_code` to the process exit code
in exactly one place (cli.run), so no other module decides exit codes.
"""


class JournalError(Exception):
    """Base class. exit_code 1: the command was refused or failed."""

    exit_code = 1

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class UsageError(JournalError):
    """Bad arguments. Raised before anything is written; exit 2."""

    exit_code = 2


class UnsafeRootError(JournalError):
    """The journal root (or the folder it would be created in) is shared-writable, or a
    path under it is a symbolic link (or a shared-writable folder) that would lead a
    read or a write out of the root."""


class ConflictError(JournalError):
    """A write was refused because it contradicts what the journal holds."""


class TombstonedError(ConflictError):
    """A write was refused because a tombstone names its id: erased content is never
    written again."""


class NotFoundError(JournalError):
    """A read asked for something the journal does not hold."""


class DamagedJournalError(JournalError):
    """A destructive command refused because the journal could not be read whole."""


class IntegrityError(JournalError):
    """Stored bytes do not match what was recorded about them (artifact, export)."""


class CompactionRunningError(JournalError):
    """Another applied compaction holds the workspace."""


class BusyError(JournalError):
    """Writers kept the journal locked past every retry."""


class StorageError(JournalError):
    """SQLite or the file system failed under a command (the storage layer's
    translation of a driver error: one line naming the file and the reason)."""


class SpoolFullError(StorageError):
    """The capture spool is full: an event a hook could not journal is lost."""


class RemoteError(JournalError):
    """A sync remote (bucket or shared folder) failed or refused a request."""
