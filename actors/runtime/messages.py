"""Message kinds: a `Call[R]` names the type of its one reply, a `Stream[T]` the type of its items."""

from __future__ import annotations

from typing import Generic, TypeVar

R = TypeVar("R")
T = TypeVar("T")


class Call(Generic[R]):
    """A request answered once with an `R`: `class Get(Call[Entry | None])`, then `await address.call(Get())`."""


class Stream(Generic[T]):
    """A request answered with any number of `T` items, read by the asker inside `async with address.stream(...)`."""
