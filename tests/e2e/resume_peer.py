#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#
# A malicious rdcp server for --resume (issue #16 items 11 and 13): it
# listens on 127.0.0.1:PORT, starts a real `rdcp --resume` client that
# pulls from it (over TCP, --no-auth), and then, as the data source,
# tries to read the client's files through the resume answers, or makes
# it account for an absurd file. Checks what the client says back, byte
# by byte, and prints one line per check; exit 0 when all hold, 1 when
# one failed, 2 on a setup error.
#
#   resume_peer.py RDCP PORT MODE DEST NAME
#
# MODE oracle: NAME is a file already in DEST (say a key). The server
#   announces it with size 1 and reads the answer: it must be a HAVE of
#   exactly file id, flags, status (no CRC, nothing of the content)
#   asking for the source's digests; a SUMS with the right digest of the
#   file's first byte (the test reads the file; without a key the digest
#   key is all zero) must get a MATCH of one bit, 0: a short claim
#   cannot test a prefix; a second FILE for the same name must be
#   refused (HAVE SKIP, -EEXIST), and so must a third with its real size.
# MODE guess: what a match still tells: the server announces NAME with
#   its real size (one chunk) and the right digest of its whole content:
#   the bit is 1. (So oracle's 0 is not a wrong digest formula.) One
#   guess of the whole chunk per name and session, as the README says.
# MODE claim: the server forces 4032-byte chunks and announces NAME as a
#   sparse file of 504 GiB. The client's peak virtual size (VmPeak) once
#   it has answered must stay small, and it must answer at once.
import hashlib
import hmac
import os
import socket
import struct
import subprocess
import sys
import time

MAGIC, VERSION = 0x52444350, 2
CTRL_SIZE, CTRL_CREDITS = 8192, 64
T_WELCOME, T_RING, T_FILE, T_FILE_END, T_RESULT = 2, 3, 4, 5, 6
T_CREDIT = 10
T_HAVE, T_SUMS, T_MATCH = 12, 14, 15
HAVE_SKIP, HAVE_SUMS = 2, 4
EEXIST = 17
failed = False


def check(ok, what):
    global failed
    print("%s - %s" % ("ok" if ok else "FAIL", what))
    failed |= not ok


class Conn:
    def __init__(self, sock):
        self.s = sock
        self.got = 0  # control messages received: our ctrl_ack

    def full(self, n):
        b = b""
        while len(b) < n:
            c = self.s.recv(n - len(b))
            if not c:
                raise OSError("the client closed")
            b += c
        return b

    def send(self, mtype, body):
        msg = struct.pack(">B3xIII", mtype, 16 + len(body), self.got, 0) + \
            body
        self.s.sendall(struct.pack(">B3xIII", 1, len(msg), 0, 0) + msg)

    def recv(self, skip=(T_CREDIT,)):
        """The next control message not of a type in skip: (type, body)."""
        while True:
            op, n, _, _ = struct.unpack(">B3xIII", self.full(16))
            payload = self.full(n)
            if op != 1:
                continue
            self.got += 1
            if payload[0] not in skip:
                return payload[0], payload[16:]


def string(b):
    return struct.pack(">H", len(b)) + b


def file_msg(fid, path, size, flags=0):
    return struct.pack(">IBIQIqIqI", fid, 0, flags, size, 0o600,
                       1700000000, 0, 1700000000, 0) + \
        string(path) + string(b"")


def serve(conn, slot_size):
    """The connect exchange, HELLO, WELCOME; the client's RING."""
    pd = conn.full(24)
    magic, ver = struct.unpack(">IH", pd[:6])
    if magic != MAGIC or ver != VERSION:
        raise OSError("not an rdcp client: %s" % pd.hex())
    _, _, _, _, _, slots, _ = struct.unpack(">IHHIHHI4x", pd)
    conn.s.sendall(struct.pack(">IHHIHHI4x", MAGIC, VERSION, 0, CTRL_SIZE,
                               CTRL_CREDITS, min(slots, 8), slot_size))
    t, _ = conn.recv()
    if t != 1:
        raise OSError("expected HELLO, got type %d" % t)
    conn.send(T_WELCOME, struct.pack(">iI", 0, 0) + bytes(64) + string(b""))
    t, _ = conn.recv()
    if t != T_RING:
        raise OSError("expected RING, got type %d" % t)


def chunk_sum(fid, index, data):
    """transfer/payload.c payload_resume_sum, with the all-zero key."""
    msg = b"rdcp1 chunk" + struct.pack(">IQ", fid, index) + \
        hashlib.sha256(data).digest()
    return hmac.new(bytes(32), msg, hashlib.sha256).digest()[:16]


def oracle(conn, name, secret):
    conn.send(T_FILE, file_msg(0, name, 1))
    t, body = conn.recv()
    check(t == T_HAVE and len(body) == 10,
          "the answer to FILE is a HAVE of 10 bytes, nothing of the content "
          "(type %d, %d bytes: %s)" % (t, len(body), body.hex()))
    if t != T_HAVE or len(body) < 10:
        return
    fid, flags, status = struct.unpack(">IHi", body[:10])
    check(fid == 0 and flags == HAVE_SUMS and status == 0,
          "it asks for the source's digests (flags %d, status %d)"
          % (flags, status))
    conn.send(T_SUMS, struct.pack(">IQH", 0, 0, 1) + chunk_sum(0, 0,
                                                               secret[:1]))
    t, body = conn.recv()
    check(t == T_MATCH and len(body) == 15 and body[:14] ==
          struct.pack(">IQH", 0, 0, 1) and body[14] in (0, 1),
          "a SUMS gets a MATCH of one bit (type %d: %s)" % (t, body.hex()))
    check(t == T_MATCH and body[14] == 0,
          "the right digest of the first byte does not match: no prefix")
    for fid, size in ((1, 1), (2, len(secret))):
        conn.send(T_FILE, file_msg(fid, name, size))
        t, body = conn.recv(skip=(T_CREDIT, T_RESULT))
        ok = t == T_HAVE and len(body) == 10
        f, flags, status = struct.unpack(">IHi", body[:10]) if ok else (0,
                                                                     0, 0)
        check(ok and f == fid and flags == HAVE_SKIP and status == -EEXIST,
              "the same name again (size %d) is refused: %s"
              % (size, body.hex()))


def guess(conn, name, secret):
    conn.send(T_FILE, file_msg(0, name, len(secret)))
    t, body = conn.recv()
    check(t == T_HAVE and body[4:6] == struct.pack(">H", HAVE_SUMS),
          "HAVE asks for the digests (%s)" % body.hex())
    conn.send(T_SUMS, struct.pack(">IQH", 0, 0, 1) + chunk_sum(0, 0, secret))
    t, body = conn.recv()
    check(t == T_MATCH and len(body) == 15 and body[14] == 1,
          "the right digest of the whole file matches (%s)" % body.hex())


def vm_peak_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmPeak:"):
                return int(line.split()[1])
    return -1


def claim(conn, name, pid):
    t0 = time.monotonic()
    conn.send(T_FILE, file_msg(0, name, 504 << 30, flags=1))
    t, body = conn.recv()
    dt = time.monotonic() - t0
    peak = vm_peak_kib(pid)
    print("# answered in %.2f s; client VmPeak %d KiB" % (dt, peak))
    check(t == T_HAVE, "the client answers the 504 GiB FILE (type %d)" % t)
    check(dt < 5, "at once (%.2f s)" % dt)
    check(0 < peak < 256 << 10,
          "its peak virtual size stays under 256 MiB (%d KiB)" % peak)
    end = struct.pack(">IIQBBi", 0, 1, 0, 1, 0, -5) + string(b"gave up")
    conn.send(T_FILE_END, end)


def main():
    rdcp, port, mode, dest, name = sys.argv[1:6]
    lst = socket.socket()
    lst.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lst.bind(("127.0.0.1", int(port)))
    lst.listen(1)
    lst.settimeout(20)
    client = subprocess.Popen(
        [rdcp, "--transport", "tcp", "--no-auth", "--port", port,
         "--resume", "--timeout", "10", "127.0.0.1:" + name, dest],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        sock, _ = lst.accept()
        sock.settimeout(20)
        conn = Conn(sock)
        serve(conn, 4032 + 64 if mode == "claim" else 65536 + 64)
        if mode in ("oracle", "guess"):
            with open(os.path.join(dest, name), "rb") as f:
                (oracle if mode == "oracle" else guess)(
                    conn, name.encode(), f.read())
        else:
            claim(conn, name.encode(), client.pid)
        sock.close()
    except OSError as e:
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
