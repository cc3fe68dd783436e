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

The fix is to take the same lock in DeleteMessage. Everything else is
moto's own server, with the arguments given to this script:

    python3 localstack/moto_sqs.py -H 127.0.0.1 -p 4566
"""

import inspect
import sys

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


def main():
    locked_delete()
    from moto.server import main as serve

    serve(sys.argv[1:])


if __name__ == "__main__":
    main()
