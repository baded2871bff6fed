#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
"""A protocol-v3 rdcp peer over the TCP transport, for malicious-peer tests.

Written from doc/PROTOCOL.md (version 3) and the C sources
(transfer/wire/wire.c, transfer/session/auth.c, cm/tcp.c, cm/tcp_conn.c, cm/common.c,
util/key.c); Python 3 standard library only. It plays an honest client or
server well enough to finish a real copy with `rdcp`, and lets a test
change, drop or add anything on the way.

Layers, bottom up (the first five in peer_wire.py, re-exported here):
  pd_encode/pd_decode    the 24-byte connect private data (cm/common.c)
  frame, Conn            cm/tcp.c frames (SEND, WRITE_WITH_IMM) on a socket;
                         Conn.send/write/poll/expect keep the credit rules
                         (ctrl_ack, slot_ack, CREDIT acks and keepalives);
                         every wait is bounded (PeerTimeout)
  Msg, encode, decode    every control message, header acks included
  slot_hdr, parse_slot, pack_record, pack_slot   ring slots, packed slots
  load_key, auth_mac, data_key    the key file and transfer/session/auth.c's MACs
  ctrl_key, ctrl_tag, add_tag     the control message tags: Conn tags what
                         it sends after AUTH (client) or WELCOME (server)
                         and checks what it receives from the same points
  crc32_combine, file_digest, pack_digest        digests as rdcp computes
  Entry                  one FILE to send, with per-field overrides
  Client, Server         sessions: handshake, source (push, or serving a
                         pull) and sink (pull, or receiving a push)

Misbehaving: every high-level step is a method a test may call on its own
(handshake pieces, send_file, send_chunks, send_end, done, run_sink, ...),
Entry takes overrides for any FILE / FILE_END field and explicit chunks, and
two hooks see everything that leaves:
  s.conn.tamper(msg)            -> Msg, list of Msgs/bytes, or None (drop)
  s.conn.tamper_write(seq, buf) -> bytes to write instead, or None (drop:
                                   a write lost in flight, its seq used)
conn.auto = False stops automatic acks and keepalives (a silent peer).
RemoteError carries an ERROR the real rdcp sent (the usual verdict).

A malicious server serving a pull (the client asked for want.txt):

    import peer
    srv = peer.Server(port, key=peer.load_key(keyfile))
    srv.accept()
    hello = srv.handshake()                  # HELLO, WELCOME, AUTH
    srv.expect_ring()                        # the client is the sink
    srv.run_source([peer.Entry("want.txt", b"ok"),
                    peer.Entry("other.txt", b"not asked for", mode=0o600)])
    print(srv.results)                       # file id -> FILE_RESULT Msg

A malicious client pushing a file whose FILE_END lies:

    c = peer.Client(port, key=key).connect()
    c.handshake(peer.PUSH, ["dest/"])
    c.expect_ring()
    c.run_source([peer.Entry("f", data, end={"nchunks": 7})])

Command line (tests/e2e/peer_selftest.sh uses it):
  peer.py [--host H] --port P [--key FILE] [--chunk N] [--slots N]
          [--csum none|crc32|sha256] MODE ...
    push DEST FILE...        push files (named by basename) to a receiver
    push-bad-digest DEST FILE...   the same, the last file's digest wrong
    pull OUTDIR SRC...       pull SRCs from a receiver into OUTDIR
    pull-list OUTDIR DIR NAME...  pull the NAMEs beneath DIR (--files-from)
    serve-pull FILE...       serve one pull with these files
    serve-push OUTDIR        receive one push into OUTDIR (flat names)
  Prints one line per file result and the BYE; exit 0 when every file
  succeeded, 1 when any failed, 2 on a protocol or connection failure.
"""
import hmac
import os
import socket
import sys
import time
import zlib

from peer_wire import *  # noqa: F401,F403 (the wire level, re-exported)
from peer_wire import _b


# ---------------------------------------------------------------- sessions

class Entry:
    """One entry to send: FILE fields (path, kind, mode, times, link; size
    is len(data)), its data, and overrides. kind KIND_HARDLINK (-H): link
    is the path of the file sent before with linked=True (flag LINKED);
    kind KIND_SPECIAL (-D): mode with its type bits (stat.S_IFCHR | 0o600),
    dev the device's number (rdev(major, minor)), sent as FILE's size.
      file={...}   any FILE field (e.g. file_id, size, path)
      end={...}    any FILE_END field (nchunks, digest, csum, flags...)
      chunks=[(offset, payload) or bytes(whole slot)...]  instead of data's
      send_end=False  no FILE_END; holes=set of chunk indexes not sent
      packed=True  sent as a one-record packed slot (no FILE)"""

    def __init__(self, path, data=b"", kind=KIND_FILE, mode=0o644, mtime=0,
                 atime=0, link=b"", file=None, end=None, chunks=None,
                 send_end=True, holes=(), packed=False, linked=False,
                 dev=0):
        self.path, self.data, self.kind = _b(path), _b(data), kind
        self.linked, self.dev = linked, dev
        self.mode, self.mtime, self.atime, self.link = mode, mtime, atime, _b(link)
        self.file, self.end = dict(file or {}), dict(end or {})
        self.chunks, self.send_end = chunks, send_end
        self.holes, self.packed = set(holes), packed
        self.file_id = self.have = None


class Session:
    """What Client and Server share: the connection, the HELLO agreed,
    the data source and the data sink. results: file id -> FILE_RESULT
    (PACK_DONE fills in Msg(FILE_RESULT) with status 0); haves: file id ->
    list of HAVE; matches: file id -> list of MATCH; received: path ->
    bytes the sink verified; bye: BYE; listed: the names a client's NAMES
    brought (a pull with --files-from), listed_end: its END came;
    names_done: the last NAMES_ACK's count; notices: the NOTICEs' texts
    (a receiver's warnings to a pushing client); links: path -> the path
    a hard link (kind 4) names, specials: path -> (mode, size) of a kind
    5 entry, linked: paths of the files that came LINKED (the sink's)."""

    def __init__(self, key=None, timeout=10.0):
        self.key, self.timeout, self.conn = key, timeout, None
        self.hello = self.nonce_s = self.bye = None
        self.results, self.haves, self.received = {}, {}, {}
        self.matches = {}
        self.listed, self.listed_end, self.names_done = [], False, 0
        self.notices, self.links, self.specials, self.linked = [], {}, {}, []
        self.rkey = resume_key()  # --resume digests (a key with --encrypt)
        self.next_id = 0

    @property
    def chunk(self):
        return self.conn.chunk_size

    def close(self):
        if self.conn:
            self.conn.close()

    def send_ring(self, **override):
        self.conn.send(Msg(RING, **dict(dict(slots=self.conn.slots,
                                             chunk_size=self.conn.chunk_size),
                                        **override)))

    def expect_ring(self):
        return self.conn.expect(RING)

    def _dispatch(self, m):
        """Source side: files' answers; returns False for anything else."""
        if m.type == FILE_RESULT:
            self.results[m.file_id] = m
        elif m.type == HAVE:
            self.haves.setdefault(m.file_id, []).append(m)
        elif m.type == MATCH:
            self.matches.setdefault(m.file_id, []).append(m)
        elif m.type == PACK_DONE:
            for i in range(m.first_id, m.first_id + m.count):
                self.results.setdefault(i, Msg(FILE_RESULT, file_id=i))
        elif m.type == BYE:
            self.bye = m
        elif m.type == NAMES:
            self.listed += [n for n in m.names.split(b"\0") if n]
            self.listed_end = bool(m.flags & NAMES_END)
        elif m.type == NOTICE:
            self.notices.append(m.message)
        elif m.type == FREED:
            pass  # Conn took its slots back
        else:
            return False
        return True

    def send_names(self, names, end=False, wait=True):
        """One NAMES with these names (a pull's --files-from), END with
        end; no window kept (see name_cost, NAMES_WINDOW)."""
        self.conn.send(Msg(NAMES, flags=NAMES_END if end else 0,
                           **names_body(names)), wait=wait)

    def expect_names(self):
        """A server: the client's NAMES until the one with END."""
        self.pump(lambda: self.listed_end)
        return self.listed

    def pump(self, until, timeout=None):
        """Takes the peer's messages (source side) until until() is true."""
        deadline = time.monotonic() + (timeout or self.timeout)
        while not until():
            left = deadline - time.monotonic()
            if left <= 0:
                raise PeerTimeout("peer did not answer in time")
            m = self.conn.recv(left)
            if not self._dispatch(m):
                raise PeerError("unexpected %r" % m)

    # ---- the data source
    def file_msg(self, e):
        """The FILE for e, not sent: its id the next, unless e.file
        overrides it."""
        e.file_id = e.file.get("file_id", self.next_id)
        self.next_id = max(self.next_id, e.file_id + 1)
        size = len(e.data) if e.kind == KIND_FILE else \
            e.dev if e.kind == KIND_SPECIAL else 0
        f = dict(file_id=e.file_id, kind=e.kind, size=size, mode=e.mode,
                 mtime=e.mtime, atime=e.atime, path=e.path, link=e.link,
                 flags=FILE_LINKED if e.linked else 0)
        f.update(e.file)
        return Msg(FILE, **f)

    def send_file(self, e):
        """FILE for e (its id: the next, unless e.file overrides it); waits
        for the HAVE answer when the session asks for it and, when that
        asks for the chunks' digests (--resume), sends them (SUMS) and
        takes the answers (MATCH) into e.have, the chunks the sink has."""
        self.conn.send(self.file_msg(e))
        if e.kind == KIND_FILE and self.hello.flags & F_ASK:
            self.pump(lambda: e.file_id in self.haves)
            if self.haves[e.file_id][0].flags & HAVE_SUMS:
                e.have = self.compare(e)

    def compare(self, e, limit=None):
        """--resume: every chunk's digest to the sink, at most limit (the
        ring's slots) unanswered; the set of chunk indexes it has."""
        limit = limit or self.conn.slots
        sums = [chunk_sum(self.rkey, e.file_id, off // self.chunk, d)
                for off, d in self._pieces(e)]
        have, sent, got = set(), 0, 0
        while got < len(sums):
            while sent < len(sums) and sent - got < limit:
                n = min(SUMS_MAX, len(sums) - sent, limit - (sent - got))
                self.conn.send(Msg(SUMS, file_id=e.file_id, first=sent,
                                   sums=sums[sent:sent + n]))
                sent += n
            self.pump(lambda: self.matches.get(e.file_id))
            m = self.matches[e.file_id].pop(0)
            if m.first != got or len(m.bits) > sent - got:
                raise PeerError("MATCH out of turn: %r" % m)
            have |= {m.first + i for i, b in enumerate(m.bits) if b}
            got += len(m.bits)
        return have

    def _pieces(self, e):
        n = self.chunk
        return [(off, e.data[off:off + n]) for off in range(0, len(e.data), n)]

    def send_chunks(self, e):
        """Writes e's chunks (or e.chunks as given); returns the number
        posted. Chunks in e.holes, or that the sink has (MATCH), are not."""
        if e.chunks is not None:
            for c in e.chunks:
                if isinstance(c, bytes):
                    self.conn.write(c)
                else:
                    self.write_chunk(e.file_id, *c)
            return len(e.chunks)
        sent = 0
        for off, data in self._pieces(e):
            i = off // self.chunk
            if i in e.holes or (e.have and i in e.have):
                continue
            self.write_chunk(e.file_id, off, data)
            sent += 1
        return sent

    def write_chunk(self, file_id, offset, data, **hdr):
        """One chunk: header (fields overridable) + raw payload."""
        seq = hdr.pop("seq", self.conn.posted)
        h = dict(crc=crc32(data), flags=0)
        h.update(hdr)
        self.conn.write(slot_hdr(seq, file_id, len(data), offset, **h) + data,
                        seq)

    def send_end(self, e, nchunks):
        if not e.send_end:
            return
        csum = self.hello.csum
        resume = self.hello.flags & F_RESUME  # every chunk counts then
        kept = [d for off, d in self._pieces(e)
                if off // self.chunk not in e.holes or resume]
        end = dict(file_id=e.file_id, nchunks=nchunks, csum=csum,
                   digest=file_digest(csum, kept), seq_end=self.conn.posted)
        end.update(e.end)
        self.conn.send(Msg(FILE_END, **end))

    def send_packed(self, entries):
        """Entries (small files) as one packed slot, ids from the next."""
        recs = []
        for e in entries:
            e.file_id = self.next_id
            self.next_id += 1
            recs.append(pack_record(e.file_id, e.path, e.data, self.hello.csum,
                                    e.mode, e.mtime, 0, e.atime))
        payload, c = pack_slot(recs)
        self.conn.write(slot_hdr(self.conn.posted, entries[0].file_id,
                                 len(payload), len(entries), c, SLOT_PACKED)
                        + payload)

    def send_entry(self, e):
        if e.packed:
            return self.send_packed([e])
        self.send_file(e)
        if e.kind != KIND_FILE:
            return
        skip = any(h.flags & HAVE_SKIP for h in self.haves.get(e.file_id, []))
        if not skip:
            self.send_end(e, self.send_chunks(e))

    def done(self, whole=True):
        """DONE: every entry was sent (whole), as the real source says."""
        self.conn.send(Msg(DONE, flags=DONE_WHOLE if whole else 0,
                           max_delete=DELETE_ANY, seq_end=self.conn.posted))

    def run_source(self, entries, wait_bye=True):
        """Sends every entry, waits for a result for each, DONE, BYE."""
        for e in entries:
            self.send_entry(e)
        ids = [e.file_id for e in entries]
        self.pump(lambda: all(i in self.results for i in ids))
        self.done()
        if wait_bye:
            self.pump(lambda: self.bye is not None)
        return self.results

    # ---- the data sink
    def run_sink(self, outdir=None, answer=None):
        """Plays the sink until DONE: HAVE (send all) where asked, checks each
        chunk's CRC and each file's digest, answers FILE_RESULT (or
        PACK_DONE), then BYE. answer(file_msg, data, ok) may return the
        FILE_RESULT to send instead. Verified files go to self.received
        and, with outdir, into outdir under their basename."""
        files, done = {}, False
        csum = self.hello.csum
        while not done or files:
            ev = self.conn.poll()
            if ev is None:
                raise PeerTimeout("sink: nothing for %.1f s" % self.timeout)
            if ev[0] == "data":
                h, payload = parse_slot(ev[3])
                if h["flags"] & SLOT_COMPRESSED:
                    payload = zlib.decompress(payload)
                if h["flags"] & SLOT_PACKED:
                    for r in parse_pack(payload, h["offset"]):
                        ok = r["digest"] == pack_digest(csum, r["data"])
                        self._place(r["path"], r["data"], ok, outdir)
                        res = Msg(FILE_RESULT, file_id=r["file_id"],
                                  status=0 if ok else -EBADMSG)
                        self.results[r["file_id"]] = res
                        if not ok:
                            self.conn.send(res)
                    self.conn.send(Msg(PACK_DONE, first_id=h["file_id"],
                                       count=h["offset"]))
                    continue
                f = files[h["file_id"]]
                f["bad"] |= crc32(payload) != h["crc"]
                f["chunks"][h["offset"]] = payload
                continue
            m = ev[1]
            if m.type == ERROR:
                raise RemoteError(m)
            if m.type == CREDIT:
                continue
            if m.type == DONE:
                done = True
            elif m.type == NAMES_ACK:
                self.names_done = m.done
            elif m.type == FILE and m.kind != KIND_FILE:
                if m.kind == KIND_HARDLINK:
                    self.links[m.path] = m.link
                elif m.kind == KIND_SPECIAL:
                    self.specials[m.path] = (m.mode, m.size)
                self._answer(m, b"", True, answer, outdir, b"")
            elif m.type == FILE:
                if m.flags & FILE_LINKED:
                    self.linked.append(m.path)
                files[m.file_id] = dict(file=m, chunks={}, bad=False)
                if self.hello.flags & F_ASK:
                    self.conn.send(Msg(HAVE, file_id=m.file_id))
            elif m.type == FILE_END:
                f = files.pop(m.file_id)
                parts = [f["chunks"][k] for k in sorted(f["chunks"])]
                data = bytearray(f["file"].size)
                for off, p in f["chunks"].items():
                    data[off:off + len(p)] = p
                dg = file_digest(csum, parts)
                ok = (not f["bad"] and m.digest == dg and not m.flags &
                      END_ABORT and m.nchunks == len(parts))
                self._answer(f["file"], bytes(data), ok, answer, outdir, dg)
            else:
                raise PeerError("sink: unexpected %r" % m)
        n_ok = sum(1 for r in self.results.values() if r.status == 0)
        self.conn.send(Msg(BYE, files_ok=n_ok,
                           files_failed=len(self.results) - n_ok,
                           bytes=sum(len(v) for v in self.received.values())))

    def _place(self, path, data, ok, outdir):
        if ok:
            self.received[path] = data
            if outdir:
                with open(os.path.join(os.fsencode(outdir),
                                       os.path.basename(path)),
                          "wb") as f:
                    f.write(data)

    def _answer(self, fm, data, ok, answer, outdir, digest):
        r = Msg(FILE_RESULT, file_id=fm.file_id, status=0 if ok else -EBADMSG,
                sent=len(data), digest=digest if ok else b"")
        if answer:
            r = answer(fm, data, ok) or r
        self.results[fm.file_id] = r
        if fm.kind == KIND_FILE:
            self._place(fm.path, data, ok and r.status == 0, outdir)
        self.conn.send(r)


class Client(Session):
    """A client of `rdcp --listen`: connect(), handshake(), then
    expect_ring() + run_source() for a push, or send_ring() + run_sink()
    for a pull (push() and pull() do both)."""

    def __init__(self, port, key=None, host="127.0.0.1", timeout=10.0):
        super().__init__(key, timeout)
        self.host, self.port = host, port

    def connect(self, slots=8, chunk=65536, **pd):
        self.conn = Conn.connect(self.host, self.port, self.timeout,
                                 slots=slots, chunk_size=chunk, **pd)
        return self

    def handshake(self, role, paths, csum=CSUM_CRC32, flags=0, level=0,
                  auth=True, check_server=True, hello=None):
        """HELLO (fields overridable by hello={...}), WELCOME (its MAC
        checked), AUTH (auth=False: not sent; or bytes: that MAC).
        Returns the WELCOME."""
        paths_b = b"".join(_b(p) + b"\0" for p in paths)
        h = dict(role=role, csum=csum, level=level, flags=flags,
                 features=(FEAT_AUTH if self.key else 0) | FEAT_PACK,
                 chunk_size=self.chunk, nonce=os.urandom(32),
                 npaths=len(paths), paths=paths_b)
        h.update(hello or {})
        self.hello = Msg(HELLO, **h)
        self.conn.send(self.hello)
        w = self.conn.expect(WELCOME)
        if w.status:
            raise PeerError("refused: %d %s" % (w.status, w.message))
        self.nonce_s = w.nonce
        if self.key and check_server and not hmac.compare_digest(
                w.mac, auth_mac(self.key, "server", self.hello, w)):
            raise PeerError("the server's MAC does not verify")
        if self.key and w.features & FEAT_AUTH:
            # the server tags what it sends after WELCOME
            self.conn.start_tags(ctrl_key(self.key, self.hello.nonce,
                                          w.nonce), server=False)
            self.conn.rx_tags = True
        if auth is True and self.key:
            auth = auth_mac(self.key, "client", self.hello, w)
        if isinstance(auth, bytes):
            self.conn.send(Msg(AUTH, mac=auth))
            self.conn.tx_tags = self.conn.ck is not None
        return w

    def push(self, dest, entries, **hs):
        self.handshake(PUSH, [dest], **hs)
        self.expect_ring()
        return self.run_source(entries)

    def pull(self, srcs, outdir=None, names=None, **hs):
        """A pull of srcs; with names, --files-from: srcs is the one
        directory they are beneath, all sent at once (a short list)."""
        if names is not None:
            hs["flags"] = hs.get("flags", 0) | F_LIST
        self.handshake(PULL, srcs, **hs)
        self.send_ring()
        if names is not None:
            self.send_names(names, end=True)
        self.run_sink(outdir)
        return self.received


class Server(Session):
    """A server for one real rdcp client: accept(), handshake(), then
    expect_ring() + run_source(entries) for a pull (serve_pull), or
    send_ring() + run_sink() for a push (serve_push)."""

    def __init__(self, port, key=None, host="127.0.0.1", timeout=10.0):
        super().__init__(key, timeout)
        self.lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.lsock.bind((host, port))
        self.lsock.listen(4)

    def accept(self, timeout=None, status=0, **geom):
        self.conn = Conn.accept(self.lsock, timeout or self.timeout, status,
                                **geom)
        return self

    def close(self):
        super().close()
        self.lsock.close()

    def handshake(self, welcome=None, check_auth=True, any_slot=False):
        """HELLO, WELCOME with our nonce and MAC (fields overridable by
        welcome={...}), then the client's AUTH, checked unless told not
        to. With any_slot, and the client offering it, slots go back in
        any order (FEAT_ANY_SLOT). Returns the HELLO."""
        self.hello = self.conn.expect(HELLO)
        self.nonce_s = os.urandom(32)
        w = dict(features=FEAT_PACK | (FEAT_AUTH if self.key else 0),
                 nonce=self.nonce_s)
        if any_slot and self.hello.features & FEAT_ANY_SLOT:
            w["features"] |= FEAT_ANY_SLOT
            self.conn.use_any_slot()
        w.update(welcome or {})
        wm = Msg(WELCOME, **w)
        if self.key and "mac" not in w:
            wm.mac = auth_mac(self.key, "server", self.hello, wm)
        self.welcome = wm
        tags = self.key and w.get("status", 0) == 0
        if tags:
            self.conn.start_tags(ctrl_key(self.key, self.hello.nonce,
                                          self.nonce_s), server=True)
        self.conn.send(wm)
        if tags:
            self.conn.tx_tags = True  # after WELCOME
            a = self.conn.expect(AUTH)
            self.conn.rx_tags = True  # after AUTH
            want = auth_mac(self.key, "client", self.hello, wm)
            if check_auth and not hmac.compare_digest(a.mac, want):
                raise PeerError("the client's MAC does not verify")
        return self.hello

    def serve_pull(self, entries):
        self.handshake()
        self.expect_ring()
        return self.run_source(entries)

    def serve_push(self, outdir=None):
        self.handshake()
        self.send_ring()
        self.run_sink(outdir)
        return self.received


# ---------------------------------------------------------------- CLI

def _report(s):
    bad = 0
    for i in sorted(s.results):
        r = s.results[i]
        bad += r.status != 0
        print("result %d status %d %s" % (i, r.status, r.message.decode(
            "utf-8", "replace")))
    if s.bye:
        print("bye ok %d failed %d bytes %d" % (s.bye.files_ok,
                                               s.bye.files_failed, s.bye.bytes))
    return 1 if bad else 0


def main(argv):
    opts = {"--host": "127.0.0.1", "--port": None, "--key": None,
            "--chunk": "65536", "--slots": "8", "--csum": "crc32"}
    while argv and argv[0] in opts:
        opts[argv[0]] = argv[1]
        argv = argv[2:]
    if not argv or not opts["--port"]:
        sys.exit(__doc__)
    mode, args = argv[0], argv[1:]
    key = load_key(opts["--key"]) if opts["--key"] else None
    port, chunk = int(opts["--port"]), int(opts["--chunk"])
    csum = ("none", "crc32", "sha256").index(opts["--csum"])

    def entries(paths):
        return [Entry(os.path.basename(p), open(p, "rb").read())
                for p in paths]
    try:
        if mode in ("push", "push-bad-digest"):
            s = Client(port, key, opts["--host"]).connect(
                int(opts["--slots"]), chunk)
            es = entries(args[1:])
            if mode == "push-bad-digest":
                dg = bytearray(file_digest(csum, [es[-1].data]))
                dg[0] ^= 0xff
                es[-1].end["digest"] = bytes(dg)
            s.push(args[0], es, csum=csum)
        elif mode == "pull":
            s = Client(port, key, opts["--host"]).connect(
                int(opts["--slots"]), chunk)
            s.pull(args[1:], args[0], csum=csum)
        elif mode == "pull-list":
            s = Client(port, key, opts["--host"]).connect(
                int(opts["--slots"]), chunk)
            s.pull([args[1]], args[0], names=args[2:], csum=csum)
        elif mode in ("serve-pull", "serve-push"):
            s = Server(port, key, opts["--host"])
            print("listening on %s:%d" % (opts["--host"], port), flush=True)
            s.accept(timeout=30)
            if mode == "serve-pull":
                s.serve_pull(entries(args))
            else:
                s.serve_push(args[0])
            s.conn.wait_closed(5)
        else:
            sys.exit("unknown mode %s" % mode)
    except (PeerError, OSError) as e:
        print("peer: %s: %s" % (mode, e))
        return 2
    rc = _report(s)
    s.close()
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
