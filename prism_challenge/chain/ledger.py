"""The local stand-in for the chain: commitments and validator addresses in one SQLite file.

Local and demo mode have no chain, but several processes on one machine (validators,
`prism submit`) must agree on who committed what first and where the validators listen.
`LocalLedger` is that shared record, behind the same `Subnet` interface as the chain:
every write takes the next "block" (a counter), so precedence works exactly as online.
It trusts the local machine: anyone who can write the file can commit for any hotkey.
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import bittensor

from prism_challenge.chain.metagraph import MetagraphView
from prism_challenge.chain.subnet import Commitment, Endpoint

_SCHEMA = """
CREATE TABLE IF NOT EXISTS head (id INTEGER PRIMARY KEY CHECK (id = 1), block INTEGER NOT NULL);
INSERT OR IGNORE INTO head (id, block) VALUES (1, 0);
CREATE TABLE IF NOT EXISTS commitments (
    hotkey TEXT NOT NULL, value TEXT NOT NULL, block INTEGER NOT NULL,
    PRIMARY KEY (hotkey, block));
CREATE TABLE IF NOT EXISTS endpoints (
    hotkey TEXT PRIMARY KEY, url TEXT NOT NULL, block INTEGER NOT NULL);
"""


class LocalLedger:
    def __init__(self, path: Path, metagraph: MetagraphView | None = None, *,
                 create: bool = True) -> None:
        """`create=False` (read-only commands): a ledger file that does not exist stays
        absent, and reads answer as an empty chain (`exists` is False, `block` None)."""
        self.path = Path(path)
        self.metagraph = metagraph
        if not create and not self.path.exists():
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with closing(self._connect()) as conn:
            conn.executescript(_SCHEMA)

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, timeout=30, isolation_level=None)
        conn.execute("PRAGMA journal_mode=WAL")
        return conn

    def _write(self, sql: str, hotkey: str, text: str) -> int:
        """Run one write as the next block (one transaction); returns that block."""
        with closing(self._connect()) as conn:
            conn.execute("BEGIN IMMEDIATE")
            try:
                block = conn.execute("SELECT block FROM head").fetchone()[0] + 1
                conn.execute(sql, (hotkey, text, block))
                conn.execute("UPDATE head SET block = ?", (block,))
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return block

    @property
    def exists(self) -> bool:
        return self.path.exists()

    def _read(self, sql: str, *params: object) -> list[tuple]:
        if not self.exists:
            return []
        with closing(self._connect()) as conn:
            return conn.execute(sql, params).fetchall()

    @property
    def block(self) -> int | None:
        rows = self._read("SELECT block FROM head")
        return rows[0][0] if rows else None

    def _uid(self, hotkey: str) -> int | None:
        return None if self.metagraph is None else self.metagraph.uid_of(hotkey)

    def latest_commitment(self, hotkey: str) -> Commitment | None:
        rows = self._read("SELECT value, block FROM commitments WHERE hotkey = ? "
                          "ORDER BY block DESC LIMIT 1", hotkey)
        if not rows:
            return None
        (value, block), = rows
        return Commitment(hotkey, value, block, self._uid(hotkey))

    def commit(self, wallet: bittensor.Wallet, value: str) -> Commitment:
        hotkey = wallet.hotkey.ss58_address
        block = self._write("INSERT INTO commitments (hotkey, value, block) VALUES (?, ?, ?)",
                            hotkey, value)
        return Commitment(hotkey, value, block, self._uid(hotkey))

    def validators(self) -> list[Endpoint]:
        rows = self._read("SELECT hotkey, url FROM endpoints ORDER BY block")
        return [Endpoint(hotkey, url) for hotkey, url in rows]

    def serve(self, wallet: bittensor.Wallet, host: str, port: int) -> str:
        hotkey, url = wallet.hotkey.ss58_address, f"http://{host}:{port}"
        if Endpoint(hotkey, url) in self.validators():
            return f"{url} already published"
        self._write("INSERT INTO endpoints (hotkey, url, block) VALUES (?, ?, ?) ON CONFLICT "
                    "(hotkey) DO UPDATE SET url = excluded.url, block = excluded.block",
                    hotkey, url)
        return f"published {url}"
