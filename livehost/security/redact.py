"""No password in any log line, error or CLI output: DSNs and URLs are shown with their password
replaced (``postgresql://livehost:***@pg:5432/livehost``); key=value connection strings too."""

from __future__ import annotations

import logging
import re

MASK = "***"
# scheme://user:password@host  ->  scheme://user:***@host
_URL_PASSWORD = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.-]*://[^:/?#@\s]*:)(?P<pw>[^@/\s]*)(?P<at>@)")
# password=secret / password: secret / sasl_plain_password='secret' (libpq keywords, client settings)
_KV_PASSWORD = re.compile(r"(?i)(?P<key>\b[a-z_]*(?:password|passwd|secret)[a-z_]*\s*[=:]\s*)(?P<q>['\"]?)"
                          r"(?P<pw>[^\s'\"&;,]+)(?P=q)")


def redact(text: str) -> str:
    """``text`` with every URL password and ``password=`` value masked."""
    text = _URL_PASSWORD.sub(lambda m: f"{m['head']}{MASK}{m['at']}", text)
    return _KV_PASSWORD.sub(lambda m: f"{m['key']}{m['q']}{MASK}{m['q']}", text)


class RedactingFilter(logging.Filter):
    """A logging filter that redacts the formatted message (and drops the now-redacted args)."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a broken format string is logged as is
            return True
        redacted = redact(message)
        if redacted != message:
            record.msg, record.args = redacted, None
        if record.exc_info and record.exc_info[1] is not None:
            exc = record.exc_info[1]
            if redact(str(exc)) != str(exc):
                record.exc_text = redact(logging.Formatter().formatException(record.exc_info))
        return True


def install_log_redaction() -> None:
    """Redact every record of every handler of the root logger (call after logging is configured)."""
    root = logging.getLogger()
    for handler in root.handlers:
        if not any(isinstance(f, RedactingFilter) for f in handler.filters):
            handler.addFilter(RedactingFilter())
