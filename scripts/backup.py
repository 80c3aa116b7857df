#!/usr/bin/env python3
"""Back up and restore a KernelIndex instance: the PostgreSQL database (pg_dump's custom format)
and the media folder. Standard library only, so it runs on a bare backup host too.

    python3 scripts/backup.py dump [--out DIR]            # DATABASE_URL, KERNELINDEX_VAR_DIR
    python3 scripts/backup.py restore DUMP --database-url URL [--create] [--clean] [--media-to DIR]
    python3 scripts/backup.py check DUMP                   # the archive is readable; lists its tables

docs/backup.md says when and how; tests/ops/test_backup_restore.py restores a dump into a fresh
database and finds every row with its digest unchanged.
"""

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import unquote, urlsplit

ROOT = Path(__file__).resolve().parent.parent


def pg_env(url: str) -> tuple[dict, str]:
    """libpq environment variables for a postgres:// URL, and the database name."""
    parts = urlsplit(url)
    if parts.scheme not in ("postgres", "postgresql", "pgsql"):
        sys.exit(f"not a PostgreSQL URL: {parts.scheme}:// (backups need PostgreSQL)")
    env = dict(os.environ)
    for name, value in (
        ("PGHOST", parts.hostname),
        ("PGPORT", parts.port and str(parts.port)),
        ("PGUSER", parts.username and unquote(parts.username)),
        ("PGPASSWORD", parts.password and unquote(parts.password)),
    ):
        if value:
            env[name] = value
    database = unquote(parts.path.lstrip("/"))
    if not re.fullmatch(r"[A-Za-z0-9_-]{1,63}", database):
        sys.exit(f"the database URL names no usable database ({database!r})")
    return env, database


def tool(name: str) -> str:
    found = shutil.which(name) or (f"/usr/bin/{name}" if Path(f"/usr/bin/{name}").exists() else None)
    if not found:
        sys.exit(f"{name} is not installed (Debian: apt-get install postgresql-client)")
    return found


def major(version_text: str) -> int:
    match = re.search(r"(\d+)(?:\.\d+)?", version_text)
    return int(match.group(1)) if match else 0


def versions_check(env: dict, database: str) -> dict:
    """pg_dump refuses a newer server; say so plainly, with both versions."""
    client = subprocess.run([tool("pg_dump"), "--version"], capture_output=True, text=True, check=True).stdout
    server = run([tool("psql"), "-X", "-Atc", "SHOW server_version", "-d", database], env).strip()
    if major(client) < major(server):
        sys.exit(f"pg_dump is {client.strip()} but the server is {server}: install a client >= the server")
    return {"pg_dump": client.strip(), "server": server}


def run(command: list, env: dict) -> str:
    result = subprocess.run([str(c) for c in command], env=env, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"{Path(command[0]).name} failed ({result.returncode}): {result.stderr.strip()}")
    return result.stdout


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def dump(args) -> Path:
    env, database = pg_env(args.database_url)
    versions = versions_check(env, database)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    target = out / f"kernelindex-{stamp}.dump"
    partial = target.with_suffix(".dump.partial")
    # Custom format: compressed, restorable table by table, and pg_restore checks it on read.
    run(
        [tool("pg_dump"), "--format=custom", "--no-owner", "--no-acl", "--file", partial, "-d", database], env
    )
    partial.rename(target)  # a dump that exists is a complete dump
    manifest = {"database": database, "dump": target.name, "sha256": sha256(target), **versions}
    media = Path(args.media)
    if media.is_dir() and any(media.iterdir()):
        archive = out / f"kernelindex-{stamp}-media.tar.gz"
        with tarfile.open(archive, "w:gz") as tar:
            tar.add(media, arcname="media")
        manifest.update(media=archive.name, media_sha256=sha256(archive))
    (out / f"kernelindex-{stamp}.json").write_text(json.dumps(manifest, indent=2) + "\n")
    if args.keep_days:
        prune(out, keep_days=args.keep_days, keep=target)
    print(target)
    return target


def prune(out: Path, *, keep_days: int, keep: Path) -> None:
    """Delete this script's own backups older than keep_days; never the one just written."""
    cutoff = datetime.now(UTC).timestamp() - keep_days * 86400
    pattern = re.compile(r"^kernelindex-\d{8}T\d{6}Z(-media\.tar\.gz|\.dump|\.json)$")
    for path in out.iterdir():
        if pattern.match(path.name) and path.stat().st_mtime < cutoff and path.stem != keep.stem:
            path.unlink()


def restore(args) -> None:
    archive = Path(args.dump)
    manifest_path = archive.with_suffix(".json")
    if manifest_path.exists():
        expected = json.loads(manifest_path.read_text())["sha256"]
        if sha256(archive) != expected:
            sys.exit(f"{archive.name}: sha256 does not match {manifest_path.name}; the dump is damaged")
    env, database = pg_env(args.database_url)
    if args.create:
        exists = run(
            [
                tool("psql"),
                "-X",
                "-Atc",
                f"SELECT 1 FROM pg_database WHERE datname = '{database}'",
                "-d",
                "postgres",
            ],
            env,
        ).strip()
        if exists:
            sys.exit(f"database {database} already exists; restore into a new one, or drop it first")
        run([tool("createdb"), database], env)
    elif not args.clean and _has_tables(env, database):
        sys.exit(f"database {database} already has tables; pass --clean to replace them")
    command = [
        tool("pg_restore"),
        "--no-owner",
        "--no-acl",
        "--exit-on-error",
        "--single-transaction",
        "-d",
        database,
    ]
    if args.clean:
        command[1:1] = ["--clean", "--if-exists"]
    run([*command, archive], env)
    if args.media_to:
        media_archive = archive.with_name(archive.stem + "-media.tar.gz")
        if media_archive.exists():
            with tarfile.open(media_archive, "r:gz") as tar:
                members = [m for m in tar.getmembers() if m.name.startswith("media/")]
                for member in members:
                    member.name = member.name.removeprefix("media/")
                tar.extractall(args.media_to, members=members, filter="data")
    print(f"restored {archive.name} into {database}")


def _has_tables(env: dict, database: str) -> bool:
    query = "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'"
    return int(run([tool("psql"), "-X", "-Atc", query, "-d", database], env).strip() or 0) > 0


def check(args) -> None:
    listing = run([tool("pg_restore"), "--list", args.dump], dict(os.environ))
    tables = sorted(set(re.findall(r"TABLE DATA public (\S+)", listing)))
    print(f"{args.dump}: readable, {len(tables)} tables")
    for table in tables:
        print(f"  {table}")


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    commands = parser.add_subparsers(dest="command", required=True)
    var_dir = Path(os.environ.get("KERNELINDEX_VAR_DIR", ROOT / "var"))
    p = commands.add_parser("dump", help="pg_dump the database (and tar the media folder)")
    p.add_argument("--database-url", default=os.environ.get("DATABASE_URL", ""))
    p.add_argument("--out", default=os.environ.get("BACKUP_DIR", var_dir / "backups"))
    p.add_argument("--media", default=var_dir / "media")
    p.add_argument("--keep-days", type=int, default=0, help="delete older backups in --out (0: keep all)")
    p.set_defaults(handler=dump)
    p = commands.add_parser("restore", help="pg_restore a dump into a database")
    p.add_argument("dump")
    p.add_argument("--database-url", required=True, help="where to restore; never defaults to DATABASE_URL")
    p.add_argument("--create", action="store_true", help="create the database first (it must not exist)")
    p.add_argument("--clean", action="store_true", help="drop the objects the dump contains first")
    p.add_argument("--media-to", help="unpack the media archive to this folder (e.g. var/media)")
    p.set_defaults(handler=restore)
    p = commands.add_parser("check", help="read a dump's table of contents")
    p.add_argument("dump")
    p.set_defaults(handler=check)
    args = parser.parse_args(argv)
    if args.command == "dump" and not args.database_url:
        sys.exit("set DATABASE_URL or pass --database-url")
    args.handler(args)


if __name__ == "__main__":
    main()
