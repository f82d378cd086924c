"""Helpers for the store-core tests (real files in tmp dirs, no mocks)."""

from __future__ import annotations

from rocketq.store import FlushDiskType, MessageStore, MessageToStore, StoreConfig

HOST = ("127.0.0.1", 10911)


def config(root, **kw) -> StoreConfig:
    base = dict(
        store_path_root_dir=str(root),
        mapped_file_size_commitlog=64 * 1024,
        mapped_file_size_consume_queue=20 * 100,
        max_message_size=16 * 1024,
        flush_disk_type=FlushDiskType.ASYNC_FLUSH,
        max_hash_slot_num=1024,
        max_index_num=4096,
        # the disk is shared with other machines' work: its fill level must not make puts fail here
        disk_space_warning_level_ratio=100,
        disk_space_clean_forcibly_ratio=100,
    )
    base.update(kw)
    return StoreConfig(**base)


def open_store(root, **kw) -> MessageStore:
    s = MessageStore(config(root, **kw), HOST)
    s.start()
    return s


def msg(topic="T", queue_id=0, body=b"body", tags=None, keys=None, **kw) -> MessageToStore:
    props = dict(kw.pop("properties", {}))
    if tags is not None:
        props["TAGS"] = tags
    if keys is not None:
        props["KEYS"] = keys
    return MessageToStore(topic=topic, queue_id=queue_id, body=body, properties=props, **kw)


class Tags:
    """MessageFilter matching a set of tag hash codes (what the broker's subscription filter does)."""

    def __init__(self, *tags: str) -> None:
        from rocketq.store.dispatch import tag_hash_code

        self.codes = {tag_hash_code(t) for t in tags}

    def is_matched_by_consume_queue(self, tags_code):
        return tags_code in self.codes

    def is_matched_by_commit_log(self, record):
        return True
