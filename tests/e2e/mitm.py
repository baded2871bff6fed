#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#
# A man in the middle for rdcp's TCP transport (tests/e2e/mitm.sh): it
# accepts one client on 127.0.0.1:LISTEN, connects to the receiver on
# 127.0.0.1:TARGET, relays the 24-byte connect exchange, then relays frames
# (cm/tcp.c: op u8, 3 zero bytes, len u32, imm u32, slot u32, payload) and
# rewrites, drops, replays, reorders or injects control messages
# (transfer/wire/wire.c) on the way, as an attacker on the path without the key
# would. It keeps the rest of the session consistent, so that an
# unauthenticated control channel (protocol 2) accepts the result: acks
# (ctrl_ack, slot_ack) are translated between the two sides' views of each
# stream, and results for injected entries are swallowed. It cannot forge
# a protocol-3 tag: a tagged message it changes keeps its old tag.
#
#   mitm.py LISTEN TARGET ACTION [ARG...]
#
# ACTION:
#   grow N              the first regular file's FILE size += N
#   truncate            drop the first regular file's last chunk, and
#                       FILE_END's chunk count - 1
#   inject-symlink NAME TARGET   before DONE, a symlink entry NAME -> TARGET
#   inject-empty NAME   before DONE, an empty regular file NAME
#   rewrite NAME MODE MTIME      the first regular file's FILE: path NAME,
#                       mode MODE (octal), mtime MTIME seconds
#   drop-credit | dup-credit | swap-credit
#                       the first CREDIT (or FREED, which carries the
#                       slots back when the sides agreed on any slot) the
#                       sink sends after RING: lost, delivered twice, or
#                       delivered after the message that follows it
#
# Prints one line per thing it did ("mitm: ..."), and "mitm: did nothing"
# if the action never found its target. Exits when both sides closed, or
# after 60 s.
import os
import socket
import struct
import sys
import threading
import time

HELLO, WELCOME, RING, FILE, FILE_END, FILE_RESULT, DONE, BYE, ERROR, \
    CREDIT, AUTH, HAVE, PACK_DONE = range(1, 14)
FR_SEND, FR_WRITE = 1, 2
FREED = 25
TAGGED = 1
TAG_LEN = 16


def say(*a):
    print("mitm:", *a, flush=True)


def credit_kind(t):
    return "FREED" if t == FREED else "CREDIT"


class Stream:
    """One direction's control messages or data writes: maps the count the
    receiver acknowledges (of what it was delivered) to the sender's count
    (of what it sent), across injections and drops."""

    def __init__(self):
        self.cum = [0]  # originals among the first k delivered
        self.orig = 0
        self.changed = False

    def deliver(self, injected=False):
        if not injected:
            self.orig += 1
        else:
            self.changed = True
        self.cum.append(self.orig)

    def drop(self):
        self.orig += 1
        self.changed = True

    def map(self, ack):
        if ack >= len(self.cum) - 1:
            return self.orig  # all delivered consumed: drops behind too
        return self.cum[ack]


def ctrl_parse(b):
    """(type, flags, ctrl_ack, slot_ack, body, tag) of a control message."""
    t, fl, _, _, ca, sa = struct.unpack(">BBHIII", b[:16])
    if fl & TAGGED:
        return t, fl, ca, sa, b[16:-TAG_LEN], b[-TAG_LEN:]
    return t, fl, ca, sa, b[16:], b""


def ctrl_build(t, fl, ca, sa, body, tag=b""):
    n = 16 + len(body) + len(tag)
    return struct.pack(">BBHIII", t, fl, 0, n, ca, sa) + body + tag


def pstr(b, off):
    n, = struct.unpack(">H", b[off:off + 2])
    return b[off + 2:off + 2 + n], off + 2 + n


def file_body(fid, kind, size, path, link=b"", mode=0o100644):
    return (struct.pack(">IBIQIqIqI", fid, kind, 0, size, mode,
                        int(time.time()), 0, int(time.time()), 0) +
            struct.pack(">H", len(path)) + path +
            struct.pack(">H", len(link)) + link)


def end_body(fid, nchunks, csum):
    digest = {0: b"", 1: b"\0\0\0\0",
              2: bytes.fromhex("e3b0c44298fc1c149afbf4c8996fb924"
                               "27ae41e4649b934ca495991b7852b855")}[csum]
    # csum 2: SHA-256 over no chunk digests, as the sink computes it
    # seq_end 0: written before any slot, so the sink takes it at once
    return (struct.pack(">IIQQBB", fid, 0, nchunks, 0, csum, len(digest)) +
            digest + struct.pack(">iH", 0, 0))


class Mitm:
    def __init__(self, action, args):
        self.action, self.args = action, args
        self.lock = threading.Lock()
        # [0]: client to server, [1]: server to client
        self.ctrl = [Stream(), Stream()]
        self.writes = [Stream(), Stream()]
        self.role = 0
        self.csum = 1
        self.chunk = 1 << 20
        self.next_id = 0  # file ids seen from the source
        self.injected = set()
        self.after_ring = False
        self.target = None  # first regular file: id, size
        self.did = False
        self.held = None
        self.socks = [None, None]

    def source_dir(self):
        return 0 if self.role == 1 else 1

    def out(self, d, frame_op, payload, imm=0, slot=0):
        # A WRITE's payload: the 64-byte slot header, then the slot's
        # payload, which alone the frame's len counts.
        n = len(payload) - (64 if frame_op == FR_WRITE else 0)
        self.socks[1 - d].sendall(struct.pack(">B3xIII", frame_op, n, imm,
                                              slot) + payload)

    def send_ctrl(self, d, msg, injected=False):
        self.ctrl[d].deliver(injected)
        self.out(d, FR_SEND, msg)

    def fix_acks(self, d, msg):
        """Acks in msg (going d) count what the other side sent."""
        o = 1 - d
        if not (self.ctrl[o].changed or self.writes[o].changed):
            return msg
        t, fl, ca, sa, body, tag = ctrl_parse(msg)
        ca2 = self.ctrl[o].map(ca)
        sa2 = self.writes[o].map(sa) if self.writes[o].changed else sa
        if (ca2, sa2) == (ca, sa):
            return msg
        return ctrl_build(t, fl, ca2, sa2, body, tag)

    def on_write(self, d, payload, imm, slot):
        fid, = struct.unpack(">I", payload[8:12])
        off, = struct.unpack(">Q", payload[16:24])
        flags, = struct.unpack(">H", payload[28:30])
        if flags & 1:  # packed: ids first .. first + count - 1
            self.next_id = max(self.next_id, fid + off)
        if (self.action == "truncate" and self.target and
                fid == self.target[0] and
                off == (self.target[1] - 1) // self.chunk * self.chunk):
            self.writes[d].drop()
            say("dropped the last chunk of file %d (offset %d)" % (fid, off))
            self.did = True
            return
        self.writes[d].deliver()
        self.out(d, FR_WRITE, payload, imm, slot)

    def on_ctrl(self, d, msg):
        t, fl, ca, sa, body, tag = ctrl_parse(msg)
        msg = self.fix_acks(d, msg)
        t, fl, ca, sa, body, tag = ctrl_parse(msg)
        a = self.action
        if t == HELLO:
            self.role, self.csum = struct.unpack(">HB", body[:3])
            self.chunk, = struct.unpack(">I", body[12:16])
        elif t == RING:
            self.after_ring = True
        elif t == FILE:
            fid, kind, _, size = struct.unpack(">IBIQ", body[:17])
            self.next_id = max(self.next_id, fid + 1)
            if kind == 0 and self.target is None:
                self.target = (fid, size)
                if a == "grow":
                    body = body[:9] + struct.pack(">Q", size +
                                                  int(self.args[0])) + \
                        body[17:]
                    say("FILE %d: size %d -> %d" %
                        (fid, size, size + int(self.args[0])))
                    self.did = True
                elif a == "rewrite":
                    path, p = pstr(body, 45)
                    new = self.args[0].encode()
                    body = (body[:17] +
                            struct.pack(">I", 0o100000 |
                                        int(self.args[1], 8)) +
                            struct.pack(">q", int(self.args[2])) +
                            body[29:45] + struct.pack(">H", len(new)) +
                            new + body[p:])
                    say("FILE %d: %s -> %s, mode %s, mtime %s" %
                        (fid, path.decode(), self.args[0], self.args[1],
                         self.args[2]))
                    self.did = True
                msg = ctrl_build(t, fl, ca, sa, body, tag)
        elif t == FILE_END and a == "truncate" and self.target and \
                struct.unpack(">I", body[:4])[0] == self.target[0]:
            n, = struct.unpack(">Q", body[8:16])
            body = body[:8] + struct.pack(">Q", n - 1) + body[16:]
            say("FILE_END %d: chunks %d -> %d" % (self.target[0], n, n - 1))
            msg = ctrl_build(t, fl, ca, sa, body, tag)
        elif t in (FILE_RESULT, HAVE) and \
                struct.unpack(">I", body[:4])[0] in self.injected:
            self.ctrl[d].drop()
            say("swallowed the %s for injected file %d" %
                ("FILE_RESULT" if t == FILE_RESULT else "HAVE",
                 struct.unpack(">I", body[:4])[0]))
            return
        elif t == DONE and a.startswith("inject-") and \
                d == self.source_dir() and not self.did:
            fid = self.next_id
            name = self.args[0].encode()
            if a == "inject-symlink":
                inj = [ctrl_build(FILE, fl, ca, sa, file_body(
                    fid, 2, 0, name, self.args[1].encode(), 0o120777), tag)]
            else:
                inj = [ctrl_build(FILE, fl, ca, sa,
                                  file_body(fid, 0, 0, name), tag),
                       ctrl_build(FILE_END, fl, ca, sa,
                                  end_body(fid, 0, self.csum), tag)]
            for m in inj:
                self.send_ctrl(d, m, injected=True)
            self.injected.add(fid)
            say("injected %s as file %d before DONE" % (a[7:], fid))
            self.did = True
        elif t in (CREDIT, FREED) and a.endswith("-credit") \
                and self.after_ring \
                and d != self.source_dir() and not self.did:
            self.did = True
            if a == "drop-credit":
                self.ctrl[d].drop()
                say("dropped a %s from the sink" % credit_kind(t))
                return
            if a == "dup-credit":
                self.send_ctrl(d, msg)
                self.send_ctrl(d, msg, injected=True)
                say("delivered a %s from the sink twice" % credit_kind(t))
                return
            self.held = msg
            say("holding a %s from the sink back" % credit_kind(t))
            return
        self.send_ctrl(d, msg)
        if self.held and d != self.source_dir():
            # The held one goes second, with the acks of the one before it
            # (acks must not go backwards for protocol 2 to take it).
            ht, hfl, _, _, hbody, htag = ctrl_parse(self.held)
            self.held = None
            _, _, ca, sa, _, _ = ctrl_parse(msg)
            self.send_ctrl(d, ctrl_build(ht, hfl, ca, sa, hbody, htag))
            say("delivered it after the next message")

    def relay(self, d):
        s = self.socks[d]

        def full(n):
            b = b""
            while len(b) < n:
                c = s.recv(n - len(b))
                if not c:
                    raise EOFError
                b += c
            return b
        try:
            # the connect exchange: 24 bytes each way
            self.socks[1 - d].sendall(full(24))
            while True:
                op, n, imm, slot = struct.unpack(">B3xIII", full(16))
                payload = full(n + (64 if op == FR_WRITE else 0))
                with self.lock:
                    if op == FR_SEND and n >= 16:
                        self.on_ctrl(d, payload)
                    elif op == FR_WRITE:
                        self.on_write(d, payload, imm, slot)
                    else:
                        self.out(d, op, payload, imm, slot)
        except (EOFError, OSError):
            pass
        # A proxy passes a close on in its own direction only: shutting
        # both sockets here raced the other thread still forwarding what
        # the other side said last (the receiver's ERROR), and the client
        # then saw the connection end without it (exit 11, not 5).
        try:
            self.socks[1 - d].shutdown(socket.SHUT_WR)
        except OSError:
            pass


def main():
    listen, target, action = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    m = Mitm(action, sys.argv[4:])
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", listen))
    ls.listen(1)
    say("listening on %d for %d" % (listen, target))
    ls.settimeout(60)
    c, _ = ls.accept()
    sv = socket.create_connection(("127.0.0.1", target), timeout=10)
    sv.settimeout(None)
    c.settimeout(None)
    m.socks = [c, sv]
    ts = [threading.Thread(target=m.relay, args=(d,), daemon=True)
          for d in (0, 1)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(60)
    if not m.did:
        say("did nothing")
    os._exit(0)


if __name__ == "__main__":
    main()
