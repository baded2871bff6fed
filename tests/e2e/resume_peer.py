#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#
# A malicious rdcp server for --resume (issue #16 items 11 and 13), on
# peer.py: it listens on 127.0.0.1:PORT, starts a real `rdcp --resume`
# client that pulls NAME from it into DEST (over TCP, --no-auth), and
# then, as the data source, tries to read the client's files through the
# resume answers, or makes it account for an absurd file. Prints one line
# per check; exit 0 when all hold, 1 when one failed, 2 on a setup error.
#
#   resume_peer.py RDCP PORT MODE DEST NAME
#
# MODE oracle: DEST/NAME is a file already there (say a key). The server
#   announces NAME with size 1 and reads the answer: it must be a HAVE of
#   exactly file id, flags, status (peer_wire's decoder refuses trailing
#   bytes: nothing of the content) asking for the source's digests; a
#   SUMS with the right digest of the file's first byte (the test reads
#   the file; without a key the digest key is all zero) must get a MATCH
#   of one bit, 0: a short claim cannot test a prefix; the same name
#   again must be refused (HAVE SKIP with -EEXIST, or the pull's own
#   refusal of a name sent twice), never answered.
# MODE guess: what a match still tells: NAME announced with its real size
#   (one chunk) and the right digest of the whole content: the bit is 1
#   (so oracle's 0 is not a wrong digest formula). One guess of a whole
#   chunk per name and session, as doc/SECURITY.md says.
# MODE claim: the server forces 4096-byte chunks (the smallest) and
#   announces NAME as a sparse file of 504 GiB. The client must answer at
#   once, and its peak virtual size (VmPeak) stay under 256 MiB.
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peer  # noqa: E402
from peer_wire import (ERROR, FILE, FILE_END, FILE_RESULT, HAVE, HAVE_SKIP,  # noqa: E402
                       HAVE_SUMS, MATCH, SUMS, END_ABORT, Msg, PeerError,
                       chunk_sum, resume_key)

EEXIST = 17
failed = False


def check(ok, what):
    global failed
    print("%s - %s" % ("ok" if ok else "FAIL", what))
    failed |= not ok


def announce(srv, fid, name, size, flags=0):
    srv.conn.send(Msg(FILE, file_id=fid, size=size, flags=flags, mode=0o600,
                      mtime=1700000000, atime=1700000000, path=name))


def answer(srv):
    """The client's next message but CREDITs and results; a decoding
    failure (a HAVE with more than its three fields) as the message."""
    while True:
        try:
            m = srv.conn.recv()
        except PeerError as e:
            return e
        if m.type != FILE_RESULT:
            return m


def oracle(srv, name, secret):
    announce(srv, 0, name, 1)
    m = answer(srv)
    check(isinstance(m, Msg) and m.type == HAVE and m.file_id == 0,
          "the answer to FILE is a HAVE of id, flags, status only: %r" % m)
    if not isinstance(m, Msg) or m.type != HAVE:
        return
    check(m.flags == HAVE_SUMS and m.status == 0,
          "it asks for the source's digests: %r" % m)
    srv.conn.send(Msg(SUMS, file_id=0, first=0,
                      sums=[chunk_sum(resume_key(), 0, 0, secret[:1])]))
    m = answer(srv)
    check(isinstance(m, Msg) and m.type == MATCH and m.first == 0 and
          len(m.bits) == 1, "a SUMS gets a MATCH of one bit: %r" % m)
    check(isinstance(m, Msg) and m.type == MATCH and m.bits == [False],
          "the right digest of the first byte does not match: no prefix")
    announce(srv, 1, name, len(secret))
    m = answer(srv)
    refused = isinstance(m, PeerError) or m.type == ERROR or (
        m.type == HAVE and m.flags == HAVE_SKIP and m.status == -EEXIST)
    check(refused, "the same name again is refused: %r" % m)


def guess(srv, name, secret):
    announce(srv, 0, name, len(secret))
    m = answer(srv)
    check(isinstance(m, Msg) and m.type == HAVE and m.flags == HAVE_SUMS,
          "HAVE asks for the digests: %r" % m)
    srv.conn.send(Msg(SUMS, file_id=0, first=0,
                      sums=[chunk_sum(resume_key(), 0, 0, secret)]))
    m = answer(srv)
    check(isinstance(m, Msg) and m.type == MATCH and m.bits == [True],
          "the right digest of the whole file matches: %r" % m)


def vm_peak_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmPeak:"):
                return int(line.split()[1])
    return -1


def claim(srv, name, pid):
    t0 = time.monotonic()
    announce(srv, 0, name, 504 << 30, flags=1)
    m = answer(srv)
    dt = time.monotonic() - t0
    peak = vm_peak_kib(pid)
    print("# answered in %.2f s; client VmPeak %d KiB" % (dt, peak))
    check(isinstance(m, Msg) and m.type == HAVE,
          "the client answers the 504 GiB FILE: %r" % m)
    check(dt < 5, "at once (%.2f s)" % dt)
    check(0 < peak < 256 << 10,
          "its peak virtual size stays under 256 MiB (%d KiB)" % peak)
    srv.conn.send(Msg(FILE_END, file_id=0, flags=END_ABORT, csum=1,
                      status=-5, message=b"gave up"))


def main():
    rdcp, port, mode, dest, name = sys.argv[1:6]
    srv = peer.Server(int(port), timeout=10.0)
    client = subprocess.Popen(
        [rdcp, "--transport", "tcp", "--no-auth", "--port", port,
         "--resume", "--timeout", "10", "127.0.0.1::" + name, dest],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        if mode == "claim":
            srv.accept(chunk_size=4096)
        else:
            srv.accept()
        srv.handshake()
        srv.expect_ring()
        if mode == "claim":
            claim(srv, name.encode(), client.pid)
        else:
            with open(os.path.join(dest, name), "rb") as f:
                secret = f.read()
            (oracle if mode == "oracle" else guess)(srv, name.encode(),
                                                    secret)
        srv.close()
    except (OSError, PeerError) as e:
        print("error: %s" % e)
        client.kill()
        client.wait()
        return 2
    try:
        _, err = client.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        client.kill()
        _, err = client.communicate()
        check(False, "the client ends when the server goes")
    print("# client exit %d: %s" % (client.returncode,
                                    err.decode(errors="replace").strip()
                                    .replace("\n", " | ")))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
