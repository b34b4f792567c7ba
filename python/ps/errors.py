"""The exceptions the package raises.

Every failure the C++ library reports as a ``Status`` arrives as an instance
of :class:`Error` (a subclass per status code) whose message is the status
message, e.g. ``ps.errors.PeerLostError: server-1 at 127.0.0.1:7001 ...``.
Each subclass also derives from the built-in exception a Python caller would
expect (``ValueError`` for bad arguments, ``ConnectionError`` for a lost
peer, ...), so ``except ValueError`` keeps working.

Arguments refused before any C++ call (a wrong dtype) raise ``TypeError``;
a shape that does not match raises :class:`InvalidArgumentError`.
"""


class Error(Exception):
    """A failure reported by the library."""


# One class per ps::StatusCode (base/status.h), in its order: the extension
# (python/src/status_error.cc) raises them by these names.


class InvalidArgumentError(Error, ValueError):
    """The caller passed something malformed."""


class NotRegisteredError(Error, LookupError):
    """The memory region does not exist (or no longer)."""


class AccessDeniedError(Error, PermissionError):
    """The region does not allow this access."""


class InvalidKeyError(Error, PermissionError):
    """The remote key does not match the region."""


class OutOfRangeError(Error, IndexError):
    """An offset, length or row outside its region or table."""


class StaleDescriptorError(Error, ValueError):
    """The descriptor came from an earlier life of the peer."""


class DeadlineError(Error, TimeoutError):
    """No answer within the configured time."""


class PeerLostError(Error, ConnectionError):
    """The peer closed, crashed or its connection broke."""


class NetworkError(Error, ConnectionError):
    """A socket-level failure that is not a lost peer."""


class NotInitializedError(Error, RuntimeError):
    """The object was used before it was set up."""


class CorruptionError(Error, RuntimeError):
    """Data failed validation (checksum, format)."""


class NotFoundError(Error, LookupError):
    """A named thing (file, table, checkpoint) does not exist."""


class FileError(Error, OSError):
    """A file-system or device error."""


class ResourceExhaustedError(Error, RuntimeError):
    """A bounded resource (slots, memory) is used up."""


class NotSupportedError(Error, NotImplementedError):
    """The feature is not built or not available here."""


class InternalError(Error, RuntimeError):
    """A bug in the library; please report it."""


class UnauthenticatedError(Error, PermissionError):
    """The peer did not prove it holds the cluster secret."""


class CancelledError(Error, RuntimeError):
    """Given up because the process is stopping."""
