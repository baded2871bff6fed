#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
"""The wire level of tests/e2e/peer.py (read its documentation first).

Protocol version 3 over the TCP transport, written from doc/PROTOCOL.md
(version 3) and transfer/wire/wire.c, transfer/session/auth.c, cm/tcp.c,
cm/tcp_conn.c, cm/common.c and util/key.c: constants, the control message
codec (Msg, encode, decode), ring slot headers and packed slots, digests
as rdcp computes them, the key file, the handshake MACs and the control
message tags, and Conn, one connection with its frames, credits and tags. peer.py re-exports all of it.
"""
import collections
import hashlib
import hmac
import os
import select
import socket
import struct
import time
import zlib

MAGIC, VERSION = 0x52444350, 3
TAGGED, TAG_LEN = 1, 16  # header byte 1; the tag ends the message
DIR_TO_SERVER, DIR_TO_CLIENT = 1, 2
CTRL_SIZE, CTRL_CREDITS, SLOT_HDR = 8192, 64, 64
FR_SEND, FR_WRITE = 1, 2
KEEPALIVE_S = 1.0
(HELLO, WELCOME, RING, FILE, FILE_END, FILE_RESULT, DONE, BYE, ERROR, CREDIT,
 AUTH, HAVE, PACK_DONE, SUMS, MATCH, DELETED, DELETE_END, NAMES,
 NAMES_ACK, KEPT, NOTICE, XATTRS, LANES, BATCH, FREED) = range(1, 26)
TYPE_NAMES = dict(enumerate(
    "HELLO WELCOME RING FILE FILE_END FILE_RESULT DONE BYE ERROR CREDIT AUTH "
    "HAVE PACK_DONE SUMS MATCH DELETED DELETE_END NAMES NAMES_ACK "
    "KEPT NOTICE XATTRS LANES BATCH FREED".split(), 1))
PUSH, PULL = 1, 2
CSUM_NONE, CSUM_CRC32, CSUM_SHA256 = 0, 1, 2
FEAT_AUTH, FEAT_PACK, FEAT_WIDE, FEAT_ANY_SLOT = 1, 2, 4, 8
(F_FSYNC, F_DEST_DIR, F_RECURSIVE, F_PRESERVE, F_RESUME, F_NO_CLOBBER,
 F_UPDATE, F_ENCRYPT, F_COMPRESS, F_SPARSE) = (1 << i for i in range(10))
F_DRY_RUN, F_DELETE, F_LIST = 1 << 10, 1 << 11, 1 << 12
F_DIRECT, F_NO_DIRECT = 1 << 13, 1 << 14  # O_DIRECT forced, forbidden
# -o, -g, --numeric-ids, -X, -A, DEST named; -H, --devices, --specials
(F_OWNER, F_GROUP, F_NUMERIC_IDS, F_XATTRS, F_ACLS,
 F_DEST_NAMED) = (1 << i for i in range(15, 21))
F_HARD_LINKS, F_DEVICES, F_SPECIALS = 1 << 21, 1 << 22, 1 << 23
NAMES_END = 1  # NAMES: the list ends with these
NAMES_WINDOW, NAME_OVERHEAD = 256 << 10, 32  # a name costs len + 1 + 32
NAMES_BYTES = CTRL_SIZE - 16 - 6 - TAG_LEN  # names (NULs too) in one NAMES
F_ASK = F_RESUME | F_NO_CLOBBER | F_UPDATE  # the sink answers FILE with HAVE
KIND_FILE, KIND_DIR, KIND_SYMLINK, KIND_OTHER = 0, 1, 2, 3  # OTHER: DELETED
# HARDLINK (-H): a later name of the LINKED file its link names;
# SPECIAL (-D): mode with its type bits, size the device's number (rdev())
KIND_HARDLINK, KIND_SPECIAL = 4, 5
DONE_WHOLE, DELETE_ANY = 1, (1 << 64) - 1  # DONE's flags, max_delete
DELETED_DRY = 1
FILE_SPARSE = 1
END_ABORT = 1
RESULT_SKIPPED = 1
HAVE_SKIP, HAVE_SUMS = 2, 4
SUMS_MAX, SUM_LEN = 256, 16  # digests per SUMS (bits per MATCH), bytes each
SLOT_PACKED, SLOT_COMPRESSED, SLOT_ENCRYPTED = 1, 2, 4
PACK_ABORT = 1
EBADMSG, EPROTO, ECANCELED, E2BIG = 74, 71, 125, 7


class PeerError(Exception):
    """The session cannot go on (closed, malformed, unexpected)."""


class PeerTimeout(PeerError):
    """A bounded wait ran out."""


class Closed(PeerError):
    """The peer closed the connection (or reset it)."""


class ConnectRefused(PeerError):
    """The connect answer refused us: .answer is its pd_decode() dict."""

    def __init__(self, answer):
        super().__init__("connect refused: %r" % answer)
        self.answer = answer


class RemoteError(PeerError):
    """The peer sent ERROR: .msg is the Msg (status, klass, message)."""

    def __init__(self, msg):
        super().__init__("peer sent ERROR %d class %d: %s" %
                         (msg.status, msg.klass, msg.message.decode(
                             "utf-8", "replace")))
        self.msg = msg


def _b(s):
    return s if isinstance(s, bytes) else os.fsencode(s)


# ---------------------------------------------------------------- checksums

def crc32(data, crc=0):
    return zlib.crc32(data, crc) & 0xffffffff


def _multmodp(a, b):
    """a * b modulo the CRC-32 polynomial (zlib's multmodp, reflected)."""
    m, p = 1 << 31, 0
    while True:
        if a & m:
            p ^= b
            if not a & (m - 1):
                return p
        m >>= 1
        b = (b >> 1) ^ 0xedb88320 if b & 1 else b >> 1


_X2N = [1 << 30]
for _ in range(31):
    _X2N.append(_multmodp(_X2N[-1], _X2N[-1]))


def crc32_combine(crc_a, crc_b, len_b):
    """CRC32 of A||B from crc(A), crc(B) and len(B), as zlib's (any size)."""
    p, k, n = 1 << 31, 3, len_b
    while n:
        if n & 1:
            p = _multmodp(_X2N[k & 31], p)
        n >>= 1
        k += 1
    return _multmodp(p, crc_a) ^ crc_b


def file_digest(csum, chunks):
    """FILE_END's digest over the chunks that count (raw bytes, in offset
    order; holes left out): crc32_combine of their CRCs (= the CRC32 of
    their concatenation), or SHA-256 over their SHA-256s."""
    if csum == CSUM_CRC32:
        c = 0
        for ch in chunks:
            c = crc32_combine(c, crc32(ch), len(ch))
        return struct.pack(">I", c)
    if csum == CSUM_SHA256:
        h = hashlib.sha256()
        for ch in chunks:
            h.update(hashlib.sha256(ch).digest())
        return h.digest()
    return b""


def pack_digest(csum, data):
    """A packed record's digest: as FILE_END for the file as one chunk."""
    return file_digest(csum, [data] if data else [])


# ---------------------------------------------------------------- key, MACs

def load_key(path):
    """The 32-byte key of an `rdcp --keygen` file (64 hex digits)."""
    with open(path, "rb") as f:
        return bytes.fromhex(f.read(64).decode())


def auth_params(h):
    """The 24 bytes of HELLO parameters the MACs cover (transfer/session/auth.c)."""
    return struct.pack(">HBBIIHHQ", h.role, h.csum, h.level, h.flags,
                       h.chunk_size, h.npaths, h.nfilters, h.bwlimit)


def auth_lanes(h, w):
    """The lanes the MACs cover (transfer/session/auth.c lane_params): HELLO's
    streams, WELCOME's features, streams, token, rails and, for rails
    1..R-1, each family and address (rail_addrs' first (R-1) * 17 bytes),
    then HELLO's sync level when it is not 0."""
    n = (w.rails - 1) * 17 if w.rails > 1 else 0
    return (struct.pack(">BIB", h.streams, w.features, w.streams) + w.token +
            bytes([w.rails]) + w.rail_addrs[:n] +
            (bytes([h.sync]) if h.sync else b""))


def auth_mac(key, side, h, w):
    """HMAC-SHA256(key, "rdcp1 server\\0"|"rdcp1 client\\0" || nonce_c ||
    nonce_s || params || paths || filters || lanes) for HELLO h and
    WELCOME w (a Msg); side is "server" or "client"."""
    label = b"rdcp1 server\0" if side == "server" else b"rdcp1 client\0"
    return hmac.new(key, label + h.nonce + w.nonce + auth_params(h) +
                    h.paths + h.filters + auth_lanes(h, w),
                    hashlib.sha256).digest()


def ctrl_key(key, nonce_c, nonce_s):
    """The control key (transfer/session/auth.c auth_ctrl_key): HKDF-SHA256."""
    prk = hmac.new(nonce_c + nonce_s, key, hashlib.sha256).digest()
    return hmac.new(prk, b"rdcp3 control key\x01", hashlib.sha256).digest()


def ctrl_tag(ck, direction, seq, covered):
    """The 16-byte tag of the message bytes covered (flag and total length
    already set), the seq-th tagged one in direction."""
    return hmac.new(ck, struct.pack(">IQ", direction, seq) + covered,
                    hashlib.sha256).digest()[:TAG_LEN]


def add_tag(ck, direction, seq, buf):
    """buf (an untagged message) flagged, lengthened and tagged."""
    b = bytearray(buf)
    b[1] |= TAGGED
    struct.pack_into(">I", b, 4, len(buf) + TAG_LEN)
    return bytes(b) + ctrl_tag(ck, direction, seq, bytes(b))


def lane_proof(key, nonce_c, nonce_s, token, lane, n):
    """A lane's join proof (transfer/session/auth.c auth_lane_proof): 16 bytes of
    HMAC-SHA256(HKDF(key, nonces, "rdcp3 lane key"), token || lane u16 ||
    n u16); zero without a key."""
    if key is None:
        return bytes(16)
    prk = hmac.new(nonce_c + nonce_s, key, hashlib.sha256).digest()
    kl = hmac.new(prk, b"rdcp3 lane key\x01", hashlib.sha256).digest()
    return hmac.new(kl, token + struct.pack(">HH", lane, n),
                    hashlib.sha256).digest()[:16]


def join_encode(token, lane, proof, slots=4, chunk_size=65536, **pd):
    """A lane's 52-byte join (cm/cm_int.h PD_JOIN_LEN): the connect data
    with status 4 (join), then token, lane u16, 2 zero bytes, proof."""
    return (pd_encode(status=4, slots=slots, chunk_size=chunk_size, **pd) +
            token + struct.pack(">H2x", lane) + proof)


def resume_key(dkey=None):
    """The key of the --resume chunk digests (transfer/session/payload.c): HKDF of
    the data key with --encrypt, else 32 zero bytes."""
    if dkey is None:
        return bytes(32)
    prk = hmac.new(bytes(32), dkey, hashlib.sha256).digest()
    return hmac.new(prk, b"rdcp1 resume key\x01", hashlib.sha256).digest()


def chunk_sum(rkey, file_id, index, data):
    """A chunk's --resume digest (transfer/session/payload.c payload_resume_sum)."""
    msg = b"rdcp1 chunk" + struct.pack(">IQ", file_id, index) + \
        hashlib.sha256(data).digest()
    return hmac.new(rkey, msg, hashlib.sha256).digest()[:SUM_LEN]


def data_key(key, nonce_c, nonce_s):
    """The --encrypt session key: HKDF-SHA256 (RFC 5869), 32 bytes."""
    prk = hmac.new(nonce_c + nonce_s, key, hashlib.sha256).digest()
    return hmac.new(prk, b"rdcp1 data key\x01", hashlib.sha256).digest()


# ---------------------------------------------------------------- messages

# Body layout per type: (name, struct code) or a variable-length kind:
# "str" u16 length + bytes, "dig" u8 length + bytes, "paths" u16 length +
# bytes (HELLO paths and filters; npaths and nfilters are fields of their
# own), "sums" u16 count + 16 bytes each (a list of bytes), "bits" u16
# count + ceil(count / 8) bytes, bit i % 8 of byte i // 8 (a list of
# bools).
SPEC = {
    HELLO: [("role", "H"), ("csum", "B"), ("level", "B"), ("flags", "I"),
            ("features", "I"), ("chunk_size", "I"), ("bwlimit", "Q"),
            ("nonce", "32s"), ("npaths", "H"), ("paths", "paths"),
            ("nfilters", "H"), ("filters", "paths"), ("streams", "B"),
            # --sync's level (wire/wire_hello.h's enum wire_sync), 0: none
            ("sync", "B")],
    WELCOME: [("status", "i"), ("features", "I"), ("nonce", "32s"),
              ("mac", "32s"), ("message", "str"), ("streams", "B"),
              ("token", "8s"),
              # rails (doc/PROTOCOL.md: Rails): 0, or R and for
              # rails 1..R-1 family u8 + addr[16] each in rail_addrs
              ("rails", "B"), ("rail_addrs", "tail")],
    RING: [("addr", "Q"), ("rkey", "I"), ("slots", "H"), ("chunk_size", "I"),
           ("hdr_addr", "Q"),
           # target: 0 DEST is a directory, 1 DEST names the one entry
           ("target", "B"),
           # rails: 0, or R and an rkey u32 for rails 1..R-1 in rail_rkeys
           ("rails", "B"), ("rail_rkeys", "tail")],
    FILE: [("file_id", "I"), ("kind", "B"), ("flags", "I"), ("size", "Q"),
           ("mode", "I"), ("mtime", "q"), ("mtime_ns", "I"), ("atime", "q"),
           ("atime_ns", "I"), ("path", "str"), ("link", "str"),
           # with flags & FILE_RANGE: range_fields(); else empty
           ("range", "tail")],
    FILE_END: [("file_id", "I"), ("flags", "I"), ("nchunks", "Q"),
               ("seq_end", "Q"), ("csum", "B"), ("digest", "dig"), ("status", "i"),
               ("message", "str")],
    FILE_RESULT: [("file_id", "I"), ("status", "i"), ("flags", "I"),
                  ("sent", "Q"), ("digest", "dig"), ("message", "str")],
    DONE: [("flags", "I"), ("max_delete", "Q"), ("seq_end", "Q")],
    BYE: [("files_ok", "Q"), ("files_failed", "Q"), ("bytes", "Q")],
    ERROR: [("status", "i"), ("klass", "I"), ("message", "str")],
    CREDIT: [],
    AUTH: [("mac", "32s")],
    HAVE: [("file_id", "I"), ("flags", "H"), ("status", "i")],
    PACK_DONE: [("first_id", "I"), ("count", "I")],
    # entries kept as they are (--sync, -n, -u): HAVE SKIP + FILE_RESULT
    KEPT: [("first_id", "I"), ("count", "I")],
    SUMS: [("file_id", "I"), ("first", "Q"), ("sums", "sums")],
    MATCH: [("file_id", "I"), ("first", "Q"), ("bits", "bits")],
    DELETED: [("kind", "B"), ("flags", "B"), ("status", "i"), ("path", "str"),
              ("message", "str")],
    DELETE_END: [("status", "i"), ("count", "Q"), ("message", "str")],
    # names: count NUL-terminated names, back to back (names_body())
    NAMES: [("flags", "H"), ("count", "H"), ("names", "paths")],
    # seq_end (FILE_END, DONE, NAMES_ACK): slots written before it
    NAMES_ACK: [("done", "Q"), ("seq_end", "Q")],
    # what the receiver could not keep (a push's client is told)
    NOTICE: [("message", "str")],
    # -X/-A: count entries in data (u8 name length, u16 value length, name,
    # value), before the FILE of file_id (flag FILE_XATTRS)
    XATTRS: [("file_id", "I"), ("count", "H"), ("data", "str")],
    # the lanes that carry data once the receiver stopped taking joins
    LANES: [("up", "B")],
    # count entry messages back to back, each untagged with zero acks;
    # Conn hands them out one by one (batch_split())
    BATCH: [("count", "H"), ("body", "tail")],
    # FEAT_ANY_SLOT: ring slots the sink released, by index, in any order
    # ("slots": u16 count, then u16 each); slot_ack then counts them all
    FREED: [("slots", "slots")],
}
BATCH_MAY = (FILE, XATTRS, FILE_END, HAVE, FILE_RESULT, KEPT)


def batch_split(m):
    """The messages of BATCH m, each with the BATCH's acks."""
    out, off, body = [], 0, m.body
    while off < len(body):
        if len(body) - off < 16:
            raise PeerError("BATCH cut inside a header")
        (total,) = struct.unpack_from(">I", body, off + 4)
        inner = decode(body[off:off + total])
        if (inner.type not in BATCH_MAY or total < 16 or
                off + total > len(body) or body[off + 1] or
                any(body[off + 8:off + 16])):
            raise PeerError("BATCH holds %r" % inner)
        inner.ctrl_ack, inner.slot_ack = m.ctrl_ack, m.slot_ack
        out.append(inner)
        off += total
    if len(out) != m.count or len(out) < 2:
        raise PeerError("BATCH of %d messages says %d" % (len(out), m.count))
    return out


def batch(msgs):
    """A BATCH of msgs (Msgs, their acks zero), as a peer would send it."""
    return Msg(BATCH, count=len(msgs),
               body=b"".join(encode(x, 0, 0) for x in msgs))
_VAR = {"str": b"", "dig": b"", "paths": b"", "sums": (), "bits": (),
        "slots": (),
        "tail": b""}
# FILE flags; OWNER: the owner tail follows (not written by Entry)
FILE_SPARSE, FILE_RANGE, FILE_OWNER, FILE_XATTRS, FILE_LINKED = 1, 2, 4, 8, 16


def rdev(major, minor):
    """A device's number as FILE kind 5 carries it in size."""
    return major << 32 | minor
RESULT_FINAL = 8  # FILE_RESULT flag: a range's, the file placed


def range_fields(off, length, idx, count, token):
    """FILE's tail with FILE_RANGE: offset, length, index, count, token."""
    return struct.pack(">QQII16s", off, length, idx, count, token)


class Msg:
    """A control message: type, ctrl_ack, slot_ack (None: Conn fills them
    in when it sends) and the body fields of SPEC as attributes; missing
    fields are 0 or empty, str fields may be given as str."""

    def __init__(self, type, ctrl_ack=None, slot_ack=None, **fields):
        self.type, self.ctrl_ack, self.slot_ack = type, ctrl_ack, slot_ack
        for name, code in SPEC.get(type, []):
            # lanes (--streams): 1 unless told
            v = fields.pop(name, 1 if name == "streams" else
                           _VAR.get(code, 0))
            if code[-1] == "s" and code not in _VAR and not v:
                v = bytes(int(code[:-1]))
            setattr(self, name, _b(v) if isinstance(v, str) else v)
        if fields:
            raise TypeError("%s has no field %s" % (self.name, list(fields)))

    @property
    def name(self):
        return TYPE_NAMES.get(self.type, "type%d" % self.type)

    def __repr__(self):
        body = ", ".join("%s=%r" % (n, getattr(self, n))
                         for n, _ in SPEC.get(self.type, []))
        return "%s(%s)" % (self.name, body)


def names_body(names):
    """NAMES' count and names fields for a list of names (str or bytes)."""
    return dict(count=len(names), names=b"".join(_b(n) + b"\0" for n in names))


def name_cost(name):
    """What a name counts against the receiver's window (NAMES_WINDOW)."""
    return len(_b(name)) + 1 + NAME_OVERHEAD


def encode(m, ctrl_ack=0, slot_ack=0):
    """The bytes of m; its own acks win over these defaults."""
    out = []
    for name, code in SPEC.get(m.type, []):
        v = getattr(m, name)
        if code == "tail":
            out.append(v)
        elif code in ("str", "paths"):
            out.append(struct.pack(">H", len(v)) + v)
        elif code == "dig":
            out.append(struct.pack(">B", len(v)) + v)
        elif code == "sums":
            out.append(struct.pack(">H", len(v)) + b"".join(v))
        elif code == "slots":
            out.append(struct.pack(">H%dH" % len(v), len(v), *v))
        elif code == "bits":
            b = bytearray((len(v) + 7) // 8)
            for i, bit in enumerate(v):
                b[i // 8] |= bool(bit) << (i % 8)
            out.append(struct.pack(">H", len(v)) + bytes(b))
        else:
            out.append(struct.pack(">" + code, v))
    body = b"".join(out)
    return struct.pack(">B3xIII", m.type, 16 + len(body),
                       ctrl_ack if m.ctrl_ack is None else m.ctrl_ack,
                       slot_ack if m.slot_ack is None else m.slot_ack) + body


def decode(buf):
    """The Msg in buf; PeerError when it is malformed (lengths only)."""
    if len(buf) < 16:
        raise PeerError("control message of %d bytes" % len(buf))
    t, fl, total, cack, sack = struct.unpack_from(">BB2xIII", buf)
    if t not in SPEC or total != len(buf) or fl & ~TAGGED or (
            fl & TAGGED and len(buf) < 16 + TAG_LEN):
        raise PeerError("bad control header %s" % buf[:16].hex())
    if fl & TAGGED:
        buf = buf[:-TAG_LEN]  # checked by Conn, which knows the key
    m, off = Msg(t, cack, sack), 16
    try:
        for name, code in SPEC[t]:
            if code == "tail":
                v, off = bytes(buf[off:]), len(buf)
            elif code in _VAR:
                f = ">B" if code == "dig" else ">H"
                (n,) = struct.unpack_from(f, buf, off)
                off += struct.calcsize(f)
                if code == "slots":
                    v = list(struct.unpack_from(">%dH" % n, buf, off))
                    n *= 2
                elif code in ("sums", "bits"):
                    count = n
                    n = n * SUM_LEN if code == "sums" else (n + 7) // 8
                    if off + n > len(buf):
                        raise struct.error("short")
                    raw = bytes(buf[off:off + n])
                    v = [raw[i:i + SUM_LEN] for i in range(0, n, SUM_LEN)] \
                        if code == "sums" else \
                        [bool(raw[i // 8] >> (i % 8) & 1) for i in range(count)]
                elif off + n > len(buf):
                    raise struct.error("short")
                else:
                    v = bytes(buf[off:off + n])
                off += n
            else:
                (v,) = struct.unpack_from(">" + code, buf, off)
                off += struct.calcsize(">" + code)
            setattr(m, name, v)
    except struct.error:
        raise PeerError("truncated %s" % m.name) from None
    if off != len(buf):
        raise PeerError("%d trailing bytes in %s" % (len(buf) - off, m.name))
    return m


# ---------------------------------------------------------------- slots

SLOT_FMT = ">QIIQIHHI8x16s"  # 60 bytes, then the header's own CRC32


def slot_hdr(seq, file_id, length, offset, crc, flags=0, raw_len=None,
             tag=bytes(16), hcrc=None):
    """The 64-byte ring slot header; hcrc overrides its CRC32."""
    h = struct.pack(SLOT_FMT, seq, file_id, length, offset, crc, flags, 0,
                    length if raw_len is None else raw_len, tag)
    return h + struct.pack(">I", crc32(h) if hcrc is None else hcrc)


def parse_slot(buf):
    """(dict of the header's fields, payload) of slot bytes (the header,
    then the payload, as a WRITE frame carries them); PeerError on a bad
    CRC."""
    if len(buf) < SLOT_HDR or buf[60:64] != struct.pack(">I", crc32(buf[:60])):
        raise PeerError("bad slot header")
    f = struct.unpack_from(SLOT_FMT, buf)
    keys = ("seq", "file_id", "len", "offset", "crc", "flags", "zero",
            "raw_len", "tag")
    return dict(zip(keys, f)), bytes(buf[SLOT_HDR:])


def imm(seq, slot):
    return (seq & 0xffff) << 16 | (slot & 0xffff)


def pack_record(file_id, path, data, csum=CSUM_CRC32, mode=0o644, mtime=0,
                mtime_ns=0, atime=0, atime_ns=0, flags=0, status=0,
                digest=None, size=None):
    """(record bytes, its header+digest+path part for the slot CRC)."""
    path, data = _b(path), _b(data)
    dg = pack_digest(csum, data) if digest is None else digest
    head = struct.pack(">IBBHIqIqIIi", file_id, flags, len(dg), len(path),
                       mode, mtime, mtime_ns, atime, atime_ns,
                       len(data) if size is None else size, status) + dg + path
    return head + data, head


def pack_slot(records):
    """(payload, slot CRC) of pack_record() results, in order."""
    c = 0
    for _, head in records:
        c = crc32(head, c)
    return b"".join(r for r, _ in records), c


def parse_pack(payload, count):
    """The records of a packed payload: a list of dicts (path, data...)."""
    out, pos = [], 0
    for _ in range(count):
        (fid, fl, dlen, plen, mode, mt, mtn, at, atn, size,
         st) = struct.unpack_from(">IBBHIqIqIIi", payload, pos)
        pos += 44
        dg, pos = payload[pos:pos + dlen], pos + dlen
        path, pos = payload[pos:pos + plen], pos + plen
        data, pos = payload[pos:pos + size], pos + size
        out.append(dict(file_id=fid, flags=fl, digest=dg, path=path,
                        mode=mode, mtime=mt, mtime_ns=mtn, atime=at,
                        atime_ns=atn, status=st, data=data))
    if pos != len(payload):
        raise PeerError("packed slot: %d bytes left" % (len(payload) - pos))
    return out


# ---------------------------------------------------------------- transport

def pd_encode(status=0, slots=4, chunk_size=65536,
              ctrl_size=CTRL_SIZE, credits=CTRL_CREDITS, magic=MAGIC,
              version=VERSION):
    """The 24-byte connect private data (cm/common.c)."""
    return struct.pack(">IHHIHHI4x", magic, version, status, ctrl_size,
                       credits, slots, chunk_size)


def pd_decode(b):
    """dict(magic, version, status, ctrl_size, credits, slots, chunk_size)."""
    keys = ("magic", "version", "status", "ctrl_size", "credits", "slots",
            "chunk_size")
    return dict(zip(keys, struct.unpack(">IHHIHHI4x", b[:24])))


def frame(op, payload, imm=0, slot=0, length=None):
    """One cm/tcp.c frame: op u8, 3 zero bytes, len, imm, slot, payload.
    A WRITE's payload is the 64-byte slot header and then the slot's
    payload: its len counts the latter only."""
    n = len(payload) if length is None else length
    if op == FR_WRITE and length is None:
        n = max(n - SLOT_HDR, 0)
    return struct.pack(">B3xIII", op, n, imm, slot) + payload


class Conn:
    """One TCP connection after the connect exchange: frames, control
    credits and ring credits as the engine keeps them (transfer/session/credit.h).

    poll() returns ("msg", Msg) or ("data", imm, slot, bytes), or None at
    the deadline; send() and write() wait (bounded) for credits, keeping
    what arrives meanwhile for poll(). With auto on, poll() sends a CREDIT
    when half the peer's credits are unacked, a quarter of the ring is
    released and unreported, or nothing was sent for KEEPALIVE_S."""

    def __init__(self, sock, geom, timeout=10.0):
        self.sock, self.geom, self.timeout = sock, geom, timeout
        self.slots, self.chunk_size = geom["slots"], geom["chunk_size"]
        self.credits = geom["credits"]
        self.rbuf, self.backlog = bytearray(), []
        self.sent = self.acked = self.consumed = self.reported = 0
        self.posted = self.slot_acked = 0      # as a data source
        self.received = self.released = self.slot_reported = 0  # as a sink
        self.last_tx = time.monotonic()
        self.auto = self.auto_release = True
        self.tamper = self.tamper_write = None
        # control message tags (protocol 3), once the handshake has a key
        self.ck, self.tx_dir, self.rx_dir = None, 0, 0
        self.tx_tags = self.rx_tags = False
        self.tx_seq = self.rx_seq = 0
        self.log = []  # (direction, Msg or ("data", seq)) for diagnostics
        # FEAT_ANY_SLOT (use_any_slot()): as a source, the slots free,
        # oldest first; as a sink, the slots taken and not yet in a FREED
        self.any_slot, self.free, self.unfreed = False, None, []

    def use_any_slot(self):
        """Slots released and reused in any order, as both sides agreed:
        a source writes into the slot free longest, a sink names what it
        releases in FREED (and released counts the slots named)."""
        self.any_slot, self.free = True, collections.deque(range(self.slots))

    def free_slots(self, slots):
        """A FREED naming slots (whatever they are: a test may lie)."""
        self.released += len(slots)
        self.send(Msg(FREED, slots=list(slots)))

    @classmethod
    def connect(cls, host, port, timeout=10.0, **pd):
        s = socket.create_connection((host, port), timeout=timeout)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        s.sendall(pd_encode(**pd))
        ans = _recv_exact(s, 24, timeout)
        g = pd_decode(ans)
        if g["magic"] != MAGIC or g["version"] != VERSION or g["status"]:
            s.close()
            raise ConnectRefused(g)
        return cls(s, g, timeout)

    @classmethod
    def accept(cls, lsock, timeout=10.0, status=0, **override):
        """Accepts one client, answers its private data with its own
        geometry (or override's fields); status != 0 refuses it."""
        lsock.settimeout(timeout)
        try:
            s, _ = lsock.accept()
        except socket.timeout:
            raise PeerTimeout("no client within %.1f s" % timeout) from None
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        g = pd_decode(_recv_exact(s, 24, timeout))
        keys = ("slots", "chunk_size", "ctrl_size", "credits")
        ans = dict({k: g[k] for k in keys}, status=status)
        ans.update(override)
        s.sendall(pd_encode(**ans))
        if status:
            s.close()
            return None
        return cls(s, dict(g, **ans), timeout)

    def close(self):
        try:
            self.sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        self.sock.close()

    # raw frames
    def send_frame(self, op, payload, imm=0, slot=0, length=None):
        self.sock.sendall(frame(op, payload, imm, slot, length))
        self.last_tx = time.monotonic()

    def recv_frame(self, timeout):
        """(op, imm, slot, payload) of the next frame, None at timeout; a
        WRITE's payload is its slot header and then the slot's payload."""
        deadline = time.monotonic() + timeout
        while True:
            if len(self.rbuf) >= 16:
                op, n, im, sl = struct.unpack_from(">B3xIII", self.rbuf)
                if op == FR_WRITE:
                    n += SLOT_HDR
                if len(self.rbuf) >= 16 + n:
                    data = bytes(self.rbuf[16:16 + n])
                    del self.rbuf[:16 + n]
                    return op, im, sl, data
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.sock], [], [], left)[0]:
                return None
            try:
                b = self.sock.recv(1 << 20)
            except OSError as e:
                raise Closed("connection reset: %s" % e) from None
            if not b:
                raise Closed("peer closed the connection")
            self.rbuf += b

    def start_tags(self, ck, server):
        """The control key; tx_tags and rx_tags then turn tagging on."""
        self.ck = ck
        self.tx_dir = DIR_TO_CLIENT if server else DIR_TO_SERVER
        self.rx_dir = DIR_TO_SERVER if server else DIR_TO_CLIENT

    # control channel
    def send(self, m, ack_only=False, wait=True):
        """Sends m (a Msg, or bytes sent as they are: never tagged) through
        tamper, once control credits allow (an ordinary message needs 2, an
        ack-only 1; wait=False ignores them). With tx_tags on, each Msg gets
        the tag of the next sequence number."""
        out = self.tamper(m) if self.tamper and isinstance(m, Msg) else m
        if not isinstance(out, list):
            out = [] if out is None else [out]
        for one in out:
            need = 1 if ack_only else 2
            while wait and self.credits - (self.sent - self.acked) < need:
                ev = self._poll_once(self.timeout)
                self.backlog.append(ev)
            buf = one if isinstance(one, bytes) else encode(
                one, self.consumed & 0xffffffff, self.released & 0xffffffff)
            if self.tx_tags and not isinstance(one, bytes):
                buf = add_tag(self.ck, self.tx_dir, self.tx_seq, buf)
                self.tx_seq += 1
            self.sent += 1
            self.reported, self.slot_reported = self.consumed, self.released
            self.log.append((">", one))
            self.send_frame(FR_SEND, buf)

    def credit(self):
        """An ack-only CREDIT (also the keepalive)."""
        self.send(Msg(CREDIT), ack_only=True)

    def write(self, buf, seq=None, slot=None):
        """Writes slot bytes (header + payload) for chunk seq (default the
        next) into slot seq % N (any slot: the one free longest; or slot)
        with its immediate, once a ring credit is free. Returns the seq
        used."""
        seq = self.posted if seq is None else seq
        while self.slots - (self.posted - self.slot_acked) < 1 or (
                self.any_slot and slot is None and not self.free):
            self.backlog.append(self._poll_once(self.timeout))
        if slot is None:
            slot = self.free.popleft() if self.any_slot else seq % self.slots
        if self.tamper_write:
            buf = self.tamper_write(seq, buf)
        self.posted += 1
        self.log.append((">", ("data", seq)))
        if buf is not None:
            self.send_frame(FR_WRITE, buf, imm(seq, slot), slot)
        return seq

    def _poll_once(self, timeout):
        ev = self.poll(timeout, backlog=False)
        if ev is None:
            raise PeerTimeout("no word from the peer for %.1f s" % timeout)
        return ev

    def poll(self, timeout=None, backlog=True):
        """The next event (see the class), None after timeout seconds."""
        if backlog and self.backlog:
            return self.backlog.pop(0)
        deadline = time.monotonic() + (self.timeout if timeout is None
                                       else timeout)
        while True:
            self._auto_acks()
            left = min(deadline - time.monotonic(), 0.1)
            fr = self.recv_frame(max(left, 0))
            if fr:
                return self._account(fr)
            if time.monotonic() >= deadline:
                return None

    def _auto_acks(self):
        if not self.auto:
            return
        if self.unfreed and self.credits - (self.sent - self.acked) >= 2:
            slots, self.unfreed = self.unfreed, []
            self.free_slots(slots)
            return
        due = (self.consumed - self.reported >= max(self.credits // 2, 1) or
               self.released - self.slot_reported >= max(self.slots // 4, 1)
               or (self.released != self.slot_reported and
                   self.received == self.released) or
               time.monotonic() - self.last_tx >= KEEPALIVE_S)
        if due and self.credits - (self.sent - self.acked) >= 1:
            self.credit()

    def _account(self, fr):
        op, im, sl, data = fr
        if op == FR_WRITE:
            self.received += 1
            if self.auto_release and self.any_slot:
                self.unfreed.append(sl)
            elif self.auto_release:
                self.released += 1
            self.log.append(("<", ("data", im)))
            return ("data", im, sl, data)
        if op != FR_SEND:
            raise PeerError("frame op %d from the peer" % op)
        tagged = len(data) >= 16 + TAG_LEN and data[1] & TAGGED
        if self.rx_tags:
            if not tagged or not hmac.compare_digest(
                    data[-TAG_LEN:], ctrl_tag(self.ck, self.rx_dir,
                                              self.rx_seq, data[:-TAG_LEN])):
                raise PeerError("control message %d failed its tag" %
                                self.rx_seq)
            self.rx_seq += 1
        elif tagged:
            raise PeerError("a tagged control message before the key")
        m = decode(data)
        self.consumed += 1
        self.acked += (m.ctrl_ack - self.acked) & 0xffffffff
        self.slot_acked += (m.slot_ack - self.slot_acked) & 0xffffffff
        if m.type == FREED and self.any_slot:
            self.free.extend(m.slots)
        if m.type == BATCH:  # its messages one by one, in order
            inner = batch_split(m)
            self.log.extend(("<", i) for i in inner)
            self.backlog.extend(("msg", i) for i in inner[1:])
            return ("msg", inner[0])
        self.log.append(("<", m))
        return ("msg", m)

    def recv(self, timeout=None, skip_credit=True):
        """The next control message (data frames on the way are an error;
        CREDITs skipped); raises RemoteError on ERROR, PeerTimeout."""
        while True:
            ev = self.poll(timeout)
            if ev is None:
                raise PeerTimeout("no message within %s s" % (
                    self.timeout if timeout is None else timeout))
            if ev[0] == "data":
                raise PeerError("unexpected data write (imm 0x%08x)" % ev[1])
            m = ev[1]
            if m.type == ERROR:
                raise RemoteError(m)
            if not (skip_credit and m.type == CREDIT):
                return m

    def expect(self, mtype, timeout=None):
        m = self.recv(timeout)
        if m.type != mtype:
            raise PeerError("got %r where %s was expected" % (m, TYPE_NAMES[mtype]))
        return m

    def wait_closed(self, timeout=None):
        """True once the peer closed (draining what comes), False at the
        deadline; what it sent meanwhile stays in the log."""
        deadline = time.monotonic() + (timeout or self.timeout)
        try:
            while time.monotonic() < deadline:
                self.poll(min(0.2, deadline - time.monotonic()))
        except (Closed, PeerError):
            return True
        return False


def _recv_exact(s, n, timeout):
    s.settimeout(timeout)
    b = b""
    try:
        while len(b) < n:
            c = s.recv(n - len(b))
            if not c:
                raise Closed("closed during the connect exchange")
            b += c
    except socket.timeout:
        raise PeerTimeout("connect exchange timed out") from None
    return b
