"""librdkafka's mock cluster as a second Kafka implementation for the tests (FIELD-NOTES: "A second
Kafka implementation"). Run as a process, ``python -m tests.helpers.mock_kafka [BROKERS]``: it prints
its bootstrap address on the first line, then reads commands on stdin, one per line:
``topic NAME PARTITIONS`` creates a topic (its CreateTopics answer breaks aiokafka's admin client, so
topics are made here) and answers ``ok NAME`` or ``error NAME CODE``. It ends when stdin closes."""

from __future__ import annotations

import ctypes
import glob
import os
import sys


def _lib() -> ctypes.CDLL:
    import confluent_kafka

    here = os.path.dirname(confluent_kafka.__file__)
    path = sorted(glob.glob(os.path.join(here, "..", "confluent_kafka.libs", "librdkafka*.so*")))[0]
    lib = ctypes.CDLL(path)
    lib.rd_kafka_conf_new.restype = ctypes.c_void_p
    lib.rd_kafka_new.restype = ctypes.c_void_p
    lib.rd_kafka_new.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t]
    lib.rd_kafka_mock_cluster_new.restype = ctypes.c_void_p
    lib.rd_kafka_mock_cluster_new.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.rd_kafka_mock_cluster_bootstraps.restype = ctypes.c_char_p
    lib.rd_kafka_mock_cluster_bootstraps.argtypes = [ctypes.c_void_p]
    lib.rd_kafka_mock_topic_create.restype = ctypes.c_int
    lib.rd_kafka_mock_topic_create.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_int]
    return lib


def main(brokers: int = 1) -> None:
    lib = _lib()
    err = ctypes.create_string_buffer(512)
    rk = lib.rd_kafka_new(0, lib.rd_kafka_conf_new(), err, 512)  # a producer handle owning the cluster
    if not rk:
        raise SystemExit(f"rd_kafka_new: {err.value.decode()}")
    mc = lib.rd_kafka_mock_cluster_new(rk, brokers)
    print(lib.rd_kafka_mock_cluster_bootstraps(mc).decode(), flush=True)
    for line in sys.stdin:
        parts = line.split()
        if len(parts) == 3 and parts[0] == "topic":
            code = lib.rd_kafka_mock_topic_create(mc, parts[1].encode(), int(parts[2]), 1)
            print(f"ok {parts[1]}" if code == 0 else f"error {parts[1]} {code}", flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 1)
