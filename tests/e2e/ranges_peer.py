#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
"""Byte ranges of a split file (FILE with the range flag, doc/PROTOCOL.md:
Ranges) sent by peer.py clients to a real `rdcp --listen`, as
rdcp-mpi's ranks send them, and as a broken or hostile client might: the
file takes its final name only when every range is verified (the last
one's FILE_RESULT has the final flag and the whole file's CRC32); a range
outside the file, not aligned, or a chunk outside its range ends the
session (exit 5); another token, size or overlapping ranges fail the file;
nothing ever lies under the final name that was not verified.

  ranges_peer.py RDCP PORT KEYFILE WORKDIR [SCENARIO...]   (TAP on stdout)
"""
import fcntl
import os
import struct
import subprocess
import sys
import time
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peer  # noqa: E402
from peer import (CSUM_CRC32, FILE_RANGE, FILE_SPARSE, RESULT_FINAL,  # noqa: E402
                  F_RESUME, Entry, PeerError, RemoteError, file_digest,
                  range_fields)

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


def state(path, tok, size, recs):
    """A .NAME.rdcp-ranges state as an earlier job left it (mtime 0, as
    rng() sends): recs of (offset, length, state, CRC32)."""
    with open(path, "wb") as f:
        f.write(b"RDCPRNG1" + tok + struct.pack(">QqII", size, 0, 0, len(recs))
                + b"".join(struct.pack(">QQB3xI", *r) for r in recs))


def halves(data):
    return [(0, 3 * C, 1, zlib.crc32(data[:3 * C])),
            (3 * C, len(data) - 3 * C, 1, zlib.crc32(data[3 * C:]))]


def announce(c, e):
    """FILE for e, not waiting for its HAVE (the receiver may be stuck)."""
    e.file_id = c.next_id
    c.next_id += 1
    f = dict(file_id=e.file_id, kind=e.kind, size=len(e.data), mode=e.mode,
             mtime=e.mtime, atime=e.atime, path=e.path, link=e.link)
    f.update(e.file)
    c.conn.send(peer.Msg(peer.FILE, **f))


def both_at_once(rx, st, flags, start):
    """Ranges 0 and 1 of DATA under a new token, from two sessions (HELLO
    flags) started with start(client, entry) while the state file st is
    locked here, so both wait for it and then race; their FILE_RESULTs."""
    tok = os.urandom(16)
    lk = open(st, "r+b")
    fcntl.lockf(lk, fcntl.LOCK_EX)
    c1, c2 = rx.client(flags=flags), rx.client(flags=flags)
    a = rng(DATA, 0, 3 * C, 0, 2, tok)
    b = rng(DATA, 3 * C, len(DATA) - 3 * C, 1, 2, tok)
    start(c1, a)
    start(c2, b)
    time.sleep(0.3)
    fcntl.lockf(lk, fcntl.LOCK_UN)
    lk.close()
    c1.pump(lambda: a.file_id in c1.results)
    c2.pump(lambda: b.file_id in c2.results)
    finish(c1)
    finish(c2)
    return c1.results[a.file_id], c2.results[b.file_id]


def s_fresh_tmp(rx):
    """--resume with a verified range whose temporary is gone: sent again.

    An earlier job's state says range 0 is verified, but its temporary
    was placed (a whole-file copy) or removed: the bytes it recorded are
    not in the new temporary, so nothing is skipped and the file is
    whole."""
    os.makedirs(rx.root + "/d")
    state(rx.root + "/d/.big.rdcp-ranges", os.urandom(16), len(DATA),
          halves(DATA)[:1] + [(3 * C, len(DATA) - 3 * C, 0, 0)])
    tok = os.urandom(16)
    c = rx.client(flags=F_RESUME)
    a = rng(DATA, 0, 3 * C, 0, 2, tok)
    r = send(c, a)
    check(not c.haves[a.file_id][0].flags & peer.HAVE_SKIP,
          "a range of a temporary that is gone was skipped")
    check(r.status == 0, "first range: %r" % r)
    r = send(c, rng(DATA, 3 * C, len(DATA) - 3 * C, 1, 2, tok))
    check(r.status == 0 and r.flags & RESULT_FINAL, "last range: %r" % r)
    finish(c)
    check(open(rx.root + "/d/big", "rb").read() == DATA,
          "placed with bytes that were never sent")


def s_stale_holes(rx):
    """A stale temporary and no state: a sparse split's holes are zeros.

    An interrupted whole-file copy left .big.rdcp-part full of other
    bytes; the ranges' CRCs count their holes as zeros, so the temporary
    must be emptied first."""
    os.makedirs(rx.root + "/d")
    with open(rx.root + "/d/.big.rdcp-part", "wb") as f:
        f.write(os.urandom(len(DATA)))
    tok = os.urandom(16)
    data = DATA[:C] + bytes(len(DATA) - C)  # one chunk of data, then a hole
    sparse = FILE_RANGE | FILE_SPARSE
    a = rng(data, 0, 3 * C, 0, 2, tok, chunks=[(0, data[:C])],
            file=dict(flags=sparse), end=dict(nchunks=1))
    b = rng(data, 3 * C, len(data) - 3 * C, 1, 2, tok, chunks=[],
            file=dict(flags=sparse), end=dict(nchunks=0))
    a.end["digest"] = crc_be(data[:3 * C])
    b.end["digest"] = crc_be(data[3 * C:])
    c = rx.client()
    r0, r1 = send(c, a), send(c, b)
    finish(c)
    check(r0.status == 0 and r1.status == 0 and r1.flags & RESULT_FINAL,
          "results %r %r" % (r0, r1))
    check(open(rx.root + "/d/big", "rb").read() == data,
          "placed with the stale temporary's bytes in its holes")


def s_double_final(rx):
    """Every range verified, none placed; two --resume ranges at once.

    A crash between the last record and the rename leaves this. Both
    ranges are skipped as verified; one places the file (final, with the
    file's CRC32), the other is done with nothing to place."""
    os.makedirs(rx.root + "/d")
    with open(rx.root + "/d/.big.rdcp-part", "wb") as f:
        f.write(DATA)
    st = rx.root + "/d/.big.rdcp-ranges"
    state(st, os.urandom(16), len(DATA), halves(DATA))
    r0, r1 = both_at_once(rx, st, F_RESUME, announce)
    check(r0.status == 0 and r1.status == 0,
          "a range of a file placed failed: %r %r" % (r0, r1))
    finals = [r for r in (r0, r1) if r.flags & RESULT_FINAL]
    check(len(finals) == 1, "final flags: %r %r" % (r0, r1))
    check(finals[0].digest == crc_be(DATA), "final digest")
    check(open(rx.root + "/d/big", "rb").read() == DATA, "file differs")
    check(rx.names() == ["d/big"], "left: %s" % rx.names())


def s_two_open(rx):
    """Two ranges of a new job open at once over an earlier job's leftovers.

    Neither is taken for the earlier job still writing: both are
    verified and the file is placed."""
    os.makedirs(rx.root + "/d")
    with open(rx.root + "/d/.big.rdcp-part", "wb") as f:
        f.write(os.urandom(len(DATA)))
    st = rx.root + "/d/.big.rdcp-ranges"
    state(st, os.urandom(16), len(DATA), [(0, 0, 0, 0), (0, 0, 0, 0)])
    r0, r1 = both_at_once(rx, st, 0, lambda c, e: c.send_entry(e))
    check(r0.status == 0 and r1.status == 0,
          "statuses %d %d (-116: taken for another job)" %
          (r0.status, r1.status))
    check(open(rx.root + "/d/big", "rb").read() == DATA, "file differs")
    check(rx.names() == ["d/big"], "left: %s" % rx.names())


def s_pull_range(rx):
    """A range sent to a pull's client: exit 5, with -n and --dry-run too.

    Ranges are rdcp-mpi's pushes; -n and --dry-run answer a FILE before
    the range is looked at, so they are refused first."""
    notes = []
    for i, flag in enumerate(["-n", "--dry-run", "--update"]):
        dest = os.path.join(rx.root, "pull%d" % i)
        os.makedirs(dest)
        with open(dest + "/big", "wb") as f:
            f.write(b"old")
        port = rx.port + 100 + i
        srv = peer.Server(port, key=peer.load_key(rx.key), timeout=10.0)
        cl = subprocess.Popen(
            [sys.argv[1], "--transport", "tcp", "--key-file", rx.key,
             "--port", str(port), flag, "--timeout", "10",
             "127.0.0.1::big", dest + "/big"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            srv.accept()
            srv.handshake()
            srv.expect_ring()
            e = Entry("big", os.urandom(4 * srv.chunk), file=dict(
                flags=FILE_RANGE, range=range_fields(
                    2 * srv.chunk, 2 * srv.chunk, 1, 2, os.urandom(16))))
            srv.send_file(e)
            srv.pump(lambda: False, timeout=5)
        except (RemoteError, peer.Closed, PeerError):
            pass
        finally:
            srv.close()
        try:
            _, err = cl.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            cl.kill()
            cl.communicate()
            raise Fail("%s: the client did not end in 20 s" % flag)
        check(cl.returncode == 5, "%s: client exit %d, want 5: %s" %
              (flag, cl.returncode, err.decode()[-200:]))
        with open(dest + "/big", "rb") as f:
            check(f.read() == b"old", "%s: the file changed" % flag)
        said = [ln for ln in err.decode().splitlines() if "byte range" in ln]
        check(said, "%s: no word of the range: %s" % (flag, err.decode()))
        notes.append(said[0][:90])
    return notes[0]


SCENARIOS = [s_two_sessions, s_any_order, s_outside, s_unaligned,
             s_chunk_outside, s_tokens, s_size, s_overlap, s_bad_crc,
             s_resume, s_no_clobber, s_fresh_tmp, s_stale_holes,
             s_double_final, s_two_open, s_pull_range]


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
