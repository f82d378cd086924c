"""MessageSysFlag bits (RocketMQ 4.x record field 8, also the SYSFLAG of send/pull headers)."""

from __future__ import annotations

COMPRESSED_FLAG = 0x1
MULTI_TAGS_FLAG = 0x2
TRANSACTION_NOT_TYPE = 0x0
TRANSACTION_PREPARED_TYPE = 0x4
TRANSACTION_COMMIT_TYPE = 0x8
TRANSACTION_ROLLBACK_TYPE = 0xC
TRANSACTION_TYPE_MASK = 0xC
BORNHOST_V6_FLAG = 0x10
STOREHOST_ADDRESS_V6_FLAG = 0x20
NEED_UNWRAP_FLAG = 0x40
INNER_BATCH_FLAG = 0x80

# Compression algorithm in bits 8..10; 0 means zlib for bodies written before the field existed.
COMPRESSION_TYPE_MASK = 0x700
COMPRESSION_LZ4 = 1 << 8
COMPRESSION_ZSTD = 2 << 8
COMPRESSION_ZLIB = 3 << 8


def transaction_type(sys_flag: int) -> int:
    return sys_flag & TRANSACTION_TYPE_MASK


def reset_transaction_value(sys_flag: int, tran_type: int) -> int:
    return (sys_flag & ~TRANSACTION_TYPE_MASK) | tran_type


def compression_type(sys_flag: int) -> int:
    """COMPRESSION_* constant of a compressed body (0 is read as zlib)."""
    ctype = sys_flag & COMPRESSION_TYPE_MASK
    return ctype or COMPRESSION_ZLIB
