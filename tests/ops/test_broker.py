"""The embedded filesystem broker: a message is seen whole or not at all (kombu issue #1551)."""

import sys
from queue import Empty

import kombu
import pytest
from django.conf import settings

from kernelindex.broker import Transport


@pytest.fixture
def channel(tmp_path):
    folder = tmp_path / "broker"
    folder.mkdir()
    options = {"data_folder_in": str(folder), "data_folder_out": str(folder), "processed_folder": str(folder)}
    with kombu.Connection(
        "filesystem://localhost/", transport=Transport, transport_options=options
    ) as connection:
        yield connection.default_channel


class TestFilesystemBroker:
    def test_a_message_being_written_is_not_visible_to_a_reader(self, channel, monkeypatch):
        # A reader polls at the worst moment: while the writer encodes the message, after its
        # file was opened. kombu's own _put has the file under the queue's name by then, empty.
        module = sys.modules[type(channel)._put.__module__]
        encode, seen_while_writing = module.dumps, []

        def read_then_encode(payload):
            try:
                seen_while_writing.append(channel._get("jobs"))
            except Empty:
                seen_while_writing.append(None)
            return encode(payload)

        monkeypatch.setattr(module, "dumps", read_then_encode)
        channel._put("jobs", {"body": "x" * 1000})

        assert seen_while_writing == [None]
        assert channel._get("jobs") == {"body": "x" * 1000}
        with pytest.raises(Empty):
            channel._get("jobs")

    def test_a_failed_write_leaves_no_file(self, channel, monkeypatch, tmp_path):
        def refuse(partial, final):
            raise OSError(28, "No space left on device")

        monkeypatch.setattr("kernelindex.broker.os.replace", refuse)
        with pytest.raises(kombu.exceptions.ChannelError, match="Cannot add file"):
            channel._put("jobs", {"body": "x"})

        assert list((tmp_path / "broker").iterdir()) == []

    def test_the_embedded_broker_uses_this_transport(self):
        from kernelindex.celery import app

        if not settings.CELERY_BROKER_URL.startswith("filesystem://"):
            pytest.skip("runs where the broker is the embedded filesystem one")
        with app.connection_for_write() as connection:
            assert isinstance(connection.transport, Transport)
