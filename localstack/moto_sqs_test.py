"""Tests for moto_sqs.py: the race it fixes exists, and the fix closes it.

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


if __name__ == "__main__":
    unittest.main()
