"""Errors of the commerce backend. Each carries the structured ``code`` a tool outcome reports."""

from __future__ import annotations


class CommerceError(Exception):
    """A refusal or failure the model may see as a structured tool error (never a crash)."""

    code = "internal"

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class NotFound(CommerceError):
    code = "not_found"


class PermissionDenied(CommerceError):
    code = "permission_denied"


class LimitReached(CommerceError):
    """A per-viewer limit (e.g. coupon grants) is used up."""

    code = "limit_reached"


class InvalidArgument(CommerceError):
    code = "invalid_arguments"


class Malformed(CommerceError):
    """The backend answered with something that is not a valid result of the operation."""

    code = "malformed"
