# What the ledger declares for others: the packed acks' format, in C.  A bolt's acks
# travel to an acker as (root, value) pairs of two unsigned 64-bit integers,
# little-endian, back to back (squall.acker.ledger.PACKED_ACK, the pure twins' format).
# Written by the bolts' AckTable (squall/worker/executors/typed_core.pyx), read by the ledger.
from libc.stdint cimport uint64_t


cdef enum:
    PAIR_BYTES = 16  # a pair: root, then value


cdef inline void put_le64(char* p, uint64_t v) noexcept:
    cdef int k
    for k in range(8):
        p[k] = <char>((v >> (8 * k)) & 0xff)


cdef inline uint64_t get_le64(const unsigned char* p) noexcept:
    cdef uint64_t v = 0
    cdef int k
    for k in range(8):
        v |= (<uint64_t>p[k]) << (8 * k)
    return v
