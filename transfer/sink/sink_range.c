/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Byte ranges of one file sent by several sessions at once (rdcp-mpi's
 * split, doc/PROTOCOL.md: Ranges). Every range of a file goes into
 * one temporary, .NAME.rdcp-part, shared (flock LOCK_SH: a whole-file
 * copy of the same name, which takes LOCK_EX, is kept out), each session
 * holding an OFD write lock on its own bytes. Beside it .NAME.rdcp-ranges
 * holds the split's state under an exclusive OFD lock:
 *
 *   header (48): magic "RDCPRNG1", token[16], size u64, mtime s i64,
 *                ns u32, count u32
 *   count records (24): offset u64, length u64, state u8 (0 missing,
 *                1 verified, 2 failed), seen u8 (1: joined in the job of
 *                the header's token), 2 zero bytes, CRC32 u32
 *
 * all big-endian. A range's record is written (pwrite, fdatasync) once
 * its bytes are verified and on disk; the session that verifies the last
 * one, still holding the lock, checks that the ranges tile the file,
 * combines their CRCs in offset order into the file's, sets mode and
 * times, fsyncs, renames the temporary to NAME and removes the state.
 * Nothing else ever gives the temporary its final name.
 */
#include <assert.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "transfer/fs/place.h"
#include "transfer/sink/sink_int.h"
#include "util/be_codec.h"
#include "util/checksum.h"
#include "util/clock.h"
#include "util/io.h"
#include "util/log.h"

static const char RNG_MAGIC[8] = "RDCPRNG1";

static int ofd_lock(int fd, short type, uint64_t off, uint64_t len)
{
	struct flock fl = { .l_type = type,
			    .l_whence = SEEK_SET,
			    .l_start = (off_t)off,
			    .l_len = (off_t)len };

	return fcntl(fd, F_OFD_SETLK, &fl) < 0 ? -errno : 0;
}

int sink_rng_lock(int state_fd)
{
	uint64_t end = clock_now_ms() + RNG_LOCK_MS;
	struct timespec nap = { .tv_nsec = 2000000 };

	/*
	 * Sessions hold it for a join or a mark (and the last one for its
	 * placing): milliseconds. Polled, not waited for (F_OFD_SETLKW), so
	 * that another process holding it cannot stall a session forever.
	 */
	for (;;) {
		int rc = ofd_lock(state_fd, F_WRLCK, 0, 0);

		if (rc != -EAGAIN && rc != -EACCES)
			return rc;
		if (clock_now_ms() >= end)
			return -ETIMEDOUT;
		nanosleep(&nap, NULL);
	}
}

void sink_rng_unlock(int state_fd)
{
	(void)ofd_lock(state_fd, F_UNLCK, 0, 0);
}

static void header_encode(uint8_t *h, const struct rng_key *key)
{
	struct be_put w = be_put_init(h, RNG_HDR_LEN);

	be_put_bytes(&w, RNG_MAGIC, 8);
	be_put_bytes(&w, key->token, WIRE_TOKEN_LEN);
	be_put_u64(&w, key->size);
	be_put_u64(&w, (uint64_t)key->mtime_sec);
	be_put_u32(&w, key->mtime_nsec);
	be_put_u32(&w, key->count);
	assert(!w.err && w.off == RNG_HDR_LEN);
}

/* 0 with *key from the file, 1 when it holds no header, or -errno. */
static int header_read(int fd, struct rng_key *key)
{
	uint8_t h[RNG_HDR_LEN];
	ssize_t n = pread(fd, h, sizeof(h), 0);
	struct be_get r;

	if (n < 0)
		return -errno;
	if (n < (ssize_t)sizeof(h) || memcmp(h, RNG_MAGIC, 8))
		return 1;
	r = be_get_init(h + 8, sizeof(h) - 8);
	be_get_bytes(&r, key->token, WIRE_TOKEN_LEN);
	key->size = be_get_u64(&r);
	key->mtime_sec = (int64_t)be_get_u64(&r);
	key->mtime_nsec = be_get_u32(&r);
	key->count = be_get_u32(&r);
	return key->count && key->count <= WIRE_RANGES_MAX ? 0 : 1;
}

static int rec_decode(const uint8_t *b, struct rng_rec *r)
{
	struct be_get c = be_get_init(b, RNG_REC_LEN);
	uint8_t seen;

	r->off = be_get_u64(&c);
	r->len = be_get_u64(&c);
	r->state = be_get_u8(&c);
	seen = be_get_u8(&c);
	r->seen = seen == 1;
	be_get_zeros(&c, 2); /* padding, not checked: never was */
	r->crc = be_get_u32(&c);
	return r->state <= RNG_FAILED && seen <= 1 ? 0 : -EIO;
}

int sink_rng_read(int fd, uint32_t idx, struct rng_rec *r)
{
	uint8_t b[RNG_REC_LEN];
	ssize_t n = pread(fd, b, sizeof(b),
			  (off_t)(RNG_HDR_LEN + (uint64_t)idx * RNG_REC_LEN));

	if (n < 0)
		return -errno;
	if (n != (ssize_t)sizeof(b))
		return -EIO;
	return rec_decode(b, r);
}

int sink_rng_write(int fd, uint32_t idx, const struct rng_rec *r)
{
	uint8_t b[RNG_REC_LEN];
	struct be_put w = be_put_init(b, sizeof(b));

	be_put_u64(&w, r->off);
	be_put_u64(&w, r->len);
	be_put_u8(&w, r->state);
	be_put_u8(&w, r->seen);
	be_put_zeros(&w, 2);
	be_put_u32(&w, r->crc);
	assert(!w.err && w.off == RNG_REC_LEN);
	return io_pwrite_full(fd, b, sizeof(b),
			      RNG_HDR_LEN + (uint64_t)idx * RNG_REC_LEN);
}

/*
 * Every record of a state of count ranges, in one read (a split has up to
 * WIRE_RANGES_MAX: one pread each would make every join and mark cost
 * thousands of system calls under the lock). 0 with *recs to free,
 * -EIO for a torn one, or -errno.
 */
static int read_all(int fd, uint32_t count, struct rng_rec **recs)
{
	size_t len = (size_t)count * RNG_REC_LEN;
	uint8_t *b = malloc(len);
	struct rng_rec *r = calloc(count, sizeof(*r));
	ssize_t n;
	int rc = 0;

	if (!b || !r) {
		rc = -ENOMEM;
		goto out;
	}
	n = pread(fd, b, len, RNG_HDR_LEN);
	if (n < 0)
		rc = -errno;
	else if ((size_t)n != len)
		rc = -EIO;
	for (uint32_t i = 0; !rc && i < count; i++)
		rc = rec_decode(b + (size_t)i * RNG_REC_LEN, &r[i]);
out:
	free(b);
	if (rc) {
		free(r);
		r = NULL;
	}
	*recs = r;
	return rc;
}

/* A new state for key: every range missing. */
static int state_init(int fd, const struct rng_key *key)
{
	size_t len = RNG_HDR_LEN + (size_t)key->count * RNG_REC_LEN;
	uint8_t *b;
	int rc;

	if (ftruncate(fd, 0) < 0)
		return -errno;
	b = calloc(1, len);
	if (!b)
		return -ENOMEM;
	header_encode(b, key);
	rc = io_pwrite_full(fd, b, len, 0);
	free(b);
	return rc;
}

static bool same_file(const struct rng_key *a, const struct rng_key *b)
{
	return a->size == b->size && a->mtime_sec == b->mtime_sec &&
	       a->mtime_nsec == b->mtime_nsec && a->count == b->count;
}

/* Whether another session holds a byte of the temporary (an OFD lock). */
static bool part_busy(int part_fd)
{
	struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET };

	if (fcntl(part_fd, F_OFD_GETLK, &fl) < 0)
		return true;
	return fl.l_type != F_UNLCK;
}

/*
 * An earlier job's state (resume: the same file, a temporary that is
 * still the one it wrote): its failed ranges made missing again, under
 * this job's header. 0, 1 when it must start over, or -errno.
 */
static int take_over(int state_fd, const struct rng_key *key)
{
	uint8_t h[RNG_HDR_LEN];
	struct rng_rec *recs;
	int rc = read_all(state_fd, key->count, &recs);

	if (rc == -EIO) /* a torn record: start over */
		return 1;
	if (rc)
		return rc;
	header_encode(h, key);
	rc = io_pwrite_full(state_fd, h, sizeof(h), 0);
	for (uint32_t i = 0; !rc && i < key->count; i++) {
		if (recs[i].state == RNG_FAILED || recs[i].seen) {
			recs[i].state = recs[i].state == RNG_FAILED
						? RNG_MISSING
						: recs[i].state;
			recs[i].seen = false; /* not yet in this job */
			rc = sink_rng_write(state_fd, i, &recs[i]);
		}
	}
	free(recs);
	return rc;
}

int sink_rng_join(int state_fd, int part_fd, bool fresh,
		  const struct rng_key *key, uint32_t idx, uint64_t off,
		  uint64_t len, bool resume, uint8_t *state)
{
	struct rng_key have;
	struct rng_rec *recs;
	int rc = header_read(state_fd, &have);

	if (rc < 0)
		return rc;
	if (rc == 0 && memcmp(have.token, key->token, WIRE_TOKEN_LEN)) {
		/*
		 * An earlier job's split. Taken over only when no session
		 * of it is still writing: with --resume, its verified
		 * ranges stay when the file is the same (size, mtime and
		 * split) and so is the temporary they were written to;
		 * else everything starts over.
		 */
		if (part_busy(part_fd))
			return -ESTALE;
		rc = resume && !fresh && same_file(&have, key)
			     ? take_over(state_fd, key)
			     : 1;
	} else if (rc == 0 && !same_file(&have, key)) {
		return -ESTALE; /* one split, two stories: this range fails */
	}
	if (rc == 1) {
		/* Nothing recorded: whatever the temporary holds is not. */
		if (ftruncate(part_fd, 0) < 0)
			return -errno;
		rc = state_init(state_fd, key);
		if (!rc)
			rc = fdatasync(state_fd) < 0 ? -errno : 0;
	}
	if (rc)
		return rc;
	rc = read_all(state_fd, key->count, &recs);
	if (rc)
		return rc;
	if (recs[idx].state != RNG_MISSING &&
	    (recs[idx].off != off || recs[idx].len != len))
		rc = -ESTALE;
	if (recs[idx].state == RNG_FAILED && resume)
		recs[idx].state = RNG_MISSING;
	*state = recs[idx].state;
	for (uint32_t i = 0; !rc && i < key->count; i++) {
		/* A fresh temporary: what a verified range wrote is gone. */
		if (fresh && recs[i].state == RNG_VERIFIED)
			rc = -ESTALE;
		/* Without --resume a range failed in this job fails them all. */
		if (!resume && recs[i].state == RNG_FAILED)
			*state = RNG_FAILED;
	}
	if (!rc) {
		recs[idx].off = off;
		recs[idx].len = len;
		recs[idx].seen = true;
		rc = sink_rng_write(state_fd, idx, &recs[idx]);
	}
	free(recs);
	return rc;
}

int sink_rng_mark(int state_fd, const struct rng_key *key, uint32_t idx,
		  uint8_t state, uint32_t crc, bool *all, uint32_t *whole)
{
	struct rng_key have;
	struct rng_rec r, *recs;
	uint64_t at = 0;
	int rc = header_read(state_fd, &have);

	*all = false;
	if (rc)
		return rc < 0 ? rc : -ESTALE;
	if (memcmp(have.token, key->token, WIRE_TOKEN_LEN) ||
	    !same_file(&have, key))
		return -ESTALE; /* taken over meanwhile: not ours to mark */
	rc = sink_rng_read(state_fd, idx, &r);
	if (rc)
		return rc;
	r.state = state;
	r.crc = crc;
	rc = sink_rng_write(state_fd, idx, &r);
	if (!rc && fdatasync(state_fd) < 0)
		rc = -errno;
	if (rc || state != RNG_VERIFIED)
		return rc;
	/* The last one? The ranges must tile the file, in index order. */
	rc = read_all(state_fd, key->count, &recs);
	if (rc)
		return rc;
	*whole = 0;
	for (uint32_t i = 0; i < key->count; i++) {
		if (recs[i].state != RNG_VERIFIED || !recs[i].seen)
			goto out;
		if (recs[i].off != at || recs[i].len > key->size - at) {
			rc = -EBADMSG;
			goto out;
		}
		*whole = ck_crc32_combine(*whole, recs[i].crc, recs[i].len);
		at += recs[i].len;
	}
	if (at != key->size)
		rc = -EBADMSG;
	else
		*all = true;
out:
	free(recs);
	return rc;
}

bool sink_rng_abandoned(int state_fd, uint32_t count)
{
	struct rng_rec *recs;
	bool failed = false;

	if (read_all(state_fd, count, &recs))
		return false;
	for (uint32_t i = 0; i < count; i++) {
		if (recs[i].state == RNG_MISSING) {
			failed = false;
			break;
		}
		failed |= recs[i].state == RNG_FAILED;
	}
	free(recs);
	return failed;
}

/* ---- the sink's side: one range FILE ---- */

struct snk_range {
	struct rng_key key;
	uint32_t idx;
	uint64_t off, len;
	int state_fd;
	char state_name[PATH_NAME_MAX + 8];
	bool joined; /* its record is ours to mark */
	bool done;   /* its record says verified */
	bool final;  /* this session placed the file */
	bool placed; /* another session of this split placed it, since */
	uint32_t whole;
};

static bool still_named(int dirfd, const char *name, int fd)
{
	struct stat a, b;

	return fstat(fd, &a) == 0 && a.st_nlink > 0 &&
	       fstatat(dirfd, name, &b, AT_SYMLINK_NOFOLLOW) == 0 &&
	       a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

/*
 * Under the lock of a state that is no longer named: whether another
 * session of this split placed the file (the temporary this one holds is
 * under the final name, the state of its token) with this range verified.
 */
static bool placed_here(const struct snk_file *f, const struct snk_range *g)
{
	struct rng_key have;
	struct rng_rec r;

	return still_named(f->dirfd, f->n.name, f->fd) &&
	       header_read(g->state_fd, &have) == 0 &&
	       !memcmp(have.token, g->key.token, WIRE_TOKEN_LEN) &&
	       same_file(&have, &g->key) &&
	       sink_rng_read(g->state_fd, g->idx, &r) == 0 &&
	       r.state == RNG_VERIFIED && r.off == g->off && r.len == g->len;
}

/*
 * Opens and locks the temporary and the state, the range's bytes and
 * record taken. 0, or -errno with f failed (-EBUSY: another session
 * writes these bytes; -ESTALE: the split does not agree; -ETIMEDOUT: the
 * state stayed locked). The state's lock is taken before the bytes': a
 * session of this job that is still joining holds none of them, so bytes
 * held under the lock are another job's (sink_rng_join's part_busy).
 */
static int open_both(struct sink *k, struct snk_file *f, struct snk_range *g,
		     uint8_t *state)
{
	const int flags =
		O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC;
	bool fresh = false;
	struct stat st;
	int rc = 0;

	for (int tries = 0; tries < 3; tries++) {
		/* Made here (fresh), or there already. */
		f->fd = openat(f->dirfd, f->n.tmp, flags | O_EXCL, 0600);
		fresh = f->fd >= 0;
		if (f->fd < 0 && errno == EEXIST)
			f->fd = openat(f->dirfd, f->n.tmp, flags & ~O_CREAT);
		if (f->fd < 0 && errno == ENOENT) {
			rc = -EAGAIN; /* placed or removed meanwhile */
			continue;
		}
		if (f->fd < 0)
			return -errno;
		if (fstat(f->fd, &st) < 0 || !S_ISREG(st.st_mode))
			return -EINVAL;
		if (flock(f->fd, LOCK_SH | LOCK_NB) < 0)
			return -EBUSY; /* a whole-file copy of the name */
		g->state_fd = openat(f->dirfd, g->state_name, flags, 0600);
		if (g->state_fd < 0)
			return -errno;
		rc = sink_rng_lock(g->state_fd);
		if (rc)
			return rc;
		/* The file placed (or the state gone) between open and lock. */
		if (still_named(f->dirfd, f->n.tmp, f->fd) &&
		    still_named(f->dirfd, g->state_name, g->state_fd))
			break;
		if (placed_here(f, g)) {
			/*
			 * Every range was verified (this one too) and another
			 * session placed the file: verified with --resume;
			 * otherwise nothing may be written to it now.
			 */
			sink_rng_unlock(g->state_fd);
			g->placed = true;
			*state = RNG_VERIFIED;
			return sink_resuming(k) ? 0 : -EALREADY;
		}
		sink_rng_unlock(g->state_fd);
		close(g->state_fd);
		close(f->fd);
		g->state_fd = f->fd = -1;
		rc = -EAGAIN;
	}
	if (rc)
		return rc;
	rc = ofd_lock(f->fd, F_WRLCK, g->off, g->len);
	if (rc == -EAGAIN || rc == -EACCES)
		rc = -EBUSY;
	if (!rc)
		rc = sink_rng_join(g->state_fd, f->fd, fresh, &g->key, g->idx,
				   g->off, g->len, sink_resuming(k), state);
	if (!rc && fstat(f->fd, &st) == 0 && (uint64_t)st.st_size < f->size &&
	    ftruncate(f->fd, (off_t)f->size) < 0)
		rc = -errno;
	sink_rng_unlock(g->state_fd);
	return rc;
}

int sink_range_open(struct sink *k, struct snk_file *f,
		    const struct wire_file *wf, bool *verified)
{
	struct snk_range *g;
	uint8_t state = RNG_MISSING;
	size_t n = strlen(f->n.tmp);
	int rc;

	*verified = false;
	/* Where its chunks may fall: a protocol matter (exit 5). */
	if (wf->range_off % k->chunk_size ||
	    (wf->range_len % k->chunk_size &&
	     wf->range_off + wf->range_len != wf->size) ||
	    wf->range_count > f->nslots)
		return engine_fail(k->e, XFER_FAIL_PROTOCOL, -EPROTO,
				   "%s sent a byte range of '%s' that is not "
				   "one (offset %llu, %llu bytes, %u of %u)",
				   k->e->c->peer, f->n.shown,
				   (unsigned long long)wf->range_off,
				   (unsigned long long)wf->range_len,
				   wf->range_idx + 1, wf->range_count);
	f->next_idx = wf->range_off / k->chunk_size;
	f->first_idx = f->next_idx;
	f->crc_at = wf->range_off;
	f->nslots = (wf->range_off + wf->range_len + k->chunk_size - 1) /
		    k->chunk_size;
	g = calloc(1, sizeof(*g));
	if (!g)
		return engine_fail(k->e, XFER_FAIL_RESOURCE, -ENOMEM,
				   "out of memory");
	f->rg = g;
	g->state_fd = -1;
	memcpy(g->key.token, wf->token, WIRE_TOKEN_LEN);
	g->key.size = wf->size;
	g->key.mtime_sec = wf->mtime_sec;
	g->key.mtime_nsec = wf->mtime_nsec;
	g->key.count = wf->range_count;
	g->idx = wf->range_idx;
	g->off = wf->range_off;
	g->len = wf->range_len;
	if (f->err)
		return 0;
	if (k->p->csum != XFER_CSUM_CRC32) {
		file_fail(f, -EINVAL,
			  "'%s': a byte range needs --checksum crc32",
			  f->n.shown);
		return 0;
	}
	/* .NAME.rdcp-part -> .NAME.rdcp-ranges */
	if (n < 5 || strcmp(f->n.tmp + n - 5, "-part") ||
	    (size_t)snprintf(g->state_name, sizeof(g->state_name), "%.*sranges",
			     (int)(n - 4), f->n.tmp) >= sizeof(g->state_name)) {
		file_fail(f, -ENAMETOOLONG, "'%s': name too long for a split",
			  f->n.shown);
		return 0;
	}
	rc = open_both(k, f, g, &state);
	if (rc == -EBUSY)
		file_fail(f, rc,
			  "'%s': range %u of %u is being written by another "
			  "session (or the whole file is)",
			  f->n.shown, g->idx + 1, g->key.count);
	else if (rc == -ESTALE)
		file_fail(f, rc,
			  "'%s': range %u of %u does not agree with the "
			  "split the receiver holds (another token, size, "
			  "time or count, another job on the same file, or "
			  "its temporary gone)",
			  f->n.shown, g->idx + 1, g->key.count);
	else if (rc == -ETIMEDOUT)
		file_fail(f, rc,
			  "'%s': its ranges' state stayed locked for %d s "
			  "(another process holds it)",
			  f->n.shown, RNG_LOCK_MS / 1000);
	else if (rc == -EALREADY)
		file_fail(f, rc,
			  "'%s': range %u of %u came again after the file was "
			  "placed; not written",
			  f->n.shown, g->idx + 1, g->key.count);
	else if (rc)
		file_fail(f, rc, "cannot open the ranges of '%s': %s",
			  f->n.shown, strerror(-rc));
	else if (state == RNG_FAILED)
		file_fail(f, -ECANCELED,
			  "'%s': another range of it failed in this job; not "
			  "placed",
			  f->n.shown);
	g->joined = !rc && !g->placed;
	*verified = !f->err && state == RNG_VERIFIED && sink_resuming(k);
	return 0;
}

int sink_range_done(struct snk_work *fin)
{
	struct snk_file *f = fin->f;
	struct sink *k = fin->k;
	struct snk_range *g = f->rg;
	bool all = false;
	const char *what;
	uint32_t be;
	int rc;

	if (g->placed) /* skipped (--resume): nothing to record or place */
		return 0;
	/* Its bytes on disk before its record says they are. */
	if (!f->skipped && fdatasync(f->fd) < 0) {
		file_fail(f, -errno, "cannot write '%s': %s", f->n.shown,
			  strerror(errno));
		return -1;
	}
	rc = sink_rng_lock(g->state_fd);
	if (!rc && !(still_named(f->dirfd, f->n.tmp, f->fd) &&
		     still_named(f->dirfd, g->state_name, g->state_fd))) {
		/*
		 * Since it joined, another session placed the file (every
		 * range verified, this one by an earlier job: --resume) or
		 * another job took the split over: this range has nothing
		 * more to record, and never a file to place.
		 */
		if (!f->skipped)
			file_fail(f, -ESTALE,
				  "'%s': its ranges were taken over by another "
				  "job; range %u not recorded",
				  f->n.shown, g->idx + 1);
		g->done = f->skipped;
		goto out;
	}
	if (!rc && f->skipped) { /* --resume: verified by an earlier job */
		struct rng_rec r;

		rc = sink_rng_read(g->state_fd, g->idx, &r);
		be = htobe32(r.crc);
	} else {
		memcpy(&be, fin->digest, 4);
	}
	if (!rc)
		rc = sink_rng_mark(g->state_fd, &g->key, g->idx, RNG_VERIFIED,
				   be32toh(be), &all, &g->whole);
	if (rc == -EBADMSG)
		file_fail(f, rc,
			  "'%s': its ranges do not cover it exactly "
			  "(overlapping or missing bytes); not placed",
			  f->n.shown);
	else if (rc == -ETIMEDOUT)
		file_fail(f, rc,
			  "'%s': its ranges' state stayed locked for %d s "
			  "(another process holds it); range %u not recorded",
			  f->n.shown, RNG_LOCK_MS / 1000, g->idx + 1);
	else if (rc)
		file_fail(f, rc, "cannot record range %u of '%s': %s",
			  g->idx + 1, f->n.shown, strerror(-rc));
	g->done = !rc;
	if (rc || !all)
		goto out;
	/* The last range: this session places the file. */
	rc = sink_apply_meta(k, f->fd, f->mode, false, f->times, &f->owner,
			     f->xattrs, &what);
	if (rc) {
		file_fail(f, rc, "cannot set %s of '%s': %s", what, f->n.shown,
			  strerror(-rc));
	} else if (fsync(f->fd) < 0) {
		rc = -errno;
		file_fail(f, rc, "cannot fsync '%s': %s", f->n.shown,
			  strerror(errno));
	} else if (renameat(f->dirfd, f->n.tmp, f->dirfd, f->n.name) < 0) {
		rc = -errno;
		file_fail(f, rc, "cannot rename into '%s': %s", f->n.shown,
			  strerror(errno));
	} else {
		unlinkat(f->dirfd, g->state_name, 0);
		g->final = true;
		be = htobe32(g->whole);
		memcpy(fin->digest, &be, 4);
		fin->dlen = 4;
	}
out:
	sink_rng_unlock(g->state_fd);
	return f->err ? -1 : 0;
}

void sink_range_fold_holes(struct sink *k, struct snk_file *f, uint64_t end)
{
	if (!f->rg)
		return;
	if (end == UINT64_MAX) /* up to the range's end */
		end = f->rg->off + f->rg->len;
	(void)k;
	if (end <= f->crc_at)
		return;
	f->crc = ck_crc32_combine(f->crc, ck_crc32_zeros(end - f->crc_at),
				  end - f->crc_at);
	f->crc_at = end;
}

uint64_t sink_range_len(const struct snk_file *f)
{
	return f->rg ? f->rg->len : f->size;
}

bool sink_range_final(const struct snk_file *f)
{
	return f->rg && f->rg->final;
}

void sink_range_release(struct sink *k, struct snk_file *f)
{
	struct snk_range *g = f->rg;
	bool all;
	uint32_t whole;

	if (!g)
		return;
	direct_close(&f->dio);
	if (g->joined && !g->final && !sink_rng_lock(g->state_fd)) {
		/*
		 * A failed range (or one its session let go of before it
		 * was verified: the session ended) fails the file, in this
		 * job; --resume sends it again.
		 */
		if (!g->done && sink_rng_mark(g->state_fd, &g->key, g->idx,
					      RNG_FAILED, 0, &all, &whole))
			log_debug("'%s': range %u not marked failed",
				  f->n.shown, g->idx + 1);
		/*
		 * Without --resume the last range to let go of a failed
		 * file (every range seen) removes what the split left.
		 */
		if (!sink_resuming(k) &&
		    sink_rng_abandoned(g->state_fd, g->key.count) &&
		    still_named(f->dirfd, g->state_name, g->state_fd)) {
			unlinkat(f->dirfd, f->n.tmp, 0);
			unlinkat(f->dirfd, g->state_name, 0);
		}
		sink_rng_unlock(g->state_fd);
	}
	if (g->state_fd >= 0)
		close(g->state_fd);
	if (f->fd >= 0)
		close(f->fd);
	f->fd = -1;
	free(g);
	f->rg = NULL;
}
