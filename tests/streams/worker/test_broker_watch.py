"""The rule that says the broker lost our topics (streams/worker/broker_watch.py), on worked cases."""

import asyncio

from aiokafka import TopicPartition

from streams.worker.broker_watch import CONFIRM_CHECKS, BrokerWatch, losses

A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)


def test_losses_are_topics_gone_and_ends_gone_back():
    seen, highest = {"a", "b"}, {A0: 10, A1: 5, B0: 7}
    # all there, ends grown or equal: nothing lost
    assert losses(seen, highest, {"a": 2, "b": 1}, {A0: 12, A1: 5, B0: 7}) == []
    # b gone, a[1] back to 0 (a memory broker's restart, with a topic recreated since)
    assert losses(seen, highest, {"a": 2}, {A0: 10, A1: 0}) == [
        "topic b is gone", "a[1] ends at 0, below 5 seen before"]
    # a topic never seen (not yet created) is not a loss; a partition never seen neither
    assert losses({"a"}, {A0: 3}, {"a": 2}, {A0: 3, A1: 0}) == []


class Scripted(BrokerWatch):
    """The watch with what the broker answers scripted (None: unreachable)."""

    def __init__(self, answers):
        self.calls: list[str] = []
        super().__init__({}, ["a", "b"], self.calls.append)
        self.answers = list(answers)

    async def _read(self):
        answer = self.answers.pop(0)
        if answer is None:
            raise ConnectionError("unreachable")
        return answer


def run(watch, n):
    async def go():
        for _ in range(n):
            await watch.check()
    asyncio.run(go())


def test_a_loss_is_confirmed_once_and_unreachable_is_no_evidence():
    ok = ({"a": 1, "b": 1}, {A0: 10, B0: 4})
    gone = ({"a": 1}, {A0: 0})
    # ok, unreachable (nothing), one bad check then a good one (no call), then bad twice: one call
    w = Scripted([ok, None, gone, ok, gone, gone, gone])
    run(w, 7)
    assert CONFIRM_CHECKS == 2
    assert w.calls == ["topic b is gone; a[0] ends at 0, below 10 seen before"]
    assert w.lost == w.calls[0]
