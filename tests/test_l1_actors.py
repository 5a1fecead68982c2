"""EmbedderActor micro-batching, VerifierActor modes, and the L1 tier skipping itself while loading."""

import numpy as np
import trio
import trio.testing

from actors.embedder import INLINE_WINDOW_CHARS, Embed, EmbedderActor, EmbedderStatus, Window
from actors.runtime import Mailbox
from actors.verifier import VerifierActor, Verify
from daari.config import L1Config
from daari.metrics import Metrics
from daari.pipeline.shortcuts import ShortcutQuery
from daari.pipeline.steps.l1 import SemanticTier
from daari.protocol.chat import ChatRequest, Message
from daari.semantic.minilm import MAX_TOKENS, fits_whole, load_minilm


async def test_concurrent_embeds_run_as_batches_with_the_same_vectors() -> None:
    status = EmbedderStatus()
    mailbox = Mailbox("embedder", 64)
    address = mailbox.address
    texts = [f"user: how do I sort a list of {i} items in Python?" for i in range(32)]
    results: dict[int, np.ndarray] = {}
    async with trio.open_nursery() as nursery:
        await nursery.start(EmbedderActor(status, batch_size=32, batch_wait_s=0.05).serve_inbox, mailbox.inbox)
        with trio.fail_after(60):
            await status.started.wait()

        async def ask(i: int) -> None:
            results[i] = (await address.call(Embed(texts[i]))).vector

        async with trio.open_nursery() as asks:
            for i in range(32):
                asks.start_soon(ask, i)
        nursery.cancel_scope.cancel()
    assert status.texts == 32 and status.batches <= 4  # 32 one-by-one would be 32 batches
    alone = load_minilm().embed([texts[7]])[0]
    assert float(results[7] @ alone) > 0.9999


async def test_without_a_wait_a_lone_embed_runs_alone_and_those_queued_meanwhile_batch() -> None:
    """The default (no wait for company): what queued while a batch ran forms the next batch, so concurrent
    requests still share model runs; a lone one never waits for company."""
    status = EmbedderStatus()
    mailbox = Mailbox("embedder", 64)
    address = mailbox.address
    async with trio.open_nursery() as nursery:
        actor = EmbedderActor(status, batch_size=32)
        assert actor.batch_wait_s == 0.0
        await nursery.start(actor.serve_inbox, mailbox.inbox)
        with trio.fail_after(60):
            await status.started.wait()
        await address.call(Embed("user: alone"))
        assert (status.batches, status.texts) == (1, 1)

        async def ask(i: int) -> None:
            await address.call(Embed(f"user: how do I sort a list of {i} items in Python?"))

        async with trio.open_nursery() as asks:
            for i in range(16):
                asks.start_soon(ask, i)
        nursery.cancel_scope.cancel()
    assert status.texts == 17 and status.batches <= 3  # 16 asked together: queued while the first ran, if not before


async def test_embedding_reports_how_much_of_a_long_text_it_read() -> None:
    status = EmbedderStatus()
    mailbox = Mailbox("embedder", 8)
    address = mailbox.address
    text = "user: " + " ".join(f"token{i}" for i in range(600))
    async with trio.open_nursery() as nursery:
        await nursery.start(EmbedderActor(status).serve_inbox, mailbox.inbox)
        with trio.fail_after(60):
            await status.started.wait()  # asking earlier is answered EmbedderNotReady
        embedding = await address.call(Embed(text))
        nursery.cancel_scope.cancel()
    assert 0 < embedding.seen_chars < len(text)


async def test_the_window_is_what_an_embedding_reads_without_a_model_run() -> None:
    status = EmbedderStatus()
    mailbox = Mailbox("embedder", 8)
    address = mailbox.address
    short = "user: how do I list docker containers?"
    long = "user: " + " ".join(f"token{i}" for i in range(600))  # past the window, and tokenized off the loop
    async with trio.open_nursery() as nursery:
        await nursery.start(EmbedderActor(status).serve_inbox, mailbox.inbox)
        with trio.fail_after(60):
            await status.started.wait()
        windows = [await address.call(Window(text)) for text in (short, long)]
        assert status.texts == 0  # the tokenizer only
        embedded = [(await address.call(Embed(text))).seen_chars for text in (short, long)]
        nursery.cancel_scope.cancel()
    assert windows == embedded and windows[0] == len(short) and 0 < windows[1] < len(long)
    assert len(long) > INLINE_WINDOW_CHARS


def test_an_ascii_text_within_the_window_in_characters_is_read_whole() -> None:
    """What `fits_whole` assumes without the tokenizer (daari/semantic/minilm.py), checked against the tokenizer:
    never more word pieces than the window; not so for every script (a Hangul syllable is three pieces)."""
    import random

    window = MAX_TOKENS - 2
    model = load_minilm()
    rng = random.Random(7)
    texts = ["".join(chr(rng.randint(0, 127)) for _ in range(rng.randint(1, window))) for _ in range(300)]
    texts += ["user: " + "a b " * 200, "x" * window, "!" * window, "\x00\x01" * 100]
    texts = [t[:window] for t in texts]
    assert all(fits_whole(t) for t in texts)
    assert all(len(model.plain.encode(t, add_special_tokens=False).ids) <= window for t in texts)
    hangul = "탁 " * (window // 2)
    assert not fits_whole(hangul) and model.seen_chars([hangul])[0] < window - 1
    assert not fits_whole("x" * (window + 1)) and model.seen_chars(["x" * (window + 1)]) == [window + 1]


async def verify(actor: VerifierActor, query: str, candidate: str):  # type: ignore[no-untyped-def]
    return await actor.verify(Verify(query, candidate))


async def test_model_mode_asks_only_after_lexical_agrees_and_parses_strictly() -> None:
    asked: list[list[Message]] = []
    replies = iter(["YES", "no", "Sure, they match"])

    async def ask_model(messages: list[Message]) -> str | None:
        asked.append(messages)
        return next(replies)

    actor = VerifierActor("model", ask_model)
    a, b = "How do I delete a file in Python?", "How can I remove a file with Python?"
    assert (await verify(actor, a, b)).same
    assert (await verify(actor, a, b)).rule == "model"
    assert (await verify(actor, a, b)).rule == "model_malformed"
    rejected = await verify(actor, "How do I list Docker containers?", "How do I list Docker images?")
    assert rejected.rule == "content_word"
    assert len(asked) == 3  # the lexical rejection never reached the model


async def test_model_mode_rejects_when_the_model_does_not_answer_in_time(
        autojump_clock: trio.testing.MockClock) -> None:
    async def ask_model(messages: list[Message]) -> str | None:
        await trio.sleep_forever()
        raise AssertionError

    actor = VerifierActor("model", ask_model, model_wait_s=5)
    verdict = await verify(actor, "What is memoization?", "Explain memoization")
    assert not verdict.same and verdict.rule == "model_unavailable"


async def test_none_and_lexical_modes() -> None:
    assert (await verify(VerifierActor("none"), "list images", "list containers")).same
    assert not (await verify(VerifierActor("lexical"), "list images", "list containers")).same


async def test_l1_declines_without_waiting_while_the_model_loads() -> None:
    never = Mailbox("never", 1).address  # nothing reads these: asking them would hang the test
    tier = SemanticTier(L1Config(), never, EmbedderStatus(ready=False), never, never, Metrics())
    query = ShortcutQuery(ChatRequest([Message("user", "hi")], "m"), {}, "key")
    with trio.fail_after(1):
        result = await tier.answer(query)
    assert result is not None and result.completion is None and result.details == {"l1": "skipped_loading"}
    no_cache = ShortcutQuery(ChatRequest([Message("user", "hi")], "m"), {}, "")
    assert await tier.answer(no_cache) is None
    tier.status.error = "ModelNotInstalled: ..."  # the model never loaded: L1 says so, and still never waits
    result = await tier.answer(query)
    assert result is not None and result.details == {"l1": "unavailable"}
