"""Where daari keeps private data (the cache holds prompts and answers): a 0700 directory of 0600 files.

The default is the user's data directory, never the current directory (a repository could commit it).
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable, Mapping
from pathlib import Path

PRIVATE_DIR = 0o700
PRIVATE_FILE = 0o600
SECRET_FILE = "partition.key"  # the HMAC key of the cache partitions (daari/cache/partition.py)


def default_data_dir(environ: Mapping[str, str] | None = None) -> str:
    """$XDG_DATA_HOME/daari, else ~/.local/share/daari (the XDG base directory rule)."""
    env = os.environ if environ is None else environ
    base = env.get("XDG_DATA_HOME") or ""
    if not os.path.isabs(base):  # the spec says a relative value is to be ignored
        base = os.path.join(os.path.expanduser("~"), ".local", "share")
    return os.path.join(base, "daari")


def private_dir(path: Path) -> Path:
    """Create `path` (and parents) and make it 0700: other local users cannot list or read it."""
    path.mkdir(mode=PRIVATE_DIR, parents=True, exist_ok=True)
    if path.stat().st_mode & 0o777 != PRIVATE_DIR:
        path.chmod(PRIVATE_DIR)
    return path


def private_file(path: Path) -> Path:
    """Create `path` empty if absent, and make it 0600 (SQLite gives its -wal and -shm files the same mode)."""
    private_dir(path.parent)
    fd = os.open(path, os.O_CREAT | os.O_WRONLY, PRIVATE_FILE)
    os.close(fd)
    if path.stat().st_mode & 0o777 != PRIVATE_FILE:
        path.chmod(PRIVATE_FILE)
    for sibling in (path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        if sibling.exists() and sibling.stat().st_mode & 0o777 != PRIVATE_FILE:
            sibling.chmod(PRIVATE_FILE)  # left by an older daari that did not restrict them
    return path


def write_atomically(target: Path, write: Callable[[Path], object]) -> None:
    """`write` the file under a temporary name beside `target` (this process's own), make it 0600, then rename it
    onto `target`: a crash or a second process never leaves half a file under the final name, and a `write` that
    raises leaves nothing. The temporary name keeps `target`'s suffix (writers such as numpy's add theirs)."""
    partial = target.with_name(f"{target.name}.partial-{os.getpid()}{target.suffix}")
    try:
        write(partial)
        os.chmod(partial, PRIVATE_FILE)
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)


def load_secret(data_dir: Path) -> bytes:
    """The data dir's random secret (32 bytes, 0600), created on first use; never leaves the machine."""
    path = private_dir(data_dir) / SECRET_FILE
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, PRIVATE_FILE)
    except FileExistsError:
        secret = path.read_bytes()
        if len(secret) >= 32:
            private_file(path)
            return secret
        fd = os.open(path, os.O_WRONLY | os.O_TRUNC)
    with os.fdopen(fd, "wb") as out:
        out.write(secrets.token_bytes(32))
    return path.read_bytes()
