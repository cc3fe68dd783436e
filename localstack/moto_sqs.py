"""Run moto's server as the local stack's SQS, with one race in it fixed.

moto 5.x keeps a queue's messages in a list. SendMessage appends to that
list while holding the queue's lock; DeleteMessage builds a new list
without the deleted message and assigns it back, without taking the lock.
A send that lands between the end of that rebuild and the assignment is
dropped: SendMessage answered with a message ID, and no receive ever
returns the message. Real SQS does not lose an acknowledged send, so a
test that finds a message missing would blame the library for the
emulator. The chaos run found it: one message in about 24,000, under two
pollers deleting while the driver sent (see localstack/README.md).

The fix is to take the same lock in DeleteMessage.

moto 5.2.1 also hands a FIFO group back out of order. Receive A1, A2, A3
of one group, delete none, let the visibility timeout pass and receive
again: SQS gives A1 first; moto gives A3. Its receive walks the queue in
order, and when it meets a message whose visibility has run out it drops
that one message from its in-flight set and asks again whether the group
is in flight, which it still is (A2 and A3 are in the set) until it
reaches the last one. Every visibility check also reads the clock afresh,
so messages received together expire one by one during the walk. The fix
(fifo_order) makes one receive see one instant, and counts a group as in
flight only for messages that were in flight before this receive began
and not handed out again by it, and are still invisible: the first of the group is delivered first, and
the rest follow in order in the same answer, as SQS does.

Everything else is moto's own server, with the arguments given to this
script:

    python3 localstack/moto_sqs.py -H 127.0.0.1 -p 4566
"""

import inspect
import sys
import threading

from moto.sqs import models


def locked_delete():
    """Make Queue.delete_message hold the queue's lock; idempotent."""
    queue = models.Queue
    delete = queue.delete_message
    if getattr(delete, "lambdaidem_locked", False):
        return
    # The lock this relies on must exist, or the patch would fail on the
    # first delete instead of here, where the message says why.
    if "_messages_lock" not in inspect.getsource(queue.__init__):
        sys.exit(
            "moto_sqs.py: this moto's sqs Queue has no _messages_lock; "
            "check whether DeleteMessage still rebuilds the message list "
            "unlocked and update the patch"
        )

    def delete_message(self, receipt_handle):
        with self._messages_lock:
            return delete(self, receipt_handle)

    delete_message.lambdaidem_locked = True
    delete_message.__doc__ = delete.__doc__
    queue.delete_message = delete_message


# The receive in progress on this thread: the instant it sees, and the
# messages that were in flight when it began, with their receive counts (a
# message this receive hands out again counts one more and no longer
# holds its group).
_receive = threading.local()


def fifo_order():
    """Make a FIFO receive deliver a redelivered group in order; idempotent."""
    backend = models.SQSBackend
    receive = backend.receive_message
    if getattr(receive, "lambdaidem_ordered", False):
        return
    # What the patch relies on, checked here so that a moto that changed
    # fails at start with a reason instead of misbehaving.
    source = inspect.getsource(receive)
    for needle in ("queue.pending_message_groups", "message.visible", "queue.wait_for_messages"):
        if needle not in source:
            sys.exit(
                f"moto_sqs.py: this moto's ReceiveMessage no longer uses {needle}; "
                "check whether it still delivers a FIFO group out of order and update the patch"
            )
    real_clock = models.unix_time_millis
    queue = models.Queue
    wait = queue.wait_for_messages

    def clock():
        now = getattr(_receive, "now", None)
        return real_clock() if now is None else now

    def begin(q):
        _receive.now = real_clock()
        _receive.before = {m: m.approximate_receive_count for m in q.pending_messages}

    def pending_message_groups(self):
        before = getattr(_receive, "before", None)
        return {
            m.group_id
            for m in self.pending_messages
            if m.group_id is not None
            and not m.visible
            and (before is None or before.get(m) == m.approximate_receive_count)
        }

    def wait_for_messages(self, timeout):
        if getattr(_receive, "now", None) is None:
            return wait(self, timeout)
        # Wait on the real clock, then look at the queue afresh.
        _receive.now = None
        try:
            return wait(self, timeout)
        finally:
            begin(self)

    def receive_message(self, queue_name, *args, **kwargs):
        q = self.get_queue(queue_name)
        if not q.fifo_queue:
            return receive(self, queue_name, *args, **kwargs)
        begin(q)
        try:
            return receive(self, queue_name, *args, **kwargs)
        finally:
            _receive.now = None
            _receive.before = None

    receive_message.lambdaidem_ordered = True
    receive_message.__doc__ = receive.__doc__
    models.unix_time_millis = clock
    queue.pending_message_groups = property(pending_message_groups)
    queue.wait_for_messages = wait_for_messages
    backend.receive_message = receive_message


def main():
    locked_delete()
    fifo_order()
    from moto.server import main as serve

    serve(sys.argv[1:])


if __name__ == "__main__":
    main()
