"""LiveHost's pools skip asyncpg's reset query on release (``livehost.db.keep_session``), which is
only safe while no code leaves session state on a pooled connection. This keeps it so: every SQL
string in the runtime is checked for session-level locks, settings, listeners and held cursors."""

from __future__ import annotations

import re

from livehost.config import REPO_ROOT

SOURCES = [p for d in ("livehost", "services") for p in (REPO_ROOT / d).rglob("*.py") if "gen" not in p.parts]
SESSION_STATE = {
    "session advisory lock": re.compile(r"pg_advisory_lock(?:_shared)?\s*\(|pg_try_advisory_lock(?:_shared)?\s*\("),
    "session setting": re.compile(r"""["']\s*SET\s+(?!LOCAL\b)(?:SESSION\s+)?\w+""", re.IGNORECASE),
    "set_config outside a transaction": re.compile(r"set_config\([^)]*,\s*false\s*\)", re.IGNORECASE),
    "LISTEN": re.compile(r"""["']\s*LISTEN\b|\.add_listener\(""", re.IGNORECASE),
    "cursor held past a transaction": re.compile(r"WITH\s+HOLD", re.IGNORECASE),
}
# The migrator takes a session lock across its per-file transactions and releases it in a finally.
ALLOWED = {("livehost/db.py", "session advisory lock")}


def findings(text: str, rel: str) -> list[str]:
    return [f"{rel}: {what}" for what, pattern in SESSION_STATE.items()
            if pattern.search(text) and (rel, what) not in ALLOWED]


def test_no_code_leaves_session_state_on_a_pooled_connection() -> None:
    found = [f for path in SOURCES for f in findings(path.read_text(), str(path.relative_to(REPO_ROOT)))]
    assert not found, f"session state on a pooled connection (livehost.db.keep_session would keep it): {found}"


def test_the_scan_finds_each_kind_of_session_state() -> None:
    for sql in ('await conn.execute("SELECT pg_advisory_lock(1)")', 'conn.execute("SET search_path = x")',
                "conn.execute('SET SESSION work_mem = 1')", 'conn.execute("LISTEN harness")',
                "await conn.add_listener('c', cb)", '"DECLARE c CURSOR WITH HOLD FOR SELECT 1"',
                "\"SELECT set_config('a.b', '1', false)\""):
        assert findings(sql, "x.py"), sql
    for sql in ('conn.execute("SET LOCAL synchronous_commit = on")', '"UPDATE t SET a = 1"',
                '"SELECT pg_advisory_xact_lock(1)"', "\"SELECT set_config('a.b', '1', true)\""):
        assert not findings(sql, "x.py"), sql
    assert not findings('"SELECT pg_advisory_lock(727001)"', "livehost/db.py")
