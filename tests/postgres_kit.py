"""A real PostgreSQL server for the tests: Debian's binaries, a temp dir, a Unix socket.

`initdb` refuses to run as root, so as root the cluster belongs to the `postgres` system user
(or `nobody`). The server listens on no TCP port; durability is switched off (fsync,
synchronous_commit), which changes nothing a test can observe except speed.
"""

from __future__ import annotations

import glob
import itertools
import os
import pwd
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

USER = "prism"


def server_bin() -> Path | None:
    """The newest installed PostgreSQL server's bin folder, or None."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"),
                   key=lambda p: int(Path(p).parts[-3]))
    return Path(found[-1]).parent if found else None


@dataclass
class PostgresServer:
    bindir: Path
    base: Path
    owner: str | None  # the system user that runs the server when the tests run as root
    _names: itertools.count = field(default_factory=itertools.count)

    @property
    def socket_dir(self) -> Path:
        return self.base / "sock"

    def url(self, schema: str | None = None) -> str:
        url = f"postgresql+psycopg://{USER}@/{USER}?host={self.socket_dir}"
        return url + (f"&options=-csearch_path%3D{schema}" if schema else "")

    def _as_owner(self, argv: list[str]) -> list[str]:
        return ["runuser", "-u", self.owner, "--", *argv] if self.owner else argv

    def _run(self, *argv: str) -> None:
        subprocess.run(self._as_owner([str(self.bindir / argv[0]), *argv[1:]]), check=True,
                       capture_output=True, timeout=120)

    @classmethod
    def start(cls, bindir: Path) -> PostgresServer:
        base = Path(tempfile.mkdtemp(prefix="prism-pg-"))  # short: socket paths are <108 B
        owner = None
        if os.geteuid() == 0:
            owner = next(n for n in ("postgres", "nobody") if _user_exists(n))
            entry = pwd.getpwnam(owner)
            os.chown(base, entry.pw_uid, entry.pw_gid)
        server = cls(bindir, base, owner)
        (base / "sock").mkdir()
        if owner:
            os.chown(base / "sock", entry.pw_uid, entry.pw_gid)
        server._run("initdb", "-D", str(base / "data"), "-U", USER, "--auth=trust",
                    "-E", "UTF8", "--no-sync", "--no-instructions")
        options = (f"-k {base / 'sock'} -c listen_addresses='' -c fsync=off "
                   "-c synchronous_commit=off -c full_page_writes=off -c max_connections=60")
        server._run("pg_ctl", "-D", str(base / "data"), "-l", str(base / "server.log"),
                    "-o", options, "-w", "-t", "60", "start")
        server._run("createdb", "-h", str(base / "sock"), "-U", USER, USER)
        return server

    def new_store_url(self) -> str:
        """The URL of a fresh, empty schema: each test its own store, in milliseconds (a
        CREATE DATABASE costs a second or two)."""
        import psycopg

        name = f"t{os.getpid()}_{next(self._names)}"
        with psycopg.connect(host=str(self.socket_dir), user=USER, dbname=USER,
                             autocommit=True) as conn:
            conn.execute(f'CREATE SCHEMA "{name}"')
        return self.url(name)

    def stop(self) -> None:
        try:
            self._run("pg_ctl", "-D", str(self.base / "data"), "-m", "immediate", "-w", "stop")
        finally:
            shutil.rmtree(self.base, ignore_errors=True)


def _user_exists(name: str) -> bool:
    try:
        pwd.getpwnam(name)
        return True
    except KeyError:
        return False
