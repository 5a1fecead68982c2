"""The L1 vector index: an immutable annoy index (angular) plus an exact numpy buffer of newer vectors.

annoy indexes cannot grow, so new entries go to the buffer (searched exactly, a matrix product) until a
rebuild on a worker thread folds them into a fresh annoy index, which is swapped in whole: a lookup sees
either the old index and the whole buffer or the new index and what came after it. On disk a rebuild writes
new files and then renames a manifest onto them, so a crash leaves the previous index whole. Entries are matched
only within their lookup context (an integer per entry). Blocking code; the owner calls it from threads.
"""

from __future__ import annotations

import json
import os
import secrets
import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt
from annoy import AnnoyIndex

from daari.datadir import private_file
from daari.semantic.census import ContextCensus
from daari.semantic.minilm import DIMENSIONS

Vector = npt.NDArray[np.float32]
NEIGHBOURS = 64  # annoy neighbours fetched per lookup before filtering by context


@dataclass(frozen=True)
class Candidate:
    row_id: int  # the entry's id in the L1 store
    similarity: float  # cosine


@dataclass
class Sealed:
    """One built annoy index and, per item, the store row id and context it stands for."""

    annoy: AnnoyIndex | None
    row_ids: npt.NDArray[np.int64]
    contexts: npt.NDArray[np.int64]

    @staticmethod
    def empty() -> Sealed:
        return Sealed(None, np.zeros(0, np.int64), np.zeros(0, np.int64))


def build_sealed(vectors: Vector, row_ids: npt.NDArray[np.int64], contexts: npt.NDArray[np.int64], trees: int,
                 path: Path | None = None) -> Sealed:
    """Build an annoy index over `vectors` (blocking, seconds to minutes); saved at `path` when given."""
    if len(row_ids) == 0:
        return Sealed.empty()
    index = AnnoyIndex(DIMENSIONS, "angular")
    for item, vector in enumerate(vectors):
        index.add_item(item, vector)
    index.build(trees, n_jobs=1)  # one thread: lookups and inference share two cores
    if path is not None:
        _save(index, row_ids, contexts, path)
    return Sealed(index, row_ids, contexts)


# A saved index is two files of one generation, `<stem>.<generation>.annoy` and `<stem>.<generation>.ids.npz`,
# named by a small manifest at `path` (`l1.index`). Each generation's files are new files, never rewritten; the
# manifest is replaced by a rename once both are on disk, so a crash or a full disk at any point leaves the
# previous generation whole. One save (and one rebuild) per path at a time, process-wide: a rebuild abandoned
# by an actor that stopped (its thread runs on) finishes before the next actor's starts.
_build_locks: dict[Path, threading.Lock] = {}
_build_locks_guard = threading.Lock()


def build_lock(path: Path) -> threading.Lock:
    """The lock a rebuild and save at `path` hold, for the whole process."""
    with _build_locks_guard:
        return _build_locks.setdefault(path.absolute(), threading.Lock())


def _generation_files(path: Path, generation: str) -> tuple[Path, Path]:
    return (path.with_name(f"{path.stem}.{generation}.annoy"), path.with_name(f"{path.stem}.{generation}.ids.npz"))


def _save(index: AnnoyIndex, row_ids: npt.NDArray[np.int64], contexts: npt.NDArray[np.int64], path: Path) -> None:
    generation = secrets.token_hex(6)
    annoy_path, ids_path = _generation_files(path, generation)
    manifest_tmp = path.with_name(f"{path.name}.{generation}.tmp")
    try:
        private_file(annoy_path)  # vectors of prompts: as private as the prompts
        index.save(str(annoy_path))  # save() leaves the index loaded from (memory-mapped) this file
        _fsync(annoy_path)
        with private_file(ids_path).open("wb") as f:
            np.savez(f, row_ids=row_ids, contexts=contexts)
            f.flush()
            os.fsync(f.fileno())
        with private_file(manifest_tmp).open("w") as f:
            json.dump({"generation": generation, "items": len(row_ids)}, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(manifest_tmp, path)
        _fsync(path.parent)
    except BaseException:
        for leftover in (annoy_path, ids_path, manifest_tmp):
            leftover.unlink(missing_ok=True)  # mapped files stay readable until unmapped (POSIX)
        raise
    _remove_other_generations(path, generation)


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _remove_other_generations(path: Path, current: str) -> None:
    keep = set(_generation_files(path, current))
    stale = [*path.parent.glob(f"{path.stem}.*.annoy"), *path.parent.glob(f"{path.stem}.*.ids.npz"),
             *path.parent.glob(f"{path.name}.*.tmp")]
    # What daari before generations wrote: one annoy file, its ids beside it, and the save's temp file.
    stale += [path.with_name(f"{path.stem}{suffix}") for suffix in (".annoy", ".ids.npz", ".tmp")]
    for old in stale:
        if old not in keep:
            old.unlink(missing_ok=True)


def load_sealed(path: Path) -> Sealed | None:
    """The saved index, memory-mapped; None when it is missing or unreadable (then it is rebuilt)."""
    try:
        manifest = json.loads(path.read_text())
        annoy_path, ids_path = _generation_files(path, str(manifest["generation"]))
        index = AnnoyIndex(DIMENSIONS, "angular")
        index.load(str(annoy_path))
        with np.load(ids_path) as ids:
            row_ids, contexts = ids["row_ids"], ids["contexts"]
        if not index.get_n_items() == len(row_ids) == len(contexts) == manifest["items"]:
            return None
        return Sealed(index, row_ids.astype(np.int64), contexts.astype(np.int64))
    except (OSError, ValueError, KeyError, TypeError):
        return None


@dataclass(frozen=True)
class Snapshot:
    """What a rebuild needs, taken in an instant: the sealed index, a copy of the buffer, rows deleted."""

    sealed: Sealed
    buffer_vectors: Vector
    buffer_row_ids: npt.NDArray[np.int64]
    buffer_contexts: npt.NDArray[np.int64]
    deleted: frozenset[int]

    @property
    def covered(self) -> int:
        return len(self.buffer_row_ids)


def rebuild(snapshot: Snapshot, trees: int, path: Path | None = None) -> Sealed:
    """A new sealed index over the snapshot's live entries (blocking: run it on a worker thread), saved at `path`
    when given; one at a time per path (`build_lock`).

    Reads the old index's vectors back from annoy (read-only, safe beside concurrent lookups).
    """
    if path is None:
        return _rebuild(snapshot, trees, None)
    with build_lock(path):
        return _rebuild(snapshot, trees, path)


def _rebuild(snapshot: Snapshot, trees: int, path: Path | None) -> Sealed:
    old = snapshot.sealed
    old_vectors = (np.array([old.annoy.get_item_vector(i) for i in range(old.annoy.get_n_items())], np.float32)
                   if old.annoy is not None else np.zeros((0, DIMENSIONS), np.float32))
    vectors = np.vstack([old_vectors, snapshot.buffer_vectors])
    row_ids = np.concatenate([old.row_ids, snapshot.buffer_row_ids])
    contexts = np.concatenate([old.contexts, snapshot.buffer_contexts])
    live = np.fromiter((int(r) not in snapshot.deleted for r in row_ids), dtype=bool, count=len(row_ids))
    return build_sealed(vectors[live], row_ids[live], contexts[live], trees, path)


class VectorIndex:
    """What lookups search: the sealed index, the buffer of newer vectors, and deleted rows to skip."""

    def __init__(self, sealed: Sealed | None = None) -> None:
        self.sealed = sealed or Sealed.empty()
        self._vectors = np.zeros((256, DIMENSIONS), np.float32)  # the buffer; grows by doubling
        self._row_ids: list[int] = []
        self._contexts: list[int] = []
        self.deleted: set[int] = set()
        self.census = ContextCensus()  # live entries by context: kept as they come and go
        self.census.add(self.sealed.contexts.tolist())

    def __len__(self) -> int:
        return len(self.sealed.row_ids) + len(self._row_ids) - len(self.deleted)

    @property
    def buffered(self) -> int:
        return len(self._row_ids)

    def add(self, row_id: int, context: int, vector: Vector) -> None:
        n = len(self._row_ids)
        if n == len(self._vectors):
            self._vectors = np.vstack([self._vectors, np.zeros_like(self._vectors)])
        self._vectors[n] = vector
        self._row_ids.append(row_id)
        self._contexts.append(context)
        self.census.add((context,))

    def delete(self, row_ids: list[int]) -> None:
        self.census.remove(self._contexts_of({r for r in row_ids if r not in self.deleted}))
        self.deleted.update(row_ids)

    def _contexts_of(self, row_ids: set[int]) -> list[int]:
        """The contexts of those of `row_ids` indexed here (deletes are rare: evictions, demotions)."""
        if not row_ids:
            return []
        sealed = self.sealed
        found: list[int] = sealed.contexts[np.isin(sealed.row_ids, list(row_ids))].tolist()
        return found + [c for r, c in zip(self._row_ids, self._contexts, strict=True) if r in row_ids]

    def ids_below(self, bound: int) -> list[int]:
        """Live ids below `bound` (a shared store evicts its oldest entries: every id under the oldest one left)."""
        sealed = self.sealed.row_ids
        found = sealed[sealed < bound].tolist() + [r for r in self._row_ids if r < bound]
        return [r for r in found if r not in self.deleted]

    def max_id(self) -> int:
        """The largest id indexed (-1 when empty)."""
        sealed = self.sealed.row_ids
        return max(int(sealed.max()) if len(sealed) else -1, max(self._row_ids, default=-1))

    def search(self, vector: Vector, context: int, threshold: float, limit: int) -> list[Candidate]:
        """Entries of `context` with cosine >= `threshold`, nearest first, at most `limit`."""
        found: dict[int, float] = {}
        sealed = self.sealed
        if sealed.annoy is not None:
            items, distances = sealed.annoy.get_nns_by_vector(vector, NEIGHBOURS, include_distances=True)
            for item, distance in zip(items, distances, strict=True):
                if sealed.contexts[item] == context:
                    found[int(sealed.row_ids[item])] = 1.0 - distance * distance / 2.0  # angular -> cosine
        n = len(self._row_ids)
        if n:
            scores = self._vectors[:n] @ vector
            for position in np.nonzero(scores >= threshold)[0]:
                if self._contexts[position] == context:
                    found[self._row_ids[position]] = float(scores[position])
        ranked = sorted(((s, r) for r, s in found.items() if s >= threshold and r not in self.deleted), reverse=True)
        return [Candidate(r, s) for s, r in ranked[:limit]]

    def snapshot(self) -> Snapshot:
        n = len(self._row_ids)
        return Snapshot(self.sealed, self._vectors[:n].copy(), np.array(self._row_ids, np.int64),
                        np.array(self._contexts, np.int64), frozenset(self.deleted))

    def swap(self, sealed: Sealed, covered: int) -> None:
        """Install a rebuilt index that covers the first `covered` buffer entries; later ones stay buffered."""
        rest = len(self._row_ids) - covered
        self._vectors[:rest] = self._vectors[covered:covered + rest]
        del self._row_ids[:covered], self._contexts[:covered]
        self.sealed = sealed
        live = set(sealed.row_ids.tolist()) | set(self._row_ids)
        self.deleted &= live
