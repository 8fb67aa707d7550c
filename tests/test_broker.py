"""The embedded broker (a folder) when several processes start and bind at once."""

from __future__ import annotations

import multiprocessing
from pathlib import Path
from queue import Empty

import pytest
from kombu import Connection

from securebench_site import broker  # noqa: F401 - registers the transport under test

EXCHANGE = "celery.pidbox"


def _channel(folder: Path) -> object:
    connection = Connection(
        "filesystem://",
        transport_options={
            "data_folder_in": str(folder / "queue"),
            "data_folder_out": str(folder / "queue"),
            "processed_folder": str(folder / "processed"),
            "control_folder": str(folder / "control"),
        },
    )
    (folder / "queue").mkdir(exist_ok=True)
    return connection.default_channel


def _bind_one(folder: str, queue: str) -> None:
    _channel(Path(folder))._queue_bind(EXCHANGE, "", "", queue)


def test_a_binder_that_finds_the_table_file_just_created_and_still_empty_binds(tmp_path):
    channel = _channel(tmp_path)
    control = tmp_path / "control"
    control.mkdir()
    # Another process created the file and has not written its table yet.
    (control / f"{EXCHANGE}.exchange").write_bytes(b"")

    channel._queue_bind(EXCHANGE, "", "", "worker-1.pidbox")

    assert [row.queue for row in channel.get_table(EXCHANGE)] == ["worker-1.pidbox"]


def test_binders_starting_together_all_end_up_in_the_table(tmp_path):
    queues = [f"worker-{index}.pidbox" for index in range(12)]
    context = multiprocessing.get_context("fork")
    binders = [context.Process(target=_bind_one, args=(str(tmp_path), queue)) for queue in queues]
    for binder in binders:
        binder.start()
    for binder in binders:
        binder.join(timeout=60)

    assert [binder.exitcode for binder in binders] == [0] * len(binders)
    bound = {row.queue for row in _channel(tmp_path).get_table(EXCHANGE)}
    assert bound == set(queues)


def test_binding_the_same_queue_twice_keeps_one_row(tmp_path):
    channel = _channel(tmp_path)
    channel._queue_bind(EXCHANGE, "key", "", "worker.pidbox")
    channel._queue_bind(EXCHANGE, "key", "", "worker.pidbox")

    assert len(channel.get_table(EXCHANGE)) == 1


def test_each_message_put_is_read_once(tmp_path):
    channel = _channel(tmp_path)
    for index in range(5):
        channel._put("jobs", {"index": index})

    received = sorted(channel._get("jobs")["index"] for _ in range(5))

    assert received == list(range(5))
    with pytest.raises(Empty):
        channel._get("jobs")


def test_deleting_a_queue_takes_only_its_row_out_of_the_table(tmp_path):
    channel = _channel(tmp_path)
    channel._queue_bind(EXCHANGE, "", "", "worker-1.pidbox")
    channel._queue_bind(EXCHANGE, "", "", "worker-2.pidbox")

    channel._delete("worker-1.pidbox", EXCHANGE, "", "")

    assert [row.queue for row in channel.get_table(EXCHANGE)] == ["worker-2.pidbox"]


def test_a_delete_that_meets_a_table_file_not_written_yet_leaves_it_to_its_binder(tmp_path):
    channel = _channel(tmp_path)
    control = tmp_path / "control"
    control.mkdir()
    (control / f"{EXCHANGE}.exchange").write_bytes(b"")

    channel._delete("worker-1.pidbox", EXCHANGE, "", "")
    channel._queue_bind(EXCHANGE, "", "", "worker-2.pidbox")

    assert [row.queue for row in channel.get_table(EXCHANGE)] == ["worker-2.pidbox"]
