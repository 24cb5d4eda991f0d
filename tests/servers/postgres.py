"""A throwaway PostgreSQL server from Debian's packages (initdb/pg_ctl), in a temp dir, on a free port."""

from __future__ import annotations

import glob
import os
import pwd
import secrets
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

USER = "kernelbot"  # the database superuser initdb creates


def find_bindir() -> Path | None:
    """The newest /usr/lib/postgresql/<version>/bin holding initdb and pg_ctl, or None."""
    found = [
        Path(p).parent
        for p in glob.glob("/usr/lib/postgresql/*/bin/initdb")
        if Path(p).with_name("pg_ctl").exists()
    ]
    found.sort(key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0)
    return found[-1] if found else None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class PostgresServer:
    """initdb + pg_ctl start; the server runs as a non-root user because postgres refuses root."""

    def __init__(self, bindir: Path) -> None:
        self.bindir = bindir
        self.root = Path(tempfile.mkdtemp(prefix="kernelbot-pg-"))
        self.data = self.root / "data"
        self.port = _free_port()
        self.password = secrets.token_hex(8)
        # Root runs the server as the packaged "postgres" account; anyone else runs it as themselves.
        self.os_user = "postgres" if os.geteuid() == 0 else None

    def _run(self, *args: str) -> None:
        cmd = [str(self.bindir / args[0]), *args[1:]]
        if self.os_user:
            cmd = ["runuser", "-u", self.os_user, "--", *cmd]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}): {proc.stdout}{proc.stderr}")

    def start(self) -> PostgresServer:
        if self.os_user:
            pw = pwd.getpwnam(self.os_user)
            os.chown(self.root, pw.pw_uid, pw.pw_gid)
        pwfile = self.root / "pwfile"
        pwfile.write_text(self.password + "\n")
        if self.os_user:
            os.chown(pwfile, pwd.getpwnam(self.os_user).pw_uid, -1)
        self._run(
            "initdb",
            "-D",
            str(self.data),
            "-U",
            USER,
            f"--pwfile={pwfile}",
            "--auth=scram-sha-256",
            "--no-sync",
            "--encoding=UTF8",
            "--locale=C",
        )
        options = (
            f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off "
            "-c synchronous_commit=off -c full_page_writes=off -c max_connections=100"
        )
        self._run(
            "pg_ctl",
            "-D",
            str(self.data),
            "-l",
            str(self.root / "server.log"),
            "-o",
            options,
            "-w",
            "-t",
            "60",
            "start",
        )
        return self

    def url(self, database: str = "postgres") -> str:
        return f"postgresql+psycopg://{USER}:{self.password}@127.0.0.1:{self.port}/{database}"

    def create_database(self, name: str) -> str:
        """A fresh, empty database; returns its SQLAlchemy URL."""
        import psycopg

        with psycopg.connect(
            host="127.0.0.1",
            port=self.port,
            user=USER,
            password=self.password,
            dbname="postgres",
            autocommit=True,
        ) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def stop(self) -> None:
        try:
            self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)
