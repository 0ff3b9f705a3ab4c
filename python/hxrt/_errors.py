"""hxrt's exceptions: one class per status code, all subclasses of hxrt.Error. The message is the whole Status:
code, message and the chain of what was being done ("... while loading ...")."""


class Error(Exception):
    """A failed hxrt call. `code` is the status code's name."""
    code = "UNKNOWN"


class InvalidArgumentError(Error, ValueError):
    code = "INVALID_ARGUMENT"


class NotFoundError(Error, LookupError):
    code = "NOT_FOUND"


class AlreadyExistsError(Error):
    code = "ALREADY_EXISTS"


class OutOfMemoryError(Error, MemoryError):
    code = "OUT_OF_MEMORY"


class OutOfRangeError(Error, IndexError):
    code = "OUT_OF_RANGE"


class UnavailableError(Error):
    code = "UNAVAILABLE"


class UnimplementedError(Error, NotImplementedError):
    code = "UNIMPLEMENTED"


class DeadlineExceededError(Error, TimeoutError):
    code = "DEADLINE_EXCEEDED"


class AbortedError(Error):
    code = "ABORTED"


class FailedPreconditionError(Error):
    code = "FAILED_PRECONDITION"


class DataLossError(Error):
    code = "DATA_LOSS"


class InternalError(Error):
    code = "INTERNAL"


# hxrt::StatusCode's numbers (include/hxrt/base/status.h, the C API's hxrt_status).
_BY_CODE = [None, InvalidArgumentError, NotFoundError, AlreadyExistsError, OutOfMemoryError, OutOfRangeError,
            UnavailableError, UnimplementedError, DeadlineExceededError, AbortedError, FailedPreconditionError,
            DataLossError, InternalError]


def error_class(code: int) -> type:
    """The exception class of a status code (the extension raises through this)."""
    return _BY_CODE[code] if 0 < code < len(_BY_CODE) else Error
