"""The in-process inference slot hands over in arrival order (an embedding batch cannot be starved)."""

import threading
import time

from daari.cpu_budget import FairSlot


def test_waiting_threads_get_the_slot_in_arrival_order_before_the_releaser_can_retake_it() -> None:
    slot = FairSlot()
    order: list[str] = []
    slot.acquire()
    arrived = []

    def waiter(name: str) -> None:
        arrived.append(name)
        with slot.held():
            order.append(name)

    threads = []
    for name in ("embed", "generate"):
        thread = threading.Thread(target=waiter, args=(name,))
        thread.start()
        threads.append(thread)
        while len(arrived) < len(threads) or len(slot._waiters) < len(threads):
            time.sleep(0.001)  # each waiter is queued before the next starts
    slot.release()
    slot.acquire()  # the releaser asks again at once: it queues behind both
    order.append("releaser")
    slot.release()
    for thread in threads:
        thread.join()
    assert order == ["embed", "generate", "releaser"]
