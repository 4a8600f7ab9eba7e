"""A throwaway PostgreSQL server for tests and benchmarks.

    with TemporaryPostgres() as pg:
        store = PostgresStore(pg.conninfo, schema="t1")

It runs the server binaries installed on the machine (Debian's ``postgresql``
package: ``/usr/lib/postgresql/<version>/bin``, or ``CTXCOMPACT_PG_BINDIR``):
a new cluster in a temporary directory, trust authentication, a Unix socket
only (no TCP port to collide on), removed on exit. As root it runs the server
as the ``postgres`` user, since PostgreSQL refuses to run as root.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path


class PostgresUnavailable(RuntimeError):
    """No PostgreSQL server binaries on this machine (or they cannot run)."""


def find_bindir() -> Path:
    """The directory of ``initdb`` and ``pg_ctl``; ``PostgresUnavailable`` if none."""
    env = os.environ.get("CTXCOMPACT_PG_BINDIR")
    candidates = [env] if env else []
    candidates += sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)
    if found := shutil.which("initdb"):
        candidates.append(str(Path(found).parent))
    for c in candidates:
        if (Path(c) / "initdb").is_file() and (Path(c) / "pg_ctl").is_file():
            return Path(c)
    raise PostgresUnavailable(
        "no PostgreSQL server binaries (initdb, pg_ctl): install Debian's postgresql "
        "package or set CTXCOMPACT_PG_BINDIR"
    )


class TemporaryPostgres:
    """A PostgreSQL cluster in a temporary directory, started on enter, removed on exit."""

    def __init__(self, bindir: Path | None = None) -> None:
        self.bindir = bindir or find_bindir()
        self.dir = Path(tempfile.mkdtemp(prefix="ctxcompact-pg-"))
        self.data = self.dir / "data"
        self.socket_dir = self.dir
        self._user: str | None = None
        if os.geteuid() == 0:
            try:
                pw = pwd.getpwnam("postgres")
            except KeyError:
                raise PostgresUnavailable(
                    "running as root and there is no postgres user to run the server as"
                ) from None
            self._user = "postgres"
            os.chown(self.dir, pw.pw_uid, pw.pw_gid)
        self.dir.chmod(0o755)

    @property
    def conninfo(self) -> str:
        """A libpq connection string for the cluster's ``postgres`` database."""
        return f"host={self.socket_dir} dbname=postgres user=postgres"

    def _run(self, *args: str) -> None:
        cmd = [str(self.bindir / args[0]), *args[1:]]
        if self._user is not None:
            cmd = ["runuser", "-u", self._user, "--", *cmd]
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise PostgresUnavailable(
                f"{args[0]} failed ({done.returncode}): {done.stderr.strip() or done.stdout}"
            )

    def start(self) -> TemporaryPostgres:
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust",
                  "--no-sync", "-E", "UTF8", "--locale=C")  # fmt: skip
        options = (
            f"-c listen_addresses='' -c unix_socket_directories='{self.socket_dir}' "
            "-c fsync=off -c max_connections=200"
        )
        self._run("pg_ctl", "-D", str(self.data), "-o", options, "-w", "-t", "60",
                  "-l", str(self.dir / "server.log"), "start")  # fmt: skip
        return self

    def stop(self) -> None:
        if (self.data / "postmaster.pid").exists():
            self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> TemporaryPostgres:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc: object) -> None:
        self.stop()


__all__ = ["PostgresUnavailable", "TemporaryPostgres", "find_bindir"]
