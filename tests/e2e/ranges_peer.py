#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
"""Byte ranges of a split file (FILE with the range flag, README "Wire
protocol": Ranges) sent by peer.py clients to a real `rdcp --listen`, as
rdcp-mpi's ranks send them, and as a broken or hostile client might: the
file takes its final name only when every range is verified (the last
one's FILE_RESULT has the final flag and the whole file's CRC32); a range
outside the file, not aligned, or a chunk outside its range ends the
session (exit 5); another token, size or overlapping ranges fail the file;
nothing ever lies under the final name that was not verified.

  ranges_peer.py RDCP PORT KEYFILE WORKDIR [SCENARIO...]   (TAP on stdout)
"""
import os
import struct
import subprocess
import sys
import time
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peer  # noqa: E402
from peer import (CSUM_CRC32, FILE_RANGE, RESULT_FINAL, F_RESUME,  # noqa: E402
                  Entry, PeerError, RemoteError, file_digest, range_fields)

C = 65536  # the chunk size


class Fail(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Fail(what)


class Rx:
    """A receiver (rdcp --listen) on its own root."""

    def __init__(self, rdcp, port, key, root):
        self.port, self.key, self.root = port, key, root
        os.makedirs(root, exist_ok=True)
        self.log = open(root + ".log", "w")
        self.p = subprocess.Popen(
            [rdcp, "--listen", "-v", "--transport", "tcp", "--bind", "127.0.0.1",
             "-P", str(port), "--root", root, "--key-file", key,
             "--chunk-size", str(C)], stdout=self.log, stderr=self.log)
        for _ in range(200):
            if "listening" in open(root + ".log").read():
                return
            time.sleep(0.05)
        raise Fail("the receiver did not listen")

    def client(self, flags=0):
        c = peer.Client(self.port, key=peer.load_key(self.key), timeout=10)
        c.connect(chunk=C)
        c.handshake(peer.PUSH, ["d/"], csum=CSUM_CRC32, flags=flags)
        c.expect_ring()
        return c

    def stop(self):
        self.p.terminate()
        self.p.wait(10)
        self.log.close()

    def names(self):
        out = []
        for dp, _, fs in os.walk(self.root):
            out += [os.path.relpath(os.path.join(dp, f), self.root)
                    for f in fs]
        return sorted(out)


def rng(data, off, length, idx, count, token, **kw):
    """An Entry for bytes [off, off + length) of data (its chunks, its
    CRC32 in FILE_END); kw: Entry's file/end/chunks overrides."""
    chunks = [(o, data[o:min(o + C, off + length)])
              for o in range(off, off + length, C)]
    f = dict(flags=FILE_RANGE,
             range=range_fields(off, length, idx, count, token))
    f.update(kw.pop("file", {}))
    end = dict(digest=file_digest(CSUM_CRC32, [d for _, d in chunks]))
    end.update(kw.pop("end", {}))
    return Entry("big", data, file=f, end=end,
                 chunks=kw.pop("chunks", chunks), **kw)


def crc_be(b):
    return struct.pack(">I", zlib.crc32(b))


def send(c, e):
    c.send_entry(e)
    c.pump(lambda: e.file_id in c.results)
    return c.results[e.file_id]


def finish(c):
    c.done()
    c.pump(lambda: c.bye is not None)
    c.close()


def protocol_error(c, entries):
    """The receiver ends the session (an ERROR, or the connection cut)."""
    try:
        for e in entries:
            c.send_entry(e)
        c.pump(lambda: False, timeout=5)
    except (RemoteError, peer.Closed) as ex:
        return str(ex)
    except PeerError as ex:
        if "did not answer" in str(ex):
            raise Fail("the receiver did not end the session")
        return str(ex)
    finally:
        c.close()
    raise Fail("the receiver did not end the session")


DATA = os.urandom(5 * C - 100)
TOK = os.urandom(16)


def s_two_sessions(rx):
    """Two sessions, one range each: the second places the file."""
    c1 = rx.client()
    r = send(c1, rng(DATA, 0, 3 * C, 0, 2, TOK))
    check(r.status == 0 and not r.flags & RESULT_FINAL, "first range: %r" % r)
    check(r.digest == crc_be(DATA[:3 * C]), "first range's digest")
    check("d/big" not in rx.names(), "the file has its name after one range")
    check("d/.big.rdcp-ranges" in rx.names(), "no state file")
    c2 = rx.client()
    r = send(c2, rng(DATA, 3 * C, len(DATA) - 3 * C, 1, 2, TOK))
    check(r.status == 0 and r.flags & RESULT_FINAL, "last range: %r" % r)
    check(r.digest == crc_be(DATA), "final digest is not the file's CRC32")
    finish(c1)
    finish(c2)
    check(open(rx.root + "/d/big", "rb").read() == DATA, "file differs")
    check(rx.names() == ["d/big"], "left: %s" % rx.names())


def s_any_order(rx):
    """Three ranges in one session, out of order, one sent twice."""
    c = rx.client()
    es = [rng(DATA, 2 * C, 2 * C, 1, 3, TOK), rng(DATA, 0, 2 * C, 0, 3, TOK),
          rng(DATA, 0, 2 * C, 0, 3, TOK),
          rng(DATA, 4 * C, len(DATA) - 4 * C, 2, 3, TOK)]
    rs = [send(c, e) for e in es]
    check([r.status for r in rs] == [0, 0, 0, 0], "statuses %r" % rs)
    check([bool(r.flags & RESULT_FINAL) for r in rs] ==
          [False, False, False, True], "final flags %r" % rs)
    finish(c)
    check(open(rx.root + "/d/big", "rb").read() == DATA, "file differs")
    check(rx.names() == ["d/big"], "left: %s" % rx.names())


def s_outside(rx):
    """A range past the end of the file: exit 5, nothing made."""
    e = rng(DATA, 4 * C, 2 * C, 1, 2, TOK)
    why = protocol_error(rx.client(), [e])
    check("d/big" not in rx.names(), "placed")
    return why


def s_unaligned(rx):
    """A range that does not start on a chunk: exit 5."""
    e = rng(DATA, 100, 2 * C, 0, 2, TOK, chunks=[])
    why = protocol_error(rx.client(), [e])
    check("d/big" not in rx.names(), "placed")
    return why


def s_chunk_outside(rx):
    """A chunk beyond its FILE's range: exit 5, nothing placed."""
    e = rng(DATA, 0, 2 * C, 0, 2, TOK,
            chunks=[(0, DATA[:C]), (C, DATA[C:2 * C]),
                    (2 * C, DATA[2 * C:3 * C])])
    why = protocol_error(rx.client(), [e])
    check("d/big" not in rx.names(), "placed")
    return why


def s_tokens(rx):
    """Two tokens for one file at once: the second range fails (ESTALE)."""
    c = rx.client()
    a = rng(DATA, 0, 3 * C, 0, 2, TOK, send_end=False)
    c.send_entry(a)  # its bytes stay locked: no FILE_END yet
    r = send(c, rng(DATA, 3 * C, len(DATA) - 3 * C, 1, 2, os.urandom(16)))
    check(r.status == -116, "another token: status %d, want -ESTALE" % r.status)
    a.send_end = True
    c.send_end(a, 3)
    c.pump(lambda: a.file_id in c.results)
    check(c.results[a.file_id].status == 0, "first range failed")
    finish(c)
    check("d/big" not in rx.names(), "placed with two tokens")


def s_size(rx):
    """The same token with another size: that range fails (ESTALE)."""
    c = rx.client()
    check(send(c, rng(DATA, 0, 3 * C, 0, 2, TOK)).status == 0, "first")
    short = DATA[:-1]
    r = send(c, rng(short, 3 * C, len(short) - 3 * C, 1, 2, TOK))
    check(r.status == -116, "another size: status %d, want -ESTALE" % r.status)
    finish(c)
    check("d/big" not in rx.names(), "placed with two sizes")


def s_overlap(rx):
    """Ranges that overlap (and so leave bytes out): the file fails."""
    c = rx.client()
    data = DATA[:3 * C]
    check(send(c, rng(data, 0, 2 * C, 0, 2, TOK)).status == 0, "first")
    r = send(c, rng(data, C, 2 * C, 1, 2, TOK))
    check(r.status == -74, "overlap: status %d, want -EBADMSG" % r.status)
    finish(c)
    check("d/big" not in rx.names(), "placed from overlapping ranges")
    check(rx.names() == [], "left without --resume: %s" % rx.names())


def s_bad_crc(rx):
    """A range with a bad CRC fails the file, the other range too.

    Nothing is left without --resume."""
    c = rx.client()
    r = send(c, rng(DATA, 0, 3 * C, 0, 2, TOK, end=dict(digest=b"\0" * 4)))
    check(r.status == -74, "bad CRC: status %d" % r.status)
    r = send(c, rng(DATA, 3 * C, len(DATA) - 3 * C, 1, 2, TOK))
    check(r.status and not r.flags & RESULT_FINAL, "the other range placed it")
    finish(c)
    check(rx.names() == [], "left: %s" % rx.names())


def s_resume(rx):
    """--resume of a split: only the missing range is sent.

    A job stopped after one range; the next (another token) with --resume
    gets HAVE SKIP for the verified range."""
    c = rx.client()
    check(send(c, rng(DATA, 0, 3 * C, 0, 2, TOK)).status == 0, "first")
    finish(c)
    tok2 = os.urandom(16)
    c = rx.client(flags=F_RESUME)
    a = rng(DATA, 0, 3 * C, 0, 2, tok2)
    r = send(c, a)
    check(c.haves[a.file_id][0].flags & peer.HAVE_SKIP, "verified range resent")
    check(r.status == 0 and r.flags & peer.RESULT_SKIPPED, "skip: %r" % r)
    b = rng(DATA, 3 * C, len(DATA) - 3 * C, 1, 2, tok2)
    r = send(c, b)
    check(r.status == 0 and r.flags & RESULT_FINAL, "last range: %r" % r)
    check(r.digest == crc_be(DATA), "final digest")
    finish(c)
    check(open(rx.root + "/d/big", "rb").read() == DATA, "file differs")
    check(rx.names() == ["d/big"], "left: %s" % rx.names())


def s_no_clobber(rx):
    """-n: a range of a file that exists is skipped, the file untouched."""
    os.makedirs(rx.root + "/d", exist_ok=True)
    with open(rx.root + "/d/big", "wb") as f:
        f.write(b"old")
    c = rx.client(flags=peer.F_NO_CLOBBER)
    a = rng(DATA, 0, 3 * C, 0, 2, TOK)
    r = send(c, a)
    check(c.haves[a.file_id][0].flags & peer.HAVE_SKIP, "not skipped")
    check(r.status == 0 and r.flags & peer.RESULT_SKIPPED, "result %r" % r)
    finish(c)
    check(open(rx.root + "/d/big", "rb").read() == b"old", "overwritten")
    check(rx.names() == ["d/big"], "left: %s" % rx.names())


SCENARIOS = [s_two_sessions, s_any_order, s_outside, s_unaligned,
             s_chunk_outside, s_tokens, s_size, s_overlap, s_bad_crc,
             s_resume, s_no_clobber]


def main():
    rdcp, port, key, work = sys.argv[1], int(sys.argv[2]), sys.argv[3], \
        sys.argv[4]
    want = sys.argv[5:]
    todo = [s for s in SCENARIOS if not want or s.__name__[2:] in want]
    print("1..%d" % len(todo))
    bad = 0
    for i, s in enumerate(todo, 1):
        rx = Rx(rdcp, port + i, key, os.path.join(work, s.__name__))
        try:
            note = s(rx)
            print("ok %d - %s%s" % (i, s.__doc__.splitlines()[0],
                                    " # %s" % note if note else ""))
        except (Fail, PeerError) as ex:
            bad += 1
            print("not ok %d - %s: %s" % (i, s.__doc__.splitlines()[0], ex))
        finally:
            rx.stop()
        sys.stdout.flush()
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
