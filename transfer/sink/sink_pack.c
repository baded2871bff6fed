/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * The sink's packed slots (wire_slot.h): many small files whole in one slot.
 * The engine thread reserves their ids as the slot arrives; one worker
 * checks every record, then places the files one after the other
 * (an unnamed file linked in under its final name, or a named temporary,
 * data, mode and times, rename); the engine thread then reports them: a
 * FILE_RESULT for each one that failed, then one PACK_DONE for the slot.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "transfer/fs/place.h"
#include "transfer/sink/sink_int.h"
#include "util/checksum.h"
#include "util/clock.h"
#include "util/io.h"
#include "util/log.h"

static void unpack(struct workq_item *item);
static void unpacked(struct workq_item *item);

void sink_pack_free(struct snk_job *j)
{
	for (uint32_t n = 0; n < j->npacked; n++) {
		free(j->packed[n].shown);
		free(j->packed[n].msg);
	}
	free(j->packed);
	j->packed = NULL;
	j->npacked = 0;
	free(j->refused);
	j->refused = NULL;
	j->refused_why = NULL;
	sink_dir_release(j->k, j->dir);
	j->dir = NULL;
}

/* The engine thread: a packed slot came; reserve its ids, unpack it. */
int sink_pack_arrived(struct sink *k, const struct wire_slot_hdr *h,
		      unsigned int slot)
{
	struct snk_job *j = &k->jobs[slot];
	uint64_t count = h->offset;

	if (h->file_id != k->nfiles || h->file_id == 0 || !count ||
	    count > WIRE_PACK_MAX_FILES || count > WIRE_FILES_MAX - k->nfiles ||
	    h->len > k->chunk_size || h->raw_len > k->chunk_size ||
	    !sink_flags_ok(k, h->flags & ~WIRE_SLOT_PACKED) ||
	    (!(h->flags & WIRE_SLOT_COMPRESSED) && h->raw_len != h->len) ||
	    session_asks(k->p))
		return engine_fail(k->e, XFER_FAIL_PROTOCOL, -EPROTO,
				   "%s wrote a bad packed slot (seq %llu)",
				   k->e->c->peer, (unsigned long long)h->seq);
	j->packed = calloc(count, sizeof(*j->packed));
	if (!j->packed)
		return engine_fail(k->e, XFER_FAIL_RESOURCE, -ENOMEM,
				   "out of memory");
	k->nfiles += (uint32_t)count;
	k->active++;
	j->npacked = (uint32_t)count;
	j->h = *h;
	j->f = NULL;
	j->index = 0; /* the IV's: (first id, 0) */
	j->status = 0;
	j->t0 = clock_now_s();
	j->item.fn = unpack;
	j->item.after = unpacked;
	/* Its files lie where the walk is: nothing there is finished first. */
	j->dir = sink_dir_hold(k);
	/* ... and come after the entries before it, in a list's order. */
	j->list_lo = sink_list_pos(k);
	k->bytes_told += h->raw_len; /* announced as they come */
	sink_progress(k, k->t->shown, h->raw_len);
	workq_push(k->e->wq, &j->item);
	return 0;
}

/*
 * One worker's state across a pack: the O_PATH fd of the last parent,
 * reused while the files share it, and whether linking in unnamed files
 * stopped working (the names exist, or the file system cannot).
 */
struct parent_cache {
	int fd;
	bool named;
	char rel[PATH_PEER_MAX + PATH_NAME_MAX + 2];
};

static int cached_parent(const struct sink *k, struct parent_cache *pc,
			 struct snk_names *n)
{
	const char *slash = strrchr(n->rel, '/');
	size_t len = slash ? (size_t)(slash - n->rel) : 0;

	if (!slash)
		return k->t->dirfd;
	if (pc->fd >= 0 && strlen(pc->rel) == len &&
	    !memcmp(pc->rel, n->rel, len))
		return pc->fd;
	if (pc->fd >= 0)
		close(pc->fd);
	pc->fd = sink_open_parent(k, n);
	if (pc->fd < 0) {
		int rc = pc->fd;

		pc->fd = -1;
		return rc;
	}
	memcpy(pc->rel, n->rel, len);
	pc->rel[len] = '\0';
	return pc->fd;
}

static void packed_fail(struct snk_packed *res, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void packed_fail(struct snk_packed *res, int err, const char *fmt, ...)
{
	va_list ap;

	res->status = err;
	va_start(ap, fmt);
	if (vasprintf(&res->msg, fmt, ap) < 0)
		res->msg = NULL;
	va_end(ap);
}

/* Worker: a packed file's data, mode, times (and fsync) into fd. */
static int fill(struct sink *k, int fd, const struct wire_pack_rec *r,
		bool have_mode, const struct timespec times[2],
		const char **what)
{
	struct snk_owner ow = { 0 };
	int rc;

	if (r->flags & WIRE_PACK_OWNER)
		sink_owner_map(k, &r->owner, &ow);
	*what = "write";
	rc = io_pwrite_full(fd, r->data, r->size, 0);
	if (!rc)
		rc = sink_apply_meta(k, fd, r->mode, have_mode, times, &ow,
				     NULL, what);
	if (rc) {
		if (!strcmp(*what, "mode") || !strcmp(*what, "times"))
			*what = !strcmp(*what, "mode") ? "set mode of"
						       : "set times of";
		return rc;
	}
	if ((k->p->flags & WIRE_HELLO_FSYNC) && fsync(fd) < 0) {
		*what = "fsync";
		return -errno;
	}
	return 0;
}

/*
 * Worker: the quick way to place a packed file under a name not taken
 * yet. An unnamed file (O_TMPFILE) is filled, then linked in under its
 * final name: nobody sees it before it is whole, and no other session can
 * write into it, so there is no temporary to name, lock and rename.
 * Returns 1 when it is in place, 0 when this way does not apply (the name
 * exists, or the file system has no O_TMPFILE: use a named temporary),
 * or -errno with *what.
 */
static int place_unnamed(struct sink *k, int dirfd,
			 const struct wire_pack_rec *r,
			 const struct snk_names *n, mode_t mode,
			 const struct timespec times[2], const char **what)
{
	int fd, rc;

	fd = place_unnamed_open(dirfd, mode);
	if (fd < 0)
		return 0; /* the named way says what is wrong, if anything */
	/*
	 * Made with its mode, unless the umask took bits from it, or -p asks
	 * for it exactly (a default ACL on the directory would override the
	 * mode given at creation).
	 */
	rc = fill(k, fd, r, !(mode & k->t->umask) && !sink_preserving(k), times,
		  what);
	if (!rc) {
		rc = place_unnamed_link(fd, dirfd, n->name);
		if (rc < 0)
			*what = "link into";
	}
	if (io_close(fd) && rc == 1) {
		unlinkat(dirfd, n->name, 0); /* never a doubtful file */
		*what = "write";
		rc = -EIO;
	}
	return rc;
}

static void write_packed(struct sink *k, const struct wire_pack_rec *r,
			 struct snk_names *n, struct parent_cache *pc,
			 struct snk_packed *res, int dirfd);

/* Worker: verifies one record's file and gives it its final name. */
static void place_packed(struct sink *k, const struct wire_pack_rec *r,
			 struct snk_names *n, struct parent_cache *pc,
			 struct snk_packed *res)
{
	const struct sink_budget *b = k->t->budget;
	char msg[WIRE_MSG_MAX + 1];
	uint64_t old = 0;
	int dirfd, rc;

	res->shown = strdup(n->shown);
	res->key = sink_delete_key(r->path, r->path_len, false);
	if (r->flags & WIRE_PACK_ABORT) {
		res->remote = true;
		res->status = r->status;
		res->msg = strndup((const char *)r->data, r->size);
		return;
	}
	res->size = r->size;
	rc = wire_pack_digest((uint8_t)k->p->csum, r->data, r->size,
			      res->digest);
	if (rc < 0)
		return packed_fail(res, rc, "cannot hash '%s': %s", n->shown,
				   strerror(-rc));
	res->dlen = (uint8_t)rc;
	if (res->dlen != r->digest_len ||
	    memcmp(res->digest, r->digest, res->dlen))
		return packed_fail(res, -EBADMSG,
				   "'%s' failed verification: its digest does "
				   "not match the sender's (corrupted in "
				   "transit?); not placed",
				   n->shown);
	dirfd = cached_parent(k, pc, n);
	if (dirfd < 0)
		return packed_fail(res, dirfd,
				   "cannot open the directory of '%s': %s",
				   n->shown, strerror(-dirfd));
	/* the receiver's byte limits, before anything is written */
	if (b) {
		old = sink_old_bytes(dirfd, n->name);
		if (b->take(b->arg, r->size, old, &res->rule, msg, sizeof(msg)))
			return packed_fail(res, -EDQUOT, "'%s' refused: %s",
					   n->shown, msg);
	}
	write_packed(k, r, n, pc, res, dirfd);
	if (b && res->status)
		b->give_back(b->arg, r->size, old);
}

/* Worker: a verified packed file into dirfd under its final name. */
static void write_packed(struct sink *k, const struct wire_pack_rec *r,
			 struct snk_names *n, struct parent_cache *pc,
			 struct snk_packed *res, int dirfd)
{
	struct timespec times[2] = {
		{ .tv_sec = r->atime_sec, .tv_nsec = r->atime_nsec },
		{ .tv_sec = r->mtime_sec, .tv_nsec = r->mtime_nsec },
	};
	mode_t mode = sink_final_mode(k, r->mode);
	char msg[WIRE_MSG_MAX + 1];
	const char *what;
	int fd, rc;
	bool fresh;

	if (!pc->named) {
		rc = place_unnamed(k, dirfd, r, n, mode, times, &what);
		if (rc == 1)
			return;
		if (rc < 0)
			return packed_fail(res, rc, "cannot %s '%s': %s", what,
					   n->shown, strerror(-rc));
		pc->named = true; /* for the rest of this pack */
	}
	/*
	 * 0600 while it has a name and is not whole: a temporary that a
	 * killed session leaves must stay writable for the next one.
	 */
	fd = place_tmp_open(dirfd, n->tmp, false, 0600, &fresh, &what);
	if (fd < 0) {
		if (place_tmp_failed(fd, what, n->shown, msg, sizeof(msg)))
			unlinkat(dirfd, n->tmp, 0);
		return packed_fail(res, fd == -EWOULDBLOCK ? -EBUSY : fd, "%s",
				   msg);
	}
	rc = fill(k, fd, r, false, times, &what);
	if (rc) {
		close(fd);
	} else {
		what = "write";
		rc = io_close(fd);
	}
	if (!rc && renameat(dirfd, n->tmp, dirfd, n->name) < 0) {
		what = "rename into";
		rc = -errno;
	}
	if (rc) {
		unlinkat(dirfd, n->tmp, 0);
		packed_fail(res, rc, "cannot %s '%s': %s", what, n->shown,
			    strerror(-rc));
	}
}

/*
 * Worker: whether every record of a well-formed pack lies where the walk
 * was when the pack came (in a directory still open then, so none that is
 * finished: sink_dir.c) and, on a pull, is a name asked for. 0, or -EACCES
 * with the first that is not in j->refused.
 */
static int check_entries(struct sink *k, struct snk_job *j, const uint8_t *raw)
{
	struct wire_pack_rec r;
	char path[PATH_PEER_MAX + 1];
	uint64_t list_pos = j->list_lo;
	size_t pos = 0;

	for (uint32_t i = 0; i < j->npacked; i++) {
		if (wire_pack_next(raw, j->h.raw_len, &pos, &r))
			return -EPROTO;
		memcpy(path, r.path, r.path_len);
		path[r.path_len] = '\0';
		j->refused_why = sink_want_check(k, r.file_id, WIRE_KIND_FILE,
						 path, &list_pos);
		if (!j->refused_why && !sink_dir_holds(j->dir, path))
			j->refused_why = SINK_DIR_NOT_NOW;
		if (j->refused_why) {
			j->refused = strdup(path);
			return -EACCES;
		}
	}
	return 0;
}

/*
 * Worker: a pack's records are all checked (the slot CRC over their
 * headers, digests and paths unless the slot is sealed; ids in order,
 * names beneath DEST, lengths; where the walk was; on a pull, names
 * asked for) before any
 * file is placed, so a damaged or malformed slot places nothing. Each
 * file's data is checked against its own digest as it is placed. Returns
 * 0, -EBADMSG, -EPROTO or -EACCES (check_entries).
 */
static int check_pack(struct sink *k, struct snk_job *j, const uint8_t *raw)
{
	struct wire_pack_rec r;
	char path[PATH_PEER_MAX + 1];
	size_t pos = 0, start;
	uint32_t crc = 0;
	int rc = 0;

	for (uint32_t i = 0; !rc && i < j->npacked; i++) {
		start = pos;
		if (wire_pack_next(raw, j->h.raw_len, &pos, &r) ||
		    r.file_id != j->h.file_id + i ||
		    /* an owner only when -o/-g asked for it */
		    ((r.flags & WIRE_PACK_OWNER) && !sink_owners_asked(k))) {
			rc = -EPROTO;
			break;
		}
		crc = ck_crc32(crc, raw + start, pos - start - r.size);
		memcpy(path, r.path, r.path_len);
		path[r.path_len] = '\0';
		if (sink_check_path(k, r.file_id, path))
			rc = -EPROTO;
	}
	if (!rc && pos != j->h.raw_len)
		rc = -EPROTO;
	/* A damaged slot says it first: its records cannot be trusted. */
	if (!(j->h.flags & WIRE_SLOT_ENCRYPTED) && crc != j->h.crc &&
	    (rc || pos == j->h.raw_len))
		rc = -EBADMSG;
	/* Only an intact slot says what the peer meant to send. */
	if (!rc)
		rc = check_entries(k, j, raw);
	return rc;
}

static void unpack(struct workq_item *item)
{
	struct snk_job *j = (struct snk_job *)item;
	struct sink *k = j->k;
	struct parent_cache *pc = NULL;
	struct wire_pack_rec r;
	struct snk_names *n = NULL;
	const uint8_t *raw;
	char path[PATH_PEER_MAX + 1];
	size_t pos = 0;

	j->status = sink_open_payload(k, j, &raw);
	if (!j->status)
		j->status = check_pack(k, j, raw);
	if (!j->status) {
		pc = malloc(sizeof(*pc));
		n = malloc(sizeof(*n));
		j->status = pc && n ? 0 : -ENOMEM;
	}
	if (pc) {
		pc->fd = -1;
		pc->named = false;
	}
	for (uint32_t i = 0; !j->status && i < j->npacked; i++) {
		/* Checked above; an unsealed slot may have changed since
		 * (only a writer of the ring can): each record is checked
		 * again. A sealed one is in the job's own memory. */
		if (wire_pack_next(raw, j->h.raw_len, &pos, &r)) {
			j->status = -EPROTO;
			break;
		}
		memcpy(path, r.path, r.path_len);
		path[r.path_len] = '\0';
		if (sink_map_names(k, r.file_id, path, n)) {
			j->status = -EPROTO;
			break;
		}
		place_packed(k, &r, n, pc, &j->packed[i]);
	}
	if (pc && pc->fd >= 0)
		close(pc->fd);
	free(pc);
	free(n);
}

/* A FILE_RESULT for a packed file that failed here. */
static int send_failed(struct sink *k, uint32_t id, int status, const char *msg)
{
	struct wire_msg m = { .type = WIRE_FILE_RESULT };

	m.u.result.file_id = id;
	m.u.result.status = status;
	snprintf(m.u.result.msg, sizeof(m.u.result.msg), "%s", msg);
	return engine_send(k->e, &m);
}

/* The engine thread: report a pack's files, release its slot. */
static void pack_done(struct sink *k, struct snk_job *j)
{
	struct wire_msg m = { .type = WIRE_PACK_DONE };
	uint32_t first = j->h.file_id;
	char why[WIRE_MSG_MAX + 1] = "";
	char shown[64];

	if (j->refused_why) {
		sink_want_refuse(k, j->refused ? j->refused : "?",
				 j->refused_why);
		goto out;
	}
	if (j->status == -EPROTO) {
		engine_fail(k->e, XFER_FAIL_PROTOCOL, -EPROTO,
			    "%s wrote a malformed packed slot (seq %llu)",
			    k->e->c->peer, (unsigned long long)j->h.seq);
		goto out;
	}
	if (j->status == -EBADMSG)
		snprintf(why, sizeof(why),
			 "%u small files packed in chunk %llu failed its %s "
			 "check (corrupted in transit); none placed",
			 j->npacked, (unsigned long long)j->h.seq,
			 j->h.flags & WIRE_SLOT_ENCRYPTED ? "AES-GCM"
							  : "CRC32");
	else if (j->status)
		snprintf(why, sizeof(why), "cannot unpack %u small files: %s",
			 j->npacked, strerror(-j->status));
	if (j->status)
		log_err("%s", why);
	for (uint32_t i = 0; i < j->npacked; i++) {
		struct snk_packed *res = &j->packed[i];
		int status = j->status ? j->status : res->status;
		const char *msg = j->status  ? why
				  : res->msg ? res->msg
					     : strerror(-status);
		struct xfer_file_report r = {
			.path = res->shown,
			.kind = "file",
			.bytes = res->size,
		};

		if (!r.path) {
			snprintf(shown, sizeof(shown), "(packed file %u)",
				 first + i);
			r.path = shown;
		}
		sink_user_report(k, &r, NULL, 0);
		r.done = true;
		r.seconds = clock_now_s() - j->t0;
		r.sent = status ? 0 : res->size;
		r.status = status;
		r.klass = engine_klass_of(status, res->remote);
		r.message = status ? msg : NULL;
		r.rule = status == -EDQUOT ? res->rule : NULL;
		sink_user_report(k, &r, res->digest, status ? 0 : res->dlen);
		sink_tally(k, r.path, res->size, status, res->remote,
			   j->status ? NULL : msg, false);
		k->st->files_packed += !status;
		if (sink_deleting(k) && res->key &&
		    sink_delete_note(k, res->key))
			goto out;
		if (status && !res->remote &&
		    send_failed(k, first + i, status, msg))
			goto out;
	}
	m.u.pack_done.first_id = first;
	m.u.pack_done.count = j->npacked;
	if (engine_send(k->e, &m))
		goto out;
	k->active--;
out:
	sink_pack_free(j);
	if (credit_rx_drain(&k->rx, j->slot))
		engine_fail(k->e, XFER_FAIL_INTERNAL, -EPROTO,
			    "slot accounting");
}

/* The engine thread: a worker placed a pack's files. */
static void unpacked(struct workq_item *item)
{
	struct snk_job *j = (struct snk_job *)item;

	pack_done(j->k, j);
}
