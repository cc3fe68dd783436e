"""Tests for moto_sqs.py: the faults it fixes exist, and the fixes close them.

Both tests force the losing interleaving instead of hoping for it: the
queue's message list is replaced by one that runs a hook the moment
DeleteMessage has finished reading it, which is exactly where a send is
lost. The hook sends a message from another thread, as moto's threaded
server would.

    python3 localstack/moto_sqs_test.py
"""

import threading
import unittest

from moto.sqs import models
from moto.sqs.models import sqs_backends

import moto_sqs

REGION = "us-east-1"


class HookedList(list):
    """A list that calls hook() once, when an iteration reaches its end."""

    def __init__(self, items, hook):
        super().__init__(items)
        self.hook = hook

    def __iter__(self):
        yield from super().__iter__()
        hook, self.hook = self.hook, None
        if hook:
            hook()


class DeleteRaceTest(unittest.TestCase):
    def setUp(self):
        self.original = models.Queue.delete_message
        self.addCleanup(setattr, models.Queue, "delete_message", self.original)

    def race(self, account):
        """Delete one message while a send lands mid-delete; return
        (whether the sent message survived, whether another thread could
        take the queue's lock during the rebuild)."""
        backend = sqs_backends[account][REGION]
        name = "race"
        backend.create_queue(name)
        queue = backend.get_queue(name)
        for body in ("a", "b", "c"):
            backend.send_message(name, body)
        received = backend.receive_message(name, 10, 0, 600)
        self.assertEqual(len(received), 3)

        seen = {}
        sender = threading.Thread(target=backend.send_message, args=(name, "late"))

        def mid_delete():
            # The lock is reentrant: ask from another thread, as a send would.
            def probe():
                got = queue._messages_lock.acquire(blocking=False)
                if got:
                    queue._messages_lock.release()
                seen["lock_free"] = got

            prober = threading.Thread(target=probe)
            prober.start()
            prober.join()
            sender.start()
            # Unfixed, the send appends at once; fixed, it waits for the
            # lock this delete holds. Either way the outcome is decided by
            # the lock, not by how long this waits.
            sender.join(timeout=1)

        queue._messages = HookedList(queue._messages, mid_delete)
        backend.delete_message(name, received[0].receipt_handle)
        sender.join()

        bodies = {m.body for m in backend.receive_message(name, 10, 0, 600)}
        bodies |= {m.body for m in received[1:]}
        return "late" in bodies, seen["lock_free"]

    def test_unpatched_moto_loses_the_send(self):
        survived, lock_free = self.race("111111111111")
        if survived:
            self.skipTest("this moto no longer loses a send during a delete; moto_sqs.py may be unneeded")
        self.assertTrue(lock_free)

    def test_patched_moto_keeps_the_send(self):
        moto_sqs.locked_delete()
        moto_sqs.locked_delete()  # idempotent: a second call must not nest
        self.assertTrue(models.Queue.delete_message.lambdaidem_locked)
        survived, lock_free = self.race("222222222222")
        self.assertFalse(lock_free, "DeleteMessage rebuilt the list without holding the queue's lock")
        self.assertTrue(survived, "a message sent during DeleteMessage was lost")


class FifoOrderTest(unittest.TestCase):
    """A FIFO group whose visibility ran out comes back first message first.

    The timeout is made to pass by moving each in-flight message's
    visible_at into the past, the state a real wait would leave, with
    one-millisecond steps between them as messages received together get.
    """

    def setUp(self):
        saved = [
            (models.SQSBackend, "receive_message", models.SQSBackend.receive_message),
            (models, "unix_time_millis", models.unix_time_millis),
            (models.Queue, "pending_message_groups", models.Queue.__dict__["pending_message_groups"]),
            (models.Queue, "wait_for_messages", models.Queue.wait_for_messages),
        ]
        for owner, name, value in saved:
            self.addCleanup(setattr, owner, name, value)

    def redeliver(self, account, wait_seconds=0):
        """Send A1..A3 and B1 (B in the middle), receive all, expire them,
        receive again; return the bodies of the second receive in order."""
        backend = sqs_backends[account][REGION]
        name = "order.fifo"
        backend.create_queue(name, FifoQueue="true", ContentBasedDeduplication="true")
        for body, group in (("A1", "A"), ("A2", "A"), ("B1", "B"), ("A3", "A")):
            backend.send_message(name, body, group_id=group)
        first = backend.receive_message(name, 10, 0, 600)
        self.assertEqual([m.body for m in first], ["A1", "A2", "B1", "A3"])
        queue = backend.get_queue(name)
        past = models.unix_time_millis() - 1000
        for i, m in enumerate(queue._messages):
            m.visible_at = past + i
        return [m.body for m in backend.receive_message(name, 10, wait_seconds, 600)]

    def test_unpatched_moto_reorders_the_group(self):
        got = self.redeliver("333333333333")
        if got[:1] == ["A1"]:
            self.skipTest("this moto redelivers a FIFO group in order; fifo_order may be unneeded")
        self.assertNotEqual([b for b in got if b.startswith("A")], ["A1", "A2", "A3"])

    def test_patched_moto_keeps_the_order(self):
        moto_sqs.fifo_order()
        moto_sqs.fifo_order()  # idempotent: a second call must not nest
        self.assertTrue(models.SQSBackend.receive_message.lambdaidem_ordered)
        for account, wait in (("444444444444", 0), ("555555555555", 1)):
            got = self.redeliver(account, wait)
            self.assertEqual([b for b in got if b.startswith("A")], ["A1", "A2", "A3"], got)
            self.assertIn("B1", got)

    def test_patched_moto_still_holds_a_group_in_flight(self):
        moto_sqs.fifo_order()
        backend = sqs_backends["666666666666"][REGION]
        name = "held.fifo"
        backend.create_queue(name, FifoQueue="true", ContentBasedDeduplication="true")
        backend.send_message(name, "A1", group_id="A")
        self.assertEqual([m.body for m in backend.receive_message(name, 1, 0, 600)], ["A1"])
        backend.send_message(name, "A2", group_id="A")
        backend.send_message(name, "B1", group_id="B")
        # A1 is in flight: A2 must wait; B is free.
        self.assertEqual([m.body for m in backend.receive_message(name, 10, 0, 600)], ["B1"])


if __name__ == "__main__":
    unittest.main()
