"""Every collective on numpy arrays, checked element by element against
numpy-computed results; out of place, in place, allocated outputs, and
nonblocking. Runs at any rank count (mpirun -np 1..4)."""
import time

import numpy as np
import pytest

import weft
from conftest import DTYPES, data, expected_reduce, ops_for, same

COUNTS = [0, 1, 5, 1031]


def _dtype_op_pairs():
    return [(d, op) for d in DTYPES for op in ops_for(d)]


def _id(p):
    return "%s-%s" % (np.dtype(p[0]).name, p[1])


@pytest.mark.parametrize("dt_op", _dtype_op_pairs(), ids=_id)
def test_allreduce(comm, dt_op):
    dt, op = dt_op
    for n in COUNTS:
        exp = expected_reduce(dt, n, comm.size, op)
        src = data(dt, n, comm.rank, op)
        keep = src.copy()
        out = np.full(n, 99, dtype=dt)
        assert comm.allreduce(src, op, out=out) is out
        same(out, exp)
        same(src, keep)  # the input is not written
        assert comm.allreduce(src, op) is src  # in place
        same(src, exp)


def test_allreduce_large_and_shaped(comm):
    n = 1 << 20
    src = data(np.float32, n, comm.rank).reshape(1024, 1024)
    out = comm.allreduce(src, weft.Op.SUM, out=np.empty_like(src))
    same(out, expected_reduce(np.float32, n, comm.size, "sum").reshape(1024, 1024))
    x = data(np.int64, 6, comm.rank).reshape(2, 3)
    same(comm.allreduce(x, "MAX"), expected_reduce(np.int64, 6, comm.size, "max").reshape(2, 3))


@pytest.mark.parametrize("dt", [np.int32, np.float64, np.uint8], ids=lambda d: np.dtype(d).name)
def test_reduce(comm, dt):
    for root in sorted({0, comm.size - 1}):
        for n in COUNTS:
            exp = expected_reduce(dt, n, comm.size, "sum")
            src = data(dt, n, comm.rank)
            keep = src.copy()
            out = np.zeros(n, dtype=dt)
            got = comm.reduce(src, "sum", root, out=out)
            same(src, keep)
            if comm.rank == root:
                assert got is out
                same(out, exp)
            else:
                assert got is None
                same(out, np.zeros(n, dtype=dt))  # nothing written off root
            got = comm.reduce(src, "max", root=root)  # in place on root
            if comm.rank == root:
                same(src, expected_reduce(dt, n, comm.size, "max"))
            else:
                assert got is None
                same(src, keep)


@pytest.mark.parametrize("dt", [np.int8, np.float16, np.uint64], ids=lambda d: np.dtype(d).name)
def test_bcast(comm, dt):
    for root in range(comm.size):
        for n in COUNTS:
            buf = data(dt, n, comm.rank)
            assert comm.bcast(buf, root) is buf
            same(buf, data(dt, n, root))


def test_allgather(comm):
    p = comm.size
    for n in COUNTS:
        mine = data(np.int32, n, comm.rank)
        exp = np.stack([data(np.int32, n, r) for r in range(p)])
        got = comm.allgather(mine)  # allocated, shape (p, n)
        same(got, exp)
        out = np.full(p * n, -1, dtype=np.int32)
        assert comm.allgather(mine, out=out) is out
        same(out, exp.reshape(-1))
        buf = np.full(p * n, -1, dtype=np.int32)
        buf[comm.rank * n:(comm.rank + 1) * n] = mine
        assert comm.allgather(buf, inplace=True) is buf
        same(buf, exp.reshape(-1))


def _irregular(p, salt=0):
    """Per-rank counts with a zero, and displacements with gaps."""
    counts = [(r * 3 + salt) % 5 + (0 if r == 1 else 1) for r in range(p)]
    displs, at = [], 2
    for c in counts:
        displs.append(at)
        at += c + r_gap(len(displs))
    return counts, displs


def r_gap(i):
    return i % 2 + 1


def test_allgatherv(comm):
    p, me = comm.size, comm.rank
    counts, displs = _irregular(p)
    extent = max(d + c for c, d in zip(counts, displs))
    mine = data(np.float32, counts[me], me)
    out = np.full(extent, -7, dtype=np.float32)
    assert comm.allgatherv(mine, counts, displs, out=out) is out
    exp = np.full(extent, -7, dtype=np.float32)
    for r in range(p):
        exp[displs[r]:displs[r] + counts[r]] = data(np.float32, counts[r], r)
    same(out, exp)  # the gaps are untouched
    packed = comm.allgatherv(mine, counts)  # allocated, packed
    same(packed, np.concatenate([data(np.float32, counts[r], r) for r in range(p)]))
    buf = np.full(extent, -7, dtype=np.float32)
    buf[displs[me]:displs[me] + counts[me]] = mine
    comm.allgatherv(buf, counts, displs, inplace=True)
    same(buf, exp)


@pytest.mark.parametrize("dt", [np.int64, np.float32], ids=lambda d: np.dtype(d).name)
def test_reduce_scatter(comm, dt):
    p, me = comm.size, comm.rank
    for n in COUNTS:
        total = n * p
        exp = expected_reduce(dt, total, p, "sum")[me * n:(me + 1) * n]
        src = data(dt, total, me)
        keep = src.copy()
        same(comm.reduce_scatter(src), exp)  # allocated
        same(src, keep)
        out = np.zeros(n, dtype=dt)
        assert comm.reduce_scatter(src, "sum", out=out) is out
        same(out, exp)
        res = comm.reduce_scatter(src, "sum", inplace=True)
        same(res, exp)
        same(src[:n], exp)
    shaped = data(dt, p * 6, me).reshape(p * 2, 3)
    got = comm.reduce_scatter(shaped, "min")
    assert got.shape == (2, 3)
    same(got.reshape(-1), expected_reduce(dt, p * 6, p, "min")[me * 6:(me + 1) * 6])


def test_reduce_scatter_v(comm):
    p, me = comm.size, comm.rank
    counts, _ = _irregular(p, salt=1)
    total = sum(counts)
    start = sum(counts[:me])
    exp = expected_reduce(np.int32, total, p, "bxor")[start:start + counts[me]]
    src = data(np.int32, total, me)
    same(comm.reduce_scatter_v(src, counts, "bxor"), exp)
    out = np.zeros(counts[me], dtype=np.int32)
    assert comm.reduce_scatter_v(src, counts, "bxor", out=out) is out
    same(out, exp)
    same(comm.reduce_scatter_v(src, counts, "bxor", inplace=True), exp)


def _a2a_expect(dt, n, p, me):
    """Rank me receives block me of every rank's data(n * p)."""
    return np.concatenate([data(dt, n * p, r)[me * n:(me + 1) * n] for r in range(p)])


def test_alltoall(comm):
    p, me = comm.size, comm.rank
    for n in COUNTS:
        src = data(np.uint32, n * p, me)
        keep = src.copy()
        out = np.zeros(n * p, dtype=np.uint32)
        assert comm.alltoall(src, out=out) is out
        same(out, _a2a_expect(np.uint32, n, p, me))
        same(src, keep)
        assert comm.alltoall(src) is src  # in place
        same(src, _a2a_expect(np.uint32, n, p, me))


def test_alltoallv(comm):
    p, me = comm.size, comm.rank

    def cnt(src, dst):  # elements src sends to dst
        return (src * 2 + dst * 3) % 4

    sendcounts = [cnt(me, d) for d in range(p)]
    recvcounts = [cnt(s, me) for s in range(p)]
    sdispls = [sum(sendcounts[:d]) + d for d in range(p)]  # a gap of d before block d
    rdispls = [sum(recvcounts[:s]) + 2 * s for s in range(p)]
    src = np.full(sdispls[-1] + sendcounts[-1], -1, dtype=np.int64)
    for d in range(p):
        src[sdispls[d]:sdispls[d] + sendcounts[d]] = 1000 * me + 100 * d + np.arange(sendcounts[d])
    out = np.full(rdispls[-1] + recvcounts[-1], -5, dtype=np.int64)
    comm.alltoallv(src, sendcounts, recvcounts, sdispls, rdispls, out=out)
    exp = np.full_like(out, -5)
    for s in range(p):
        exp[rdispls[s]:rdispls[s] + recvcounts[s]] = 1000 * s + 100 * me + np.arange(recvcounts[s])
    same(out, exp)
    # in place: a symmetric pattern (the same count both ways)
    sym = [(me + d) % 3 + 1 for d in range(p)]
    buf = np.concatenate([1000 * me + 100 * d + np.arange(sym[d]) for d in range(p)])
    assert comm.alltoallv(buf, sym, sym) is buf
    same(buf, np.concatenate([1000 * s + 100 * me + np.arange(sym[s]) for s in range(p)]))


@pytest.mark.parametrize("dt", [np.int8, np.float64], ids=lambda d: np.dtype(d).name)
def test_gather(comm, dt):
    p, me = comm.size, comm.rank
    for root in sorted({0, p - 1}):
        for n in COUNTS:
            mine = data(dt, n, me)
            exp = np.stack([data(dt, n, r) for r in range(p)])
            got = comm.gather(mine, root)
            if me == root:
                same(got, exp)
            else:
                assert got is None
            full = np.zeros(p * n, dtype=dt)
            if me == root:
                full[root * n:(root + 1) * n] = mine
                assert comm.gather(full, root, inplace=True) is full
                same(full, exp.reshape(-1))
            else:
                assert comm.gather(mine, root, inplace=True) is None


@pytest.mark.parametrize("dt", [np.uint8, np.float32], ids=lambda d: np.dtype(d).name)
def test_scatter(comm, dt):
    p, me = comm.size, comm.rank
    for root in sorted({0, p - 1}):
        for n in COUNTS:
            full = data(dt, n * p, root)
            exp = full[me * n:(me + 1) * n]
            out = np.zeros(n, dtype=dt)
            if me == root:
                assert comm.scatter(full, root, out=out) is out
            else:
                assert comm.scatter(None, root, out=out) is out
            same(out, exp)
            if me == root:
                copy = full.copy()
                view = comm.scatter(copy, root, inplace=True)
                same(view, exp)
                same(copy, full)  # root's block stayed, nothing else written
            else:
                out2 = np.zeros(n, dtype=dt)
                comm.scatter(None, root, out=out2, inplace=True)
                same(out2, exp)


def test_barrier_waits_for_every_rank(comm):
    if comm.size == 1:
        comm.barrier()
        comm.ibarrier().wait()
        return
    comm.barrier()
    t0 = time.monotonic()
    if comm.rank == 0:
        time.sleep(0.3)
    comm.barrier()
    if comm.rank != 0:  # could not leave before rank 0 entered
        assert time.monotonic() - t0 >= 0.2
    t0 = time.monotonic()
    if comm.rank == 0:
        time.sleep(0.3)
    req = comm.ibarrier()
    assert req.wait() is None
    if comm.rank != 0:
        assert time.monotonic() - t0 >= 0.2


def test_send_recv(comm):
    p, me = comm.size, comm.rank
    right, left = (me + 1) % p, (me - 1) % p
    for n in [0, 3, 100000]:
        rbuf = np.zeros(n, dtype=np.float64)
        rreq = comm.irecv(rbuf, left, tag=7)
        sreq = comm.isend(data(np.float64, n, me), right, tag=7)
        assert rreq.wait() is rbuf
        sreq.wait()
        same(rbuf, data(np.float64, n, left))
    if p >= 2:
        if me == 0:
            comm.send(np.arange(5, dtype=np.int32), 1, tag=weft.TAG_UB)
        elif me == 1:
            got = comm.recv(np.zeros(5, dtype=np.int32), 0, tag=weft.TAG_UB)
            same(got, np.arange(5, dtype=np.int32))


def test_recv_from_any_source(comm):
    p, me = comm.size, comm.rank
    if me == 0:
        seen = {}
        for _ in range(2 * (p - 1)):
            buf = np.zeros(3, dtype=np.int64)
            req = comm.irecv(buf, weft.ANY_SOURCE, tag=9)
            req.wait()
            assert req.source == buf[0], "Request.source is not the sender"
            seen.setdefault(req.source, []).append(int(buf[1]))
        assert seen == {q: [0, 1] for q in range(1, p)}
        # the blocking form takes it too; a send's request has no source
        if p >= 2:
            got = comm.recv(np.zeros(1, dtype=np.int32), weft.ANY_SOURCE, tag=10)
            assert got[0] == p - 1
        sreq = comm.isend(np.zeros(1), 0, tag=11)
        comm.recv(np.zeros(1), 0, tag=11)
        sreq.wait()
        assert sreq.source is None
    else:
        for m in range(2):
            comm.send(np.array([me, m, 0], dtype=np.int64), 0, tag=9)
        if me == p - 1:
            comm.send(np.array([p - 1], dtype=np.int32), 0, tag=10)
    with pytest.raises(ValueError):
        comm.send(np.zeros(1), weft.ANY_SOURCE)
    with pytest.raises(ValueError):
        comm.recv(np.zeros(1), -2)
    comm.barrier()


def test_reproducible_switch(comm):
    p, me = comm.size, comm.rank
    rng = np.random.default_rng(17)
    x = (rng.standard_normal((p, 4099)) * 10.0 ** rng.integers(-3, 4, (p, 4099))).astype(np.float32)
    d = comm.dup()
    d.set_reproducible(True)
    got = d.allreduce(x[me].copy())
    want = x[0].copy()
    for q in range(1, p):  # the rank-order fold (one reduction of up to 8 inputs)
        want = (want + x[q]).astype(np.float32)
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))
    with pytest.raises(ValueError):
        d.set_reproducible(2)
    d.set_reproducible(False)
    same(d.allreduce(np.ones(5, np.int64)), np.full(5, p, np.int64))
    d.destroy()


def test_nonblocking_many_outstanding(comm):
    p, me = comm.size, comm.rank
    reqs, expect = [], []
    for k, (dt, op) in enumerate([(np.int32, "sum"), (np.float32, "max"), (np.int64, "bxor"),
                                  (np.float64, "min"), (np.uint8, "bor")]):
        n = 1000 + 17 * k
        reqs.append(comm.iallreduce(data(dt, n, me, op, salt=k), op))  # temporary input
        expect.append(expected_reduce(dt, n, p, op, salt=k))
    reqs.append(comm.iallgather(data(np.int32, 10, me)))
    expect.append(np.stack([data(np.int32, 10, r) for r in range(p)]))
    reqs.append(comm.ibcast(data(np.int8, 33, me), root=p - 1))
    expect.append(data(np.int8, 33, p - 1))
    reqs.append(comm.ireduce_scatter(data(np.int64, 4 * p, me), "sum"))
    expect.append(expected_reduce(np.int64, 4 * p, p, "sum")[me * 4:(me + 1) * 4])
    reqs.append(comm.ialltoall(data(np.uint32, 3 * p, me), out=np.zeros(3 * p, np.uint32)))
    expect.append(_a2a_expect(np.uint32, 3, p, me))
    r = comm.ireduce(data(np.float16, 9, me), "sum", root=0, out=np.zeros(9, np.float16))
    reqs.append(r)
    expect.append(expected_reduce(np.float16, 9, p, "sum") if me == 0 else None)
    r = comm.igather(data(np.uint64, 4, me), root=0)
    reqs.append(r)
    expect.append(np.stack([data(np.uint64, 4, q) for q in range(p)]) if me == 0 else None)
    out = np.zeros(5, np.int32)
    reqs.append(comm.iscatter(data(np.int32, 5 * p, 0) if me == 0 else None, 0, out=out))
    expect.append(data(np.int32, 5 * p, 0)[me * 5:(me + 1) * 5])
    counts = [r + 1 for r in range(p)]
    reqs.append(comm.iallgatherv(data(np.float32, me + 1, me), counts))
    expect.append(np.concatenate([data(np.float32, q + 1, q) for q in range(p)]))
    reqs.append(comm.ireduce_scatter_v(data(np.int32, sum(counts), me), counts, "max"))
    expect.append(expected_reduce(np.int32, sum(counts), p, "max")[
        sum(counts[:me]):sum(counts[:me + 1])])
    ones = [2] * p
    reqs.append(comm.ialltoallv(data(np.int8, 2 * p, me), ones, ones))
    expect.append(_a2a_expect(np.int8, 2, p, me))
    # complete in reverse order; test() polls one to completion first
    deadline = time.monotonic() + 60
    while not reqs[0].test():
        assert time.monotonic() < deadline
    assert reqs[0].done and reqs[0].test()
    for req, exp in reversed(list(zip(reqs, expect))):
        got = req.wait()
        if exp is None:
            assert got is None
        else:
            same(got, exp)
        assert req.done
    same(reqs[0].wait(), expect[0])  # waiting again returns the result again
    for got, exp in zip(weft.waitall(reqs[1:3]), expect[1:3]):
        same(got, exp)


def test_request_keeps_buffers_alive(comm):
    p, me = comm.size, comm.rank
    req = comm.iallreduce(np.full(200000, me + 1, dtype=np.int64))  # no other reference
    for _ in range(3):
        np.full(200000, -1, dtype=np.int64)  # would reuse freed memory
    same(req.wait(), np.full(200000, p * (p + 1) // 2, dtype=np.int64))


def test_freed_unfinished_request_completes_on_its_own(comm):
    p, me = comm.size, comm.rank
    buf = np.full(1000, me + 1, dtype=np.int32)
    req = comm.iallreduce(buf)
    req.free()  # weft_request_free: the operation finishes on its own
    assert req.done
    with pytest.raises(weft.Error, match="freed") as e:
        req.wait()
    assert e.value.status == weft.Status.ERR_INVALID_ARG
    # the next operation of the communicator completes the freed one first
    nxt = comm.allreduce(np.full(10, 2 * me, dtype=np.int32))
    same(nxt, np.full(10, p * (p - 1), dtype=np.int32))
    comm.barrier()
    same(buf, np.full(1000, p * (p + 1) // 2, dtype=np.int32))
    req = comm.iallreduce(np.ones(10, np.int32))
    del req  # the same through the destructor
    same(comm.allreduce(np.ones(3, np.int32)), np.full(3, p, np.int32))


def test_split_and_dup(comm):
    p, me = comm.size, comm.rank
    color = me % 2
    members = [r for r in range(p) if r % 2 == color]
    sub = comm.split(color, key=-me)  # reversed order inside each half
    assert sub.size == len(members)
    assert sub.rank == sorted(members, reverse=True).index(me)
    x = sub.allreduce(np.array([me, 1], dtype=np.int64))
    same(x, np.array([sum(members), len(members)], dtype=np.int64))
    g = sub.allgather(np.array([me], dtype=np.int32))
    same(g.reshape(-1), np.array(sorted(members, reverse=True), dtype=np.int32))
    rest = comm.split(-1 if me == 0 else 0)  # a negative color joins none
    if me == 0:
        assert rest is None
    else:
        assert (rest.size, rest.rank) == (p - 1, me - 1)
        same(rest.allreduce(np.ones(2, np.int32)), np.full(2, p - 1, np.int32))
        rest.destroy()
    d = comm.dup()
    assert (d.rank, d.size) == (me, p)
    # operations on the parent and its duplicate do not match each other
    r1 = comm.iallreduce(np.full(4, me, dtype=np.int32), "max")
    r2 = d.iallreduce(np.full(4, me, dtype=np.int32), "min")
    same(r2.wait(), np.zeros(4, dtype=np.int32))
    same(r1.wait(), np.full(4, p - 1, dtype=np.int32))
    with d:
        pass
    assert d.destroyed
    with pytest.raises(weft.Error) as e:
        d.allreduce(np.zeros(1, np.int32))
    assert e.value.status == weft.Status.ERR_INVALID_ARG
    sub.destroy()
    sub.destroy()  # idempotent


def test_split_of_split_and_destroy_order(comm):
    a = comm.dup()
    b = a.split(0)
    a.destroy()  # the parent first: b keeps working
    same(b.allreduce(np.ones(3, np.int32)), np.full(3, comm.size, np.int32))
    b.destroy()


def test_second_world_communicator(comm):
    """weft_comm_world again: a new communicator of the same ranks."""
    with weft.Comm.world() as again:
        assert (again.rank, again.size) == (comm.rank, comm.size)
        r = comm.iallreduce(np.full(5, comm.rank, np.int64))
        same(again.allreduce(np.ones(5, np.int64)), np.full(5, comm.size, np.int64))
        same(r.wait(), np.full(5, comm.size * (comm.size - 1) // 2, np.int64))


def test_abort(comm):
    """weft_comm_abort: later operations of that communicator (and only
    that one) fail with ERR_ABORTED at once."""
    d = comm.dup()
    d.abort()
    x = np.ones(4, np.int32)
    with pytest.raises(weft.Error) as e:
        d.allreduce(x)
    assert e.value.status == weft.Status.ERR_ABORTED
    same(x, np.ones(4, np.int32))
    d.destroy()
    same(comm.allreduce(x), np.full(4, comm.size, np.int32))


def test_released_communicator_keeps_a_live_ones_messages():
    """Releasing a communicator drops the messages nobody will receive: its
    own and those of communicators released before it, but not those of a
    live communicator that took a released one's id (each weft_comm_world
    takes the same id). Rank 1 sends on a new world, then on its dup, and
    rank 0 receives the second first: the first has arrived, unexpected,
    when rank 0 destroys the dup; rank 0 then still receives it."""
    w = weft.Comm.world()
    w.destroy()  # a released world: its id is in the lists
    if w.size < 2:
        pytest.skip("needs two ranks")
    w = weft.Comm.world()
    d = w.dup()
    x = np.arange(4, dtype=np.int32) + 7
    if w.rank == 1:
        w.send(x, 0, tag=5)
        d.send(x, 0, tag=6)
    elif w.rank == 0:
        same(d.recv(np.zeros(4, np.int32), 1, tag=6), x)
    d.barrier()
    d.destroy()
    if w.rank == 0:
        got = np.zeros(4, np.int32)
        req = w.irecv(got, 1, tag=5)
        deadline = time.monotonic() + 10
        while not req.test():
            assert time.monotonic() < deadline, "rank 1's message was dropped"
            time.sleep(0.001)
        same(got, x)
    same(w.allreduce(np.ones(2, np.int32)), np.full(2, w.size, np.int32))
    w.destroy()


def test_two_worlds_keep_their_messages_apart(comm):
    """Each weft_comm_world is a new communicator: two at once (and the
    fixture's) take different ids, so the same tag from the same rank on
    each reaches only its own communicator's receive."""
    if comm.size < 2:
        pytest.skip("needs two ranks")
    w1, w2 = weft.Comm.world(), weft.Comm.world()
    one, two = np.full(2, 1, np.int32), np.full(2, 2, np.int32)
    if w1.rank == 1:
        w2.send(two, 0, tag=5)
        comm.send(two + 1, 0, tag=5)
        w1.send(one, 0, tag=5)
    elif w1.rank == 0:
        same(w1.recv(np.zeros(2, np.int32), 1, tag=5), one)
        same(comm.recv(np.zeros(2, np.int32), 1, tag=5), two + 1)
        same(w2.recv(np.zeros(2, np.int32), 1, tag=5), two)
    same(w1.allreduce(np.ones(1, np.int32)), np.full(1, w1.size, np.int32))
    same(w2.allreduce(np.full(1, 3, np.int32)), np.full(1, 3 * w2.size, np.int32))
    w1.destroy()
    w2.destroy()
