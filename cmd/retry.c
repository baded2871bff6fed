/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * --retry's policy (retry.h): verdicts, waits, the files' reports across
 * attempts and --files-from's list replayed.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cmd/retry.h"
#include "util/checksum.h"
#include "util/io.h"
#include "util/lineq.h"
#include "util/log.h"

/*
 * A name's flags, in the low bits of its slot (the hash is the rest):
 * OPEN: a file_start not yet followed by its file_done; CUT: an attempt
 * ended while it was open (its copy may have completed unreported);
 * COPIED: an attempt reported it copied.
 */
enum {
	NAME_OPEN = 1 << 0,
	NAME_CUT = 1 << 1,
	NAME_COPIED = 1 << 2,
	NAME_FLAGS = 7,
};

int retry_parse_wait(const char *s, unsigned int *ms)
{
	uint64_t v = 0, scale = 1000;
	const char *p = s;

	for (; *p >= '0' && *p <= '9' && v <= RETRY_WAIT_MAX_MS; p++)
		v = v * 10 + (uint64_t)(*p - '0') * 1000;
	if (p == s && *p != '.')
		return -EINVAL;
	if (*p == '.') {
		/* "5." and ".5" are fine, "." is not; beyond ms is dropped */
		if (p == s && !(p[1] >= '0' && p[1] <= '9'))
			return -EINVAL;
		for (p++; *p >= '0' && *p <= '9'; p++)
			v += (uint64_t)(*p - '0') * (scale /= 10);
	}
	if (*p || v > RETRY_WAIT_MAX_MS)
		return -EINVAL;
	*ms = (unsigned int)v;
	return 0;
}

void retry_init(struct retry *r, unsigned int max, unsigned int wait_ms)
{
	*r = (struct retry){ .max = max, .wait_ms = wait_ms };
}

void retry_release(struct retry *r)
{
	free(r->names.slot);
	r->names = (struct retry_names){ 0 };
}

void retry_attempt_begin(struct retry *r)
{
	r->attempt++;
	r->failed_transient = 0;
	r->failed_other = 0;
	r->kept_ours = 0;
	r->start_may_heal = false;
	r->rdma_gone = false;
}

bool retry_rdma_gone(const char *transport, enum xfer_fail v, int cause)
{
	if (v == XFER_OK || !transport || strcmp(transport, "rdma"))
		return false;
	switch (cause) {
	case -ENODEV:
	case -ENETDOWN:
	case -ENETUNREACH:
	case -EHOSTUNREACH:
	case -EADDRNOTAVAIL:
		return true;
	default:
		return false;
	}
}

void retry_attempt_end(struct retry *r, const char *transport, enum xfer_fail v,
		       int cause)
{
	r->rdma_gone = retry_rdma_gone(transport, v, cause);
	if (v != XFER_OK && transport && !strcmp(transport, "rdma"))
		r->rdma_lost = true;
}

static uint64_t name_key(const char *name)
{
	uint64_t h = ck_fnv1a64(name, strlen(name)) & ~(uint64_t)NAME_FLAGS;

	return h ? h : NAME_FLAGS + 1; /* never 0, the empty slot */
}

/* The slot of key, or the empty one where it would go. */
static uint64_t *names_slot(const struct retry_names *t, uint64_t key)
{
	size_t i = (size_t)(key >> 3) & (t->cap - 1);

	while (t->slot[i] && (t->slot[i] & ~(uint64_t)NAME_FLAGS) != key)
		i = (i + 1) & (t->cap - 1);
	return &t->slot[i];
}

static int names_grow(struct retry_names *t)
{
	struct retry_names g = { .cap = t->cap ? 2 * t->cap : 1024 };

	g.slot = calloc(g.cap, sizeof(*g.slot));
	if (!g.slot)
		return -ENOMEM;
	for (size_t i = 0; i < t->cap; i++)
		if (t->slot[i])
			*names_slot(&g, t->slot[i] & ~(uint64_t)NAME_FLAGS) =
				t->slot[i];
	g.n = t->n;
	free(t->slot);
	*t = g;
	return 0;
}

/* key's slot, added (flags 0) if it was not there; NULL: out of memory. */
static uint64_t *names_add(struct retry_names *t, uint64_t key)
{
	uint64_t *s;

	if (2 * (t->n + 1) > t->cap && names_grow(t))
		return NULL;
	s = names_slot(t, key);
	if (!*s) {
		*s = key;
		t->n++;
	}
	return s;
}

static bool transient_file(const struct xfer_file_report *rep)
{
	return rep->klass == XFER_FAIL_VERIFY ||
	       rep->klass == XFER_FAIL_PEER_LOST ||
	       (rep->klass == XFER_FAIL_REMOTE_IO && rep->status == -EBUSY);
}

bool retry_file(struct retry *r, const struct xfer_file_report *rep)
{
	uint64_t *s;
	bool note;

	if (rep->done && rep->status) {
		if (transient_file(rep))
			r->failed_transient++;
		else
			r->failed_other++;
	}
	if (!rep->kind || strcmp(rep->kind, "file"))
		return false;
	s = names_add(&r->names, name_key(rep->name ? rep->name : rep->path));
	if (!s) {
		if (!r->err)
			log_warn("out of memory for the names --retry "
				 "remembers: a file an earlier attempt copied "
				 "may be counted as skipped, or listed twice "
				 "by --manifest");
		r->err = -ENOMEM;
		/* As without --retry: a copied file is noted. */
		return rep->done && !rep->status && !rep->skipped;
	}
	if (!rep->done) {
		/* Open still: the attempt it was started in was cut off. */
		if (*s & NAME_OPEN)
			*s |= NAME_CUT;
		*s |= NAME_OPEN;
		return false;
	}
	*s &= ~(uint64_t)NAME_OPEN;
	if (rep->status)
		return false;
	if (!rep->skipped) {
		note = !(*s & NAME_COPIED);
		*s |= NAME_COPIED;
		return note;
	}
	if (!(*s & (NAME_COPIED | NAME_CUT)))
		return false; /* there before this invocation */
	/* Placed by an earlier attempt, found complete now. */
	r->kept_ours++;
	note = !(*s & NAME_COPIED);
	*s |= NAME_COPIED;
	return note;
}

bool retry_is_transient(const struct retry *r, enum xfer_fail v)
{
	switch (v) {
	case XFER_FAIL_CONNECT:
	case XFER_FAIL_PEER_LOST:
		return true;
	case XFER_FAIL_REMOTE_START:
		return r->start_may_heal;
	case XFER_FAIL_RESOURCE:
		return r->rdma_gone;
	case XFER_FAIL_VERIFY:
	case XFER_FAIL_PARTIAL:
	case XFER_FAIL_REMOTE_IO:
		/*
		 * Decided by the files. A session that failed as a whole with
		 * verify (a sealed control message, the ring) has none failed:
		 * a corrupted link, retried like one.
		 */
		if (v == XFER_FAIL_VERIFY && !r->failed_transient &&
		    !r->failed_other)
			return true;
		return r->failed_transient && !r->failed_other;
	default:
		return false;
	}
}

unsigned int retry_wait_ms(const struct retry *r, unsigned int k, uint32_t rnd)
{
	uint64_t cap =
		r->wait_ms > RETRY_WAIT_CAP_MS ? r->wait_ms : RETRY_WAIT_CAP_MS;
	uint64_t w = r->wait_ms;

	for (unsigned int i = 1; i < k && w < cap; i++)
		w *= 2;
	if (w > cap)
		w = cap;
	/* +-20 %: many clients cut off at once do not come back at once */
	return (unsigned int)(w * 8 / 10 +
			      (w * 4 / 10) * (uint64_t)rnd / UINT32_MAX);
}

int retry_sleep(unsigned int ms, const volatile sig_atomic_t *cancel)
{
	struct timespec end, now, left;
	sigset_t block, old;
	int rc = 0;

	sigemptyset(&block);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGTERM);
	sigprocmask(SIG_BLOCK, &block, &old);
	clock_gettime(CLOCK_MONOTONIC, &end);
	end.tv_sec += ms / 1000;
	end.tv_nsec += (long)(ms % 1000) * 1000000;
	if (end.tv_nsec >= 1000000000) {
		end.tv_sec++;
		end.tv_nsec -= 1000000000;
	}
	for (;;) {
		if (cancel && *cancel) {
			rc = -EINTR;
			break;
		}
		clock_gettime(CLOCK_MONOTONIC, &now);
		left.tv_sec = end.tv_sec - now.tv_sec;
		left.tv_nsec = end.tv_nsec - now.tv_nsec;
		if (left.tv_nsec < 0) {
			left.tv_sec--;
			left.tv_nsec += 1000000000;
		}
		if (left.tv_sec < 0)
			break;
		/* The signals get through only here, so none is missed. */
		ppoll(NULL, 0, &left, &old);
	}
	sigprocmask(SIG_SETMASK, &old, NULL);
	return rc;
}

/* ---- --files-from, replayed ---- */

/*
 * From a list read by a thread: its next whole name, with its separator,
 * spooled, and as much of it as fits in buf (the rest comes from the
 * spool on the next read); -1 with EAGAIN while none has come.
 */
static ssize_t list_take(struct retry_list *l, char *buf, size_t size)
{
	const char *rec;
	size_t len;
	int rc = lineq_next(l->lq, &rec, &len);

	if (rc <= 0) {
		if (rc == -1)
			return 0; /* the end */
		errno = rc ? -rc : EAGAIN;
		return -1;
	}
	rc = io_pwrite_full(fileno(l->spool), rec, len, l->len);
	if (!rc)
		rc = io_pwrite_full(fileno(l->spool), &l->sep, 1, l->len + len);
	if (rc) {
		errno = -rc;
		return -1;
	}
	l->len += len + 1;
	if (size > len + 1)
		size = len + 1;
	memcpy(buf, rec, size < len ? size : len);
	if (size == len + 1)
		buf[len] = l->sep;
	l->pos += size;
	return (ssize_t)size;
}

/* The spool's stream: what was spooled, then on from the list. */
static ssize_t list_read(void *cookie, char *buf, size_t size)
{
	struct retry_list *l = cookie;
	ssize_t n;
	int rc;

	if (l->pos < l->len) {
		if (size > l->len - l->pos)
			size = (size_t)(l->len - l->pos);
		rc = io_pread_full(fileno(l->spool), buf, size, l->pos);
		if (rc) {
			errno = -rc;
			return -1;
		}
		l->pos += size;
		return (ssize_t)size;
	}
	if (l->lq)
		return list_take(l, buf, size);
	n = read(fileno(l->src), buf, size);
	if (n <= 0)
		return n;
	rc = io_pwrite_full(fileno(l->spool), buf, (size_t)n, l->len);
	if (rc) {
		errno = -rc;
		return -1;
	}
	l->len += (uint64_t)n;
	l->pos = l->len;
	return n;
}

int retry_list_init(struct retry_list *l, FILE *src, char sep)
{
	struct stat st;
	off_t off;

	*l = (struct retry_list){ .src = src, .sep = sep, .start = -1 };
	if (!fstat(fileno(src), &st) && S_ISREG(st.st_mode) &&
	    (off = ftello(src)) >= 0) {
		l->start = off;
		return 0;
	}
	l->spool = tmpfile();
	if (!l->spool) {
		int rc = -errno;

		log_err("cannot make a spool file for the --files-from list "
			"(--retry reads it again): %s",
			strerror(-rc));
		return rc;
	}
	if (lineq_wanted(fileno(src))) {
		int rc = lineq_start(&l->lq, fileno(src), sep);

		if (rc) {
			log_err("cannot start reading the --files-from list: %s",
				strerror(-rc));
			return rc;
		}
	}
	return 0;
}

FILE *retry_list_stream(struct retry_list *l)
{
	static const cookie_io_functions_t io = { .read = list_read };

	if (!l->spool) {
		if (fseeko(l->src, l->start, SEEK_SET)) {
			log_err("cannot read the --files-from list again: %s",
				strerror(errno));
			return NULL;
		}
		clearerr(l->src);
		return l->src;
	}
	if (l->stream)
		fclose(l->stream);
	l->pos = 0;
	l->stream = fopencookie(l, "r", io);
	if (!l->stream)
		log_err("cannot read the --files-from list again: %s",
			strerror(errno));
	return l->stream;
}

void retry_list_release(struct retry_list *l)
{
	lineq_stop(l->lq);
	if (l->stream)
		fclose(l->stream);
	if (l->spool)
		fclose(l->spool);
	*l = (struct retry_list){ .start = -1 };
}
