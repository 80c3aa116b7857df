"""kombu's filesystem transport, with a message that appears whole or not at all.

kombu 5.7's `Channel._put` creates `<time>_<uuid>.<queue>.msg` and only then locks and writes
it, while `_get` lists the folder, moves the file and reads it without a lock: a worker that
polls between the two reads an empty file, fails with "Unrecoverable error: JSONDecodeError"
and stops, and the message is gone (kombu issue #1551). Here the message is written under a
name that no queue matches and renamed into place, which is atomic within one folder.

`settings.CELERY_BROKER_TRANSPORT` names this transport whenever the broker URL is
`filesystem://` (the embedded default: development, the test suite and the GPU sweep).
"""

import os
import uuid
from time import monotonic

from kombu.exceptions import ChannelError
from kombu.transport import filesystem
from kombu.utils.encoding import str_to_bytes
from kombu.utils.json import dumps

# `_get` takes a file only when the text after its name's first "." is "<queue>.msg".
PARTIAL_SUFFIX = ".partial"


class Channel(filesystem.Channel):
    def _put(self, queue, payload, **kwargs):
        """Put `payload` onto `queue`: written in full under a partial name, then renamed."""
        name = f"{int(round(monotonic() * 1000))}_{uuid.uuid4()}.{queue}.msg"
        final = os.path.join(self.data_folder_out, name)
        partial = final + PARTIAL_SUFFIX
        try:
            with open(partial, "wb") as f:
                f.write(str_to_bytes(dumps(payload)))
            os.replace(partial, final)
        except OSError as exc:
            try:
                os.remove(partial)
            except OSError:
                pass
            raise ChannelError(f"Cannot add file {final!r} to directory") from exc


class Transport(filesystem.Transport):
    Channel = Channel
