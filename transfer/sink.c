/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * The data sink: takes chunks out of the ring, verifies them, writes them
 * to a temporary file beside the target, and gives the target its final
 * name only after the whole file has been verified.
 *
 * The engine thread checks each arriving immediate and slot header (cheap,
 * and every field is untrusted) and hands the slot to a worker, which
 * checks the chunk CRC32, computes the chunk SHA-256 when asked, and
 * pwrites the payload. When the worker is done the slot is drained; slots
 * are released to the source in order (credit.h). When FILE_END has come
 * and every chunk of the file is written, a worker combines the chunk
 * digests, compares them with the source's, fsyncs on request and renames.
 * Nothing is ever renamed that was not verified, and a failed or aborted
 * file's temporary is removed.
 */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "transfer/session.h"
#include "util/checksum.h"
#include "util/fileio.h"
#include "util/log.h"
#include "util/path.h"
#include "util/units.h"

#define SINK_MAX_FILES (1u << 24) /* per session */

struct snk_file {
	uint32_t id;
	int fd;
	int dirfd; /* where tmp and name live (owned unless == target's) */
	char name[PATH_NAME_MAX + 1];
	char tmp[PATH_NAME_MAX + 1];
	char shown[4200];
	uint64_t size, nslots, received;
	uint32_t mode;
	uint8_t *got;	/* per chunk index */
	uint32_t *crcs; /* per chunk index */
	uint8_t *shas;	/* per chunk index, CK_SHA256_LEN each */
	unsigned int inflight;
	bool ended, finalizing;
	struct wire_file_end end;
	int err;
	char errmsg[WIRE_MSG_MAX + 1];
};

struct snk_job {
	struct workq_item item;
	struct sink *k;
	unsigned int slot;
	struct wire_slot_hdr h;
	struct snk_file *f;
	uint64_t index;
	int status;
};

struct snk_fin {
	struct workq_item item;
	struct sink *k;
	struct snk_file *f;
	uint8_t digest[WIRE_DIGEST_MAX];
	uint8_t dlen;
};

struct sink {
	struct engine *e;
	const struct sink_target *t;
	struct xfer_stats *st;
	uint32_t chunk;
	struct credit_rx rx;
	struct snk_job *jobs; /* one per slot */
	struct snk_file **files;
	uint32_t nfiles; /* announced so far (= next id) */
	uint32_t cap;
	unsigned int active; /* announced, result not yet sent */
	bool done, bye_sent;
};

static void file_fail(struct snk_file *f, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void file_fail(struct snk_file *f, int err, const char *fmt, ...)
{
	va_list ap;

	if (f->err)
		return;
	f->err = err;
	va_start(ap, fmt);
	vsnprintf(f->errmsg, sizeof(f->errmsg), fmt, ap);
	va_end(ap);
}

static void file_free(struct snk_file *f)
{
	if (!f)
		return;
	if (f->fd >= 0) {
		close(f->fd);
		unlinkat(f->dirfd, f->tmp, 0);
	}
	free(f->got);
	free(f->crcs);
	free(f->shas);
	free(f);
}

/* ---- FILE: choose the names and open the temporary ---- */

static int open_target(struct sink *k, struct snk_file *f, const char *path,
		       bool sparse)
{
	const struct sink_target *t = k->t;
	const char *base;
	struct statvfs vfs;
	char sz[32], av[32];
	int rc;

	f->dirfd = t->dirfd;
	if (t->is_dir) {
		rc = path_check_relative(path, strlen(path), false);
		if (rc || strchr(path, '/'))
			return engine_fail(k->e, XFER_FAIL_PROTOCOL, -EPERM,
					   "%s sent a file name that is not "
					   "a plain name: refused",
					   k->e->c->peer);
		base = path;
		snprintf(f->shown, sizeof(f->shown), "%s%s%s", t->shown,
			 t->shown[0] ? "/" : "", base);
	} else {
		if (k->nfiles > 1)
			return engine_fail(k->e, XFER_FAIL_PROTOCOL, -EPROTO,
					   "%s sent several files to a DEST "
					   "that is not a directory",
					   k->e->c->peer);
		base = t->name;
		snprintf(f->shown, sizeof(f->shown), "%s", t->shown);
	}
	snprintf(f->name, sizeof(f->name), "%s", base);
	snprintf(f->tmp, sizeof(f->tmp), ".%.200s.rdcp-part", base);
	f->fd = openat(f->dirfd, f->tmp,
		       O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC,
		       0600);
	if (f->fd < 0) {
		file_fail(f, -errno, "cannot create '%s': %s", f->shown,
			  strerror(errno));
		return 0;
	}
	/*
	 * Fail fast when the file cannot fit. A sparse source's size says
	 * little of the space its data needs: then a full disk shows up at
	 * the write instead, failing the same way.
	 */
	if (!sparse && fstatvfs(f->fd, &vfs) == 0 &&
	    (uint64_t)vfs.f_bavail * vfs.f_frsize < f->size) {
		file_fail(
			f, -ENOSPC,
			"not enough space for '%s': %s needed, %s free",
			f->shown, units_format_size(f->size, sz, sizeof(sz)),
			units_format_size((uint64_t)vfs.f_bavail * vfs.f_frsize,
					  av, sizeof(av)));
		return 0;
	}
	/* Holes the source skipped stay holes. */
	if (ftruncate(f->fd, (off_t)f->size) < 0)
		file_fail(f, -errno, "cannot size '%s': %s", f->shown,
			  strerror(errno));
	return 0;
}

static int on_file(struct sink *k, const struct wire_file *wf)
{
	struct snk_file *f;

	if (wf->file_id != k->nfiles || k->nfiles >= SINK_MAX_FILES)
		return engine_fail(k->e, XFER_FAIL_PROTOCOL, -EPROTO,
				   "%s announced file %u out of order",
				   k->e->c->peer, wf->file_id);
	if (k->nfiles == k->cap) {
		uint32_t cap = k->cap ? 2 * k->cap : 64;
		struct snk_file **n = realloc(k->files, cap * sizeof(*n));

		if (!n)
			return engine_fail(k->e, XFER_FAIL_RESOURCE, -ENOMEM,
					   "out of memory");
		k->files = n;
		k->cap = cap;
	}
	f = calloc(1, sizeof(*f));
	if (!f)
		return engine_fail(k->e, XFER_FAIL_RESOURCE, -ENOMEM,
				   "out of memory");
	k->files[k->nfiles++] = f;
	k->active++;
	f->id = wf->file_id;
	f->fd = -1;
	f->size = wf->size;
	f->mode = wf->mode;
	f->nslots = (f->size + k->chunk - 1) / k->chunk;
	f->got = calloc(f->nslots ? f->nslots : 1, 1);
	f->crcs = calloc(f->nslots ? f->nslots : 1, sizeof(*f->crcs));
	if (k->t->csum == XFER_CSUM_SHA256)
		f->shas = calloc(f->nslots ? f->nslots : 1, CK_SHA256_LEN);
	if (!f->got || !f->crcs || (k->t->csum == XFER_CSUM_SHA256 && !f->shas))
		return engine_fail(k->e, XFER_FAIL_RESOURCE, -ENOMEM,
				   "out of memory for '%s'", wf->path);
	return open_target(k, f, wf->path, wf->flags & WIRE_FILE_SPARSE);
}

/* ---- chunks ---- */

static void write_chunk(struct workq_item *item)
{
	struct snk_job *j = (struct snk_job *)item;
	struct sink *k = j->k;
	const uint8_t *data = cm_slot(k->e->c, j->slot) + WIRE_SLOT_HDR;

	if (k->t->csum != XFER_CSUM_NONE &&
	    ck_crc32(0, data, j->h.len) != j->h.crc) {
		j->status = -EBADMSG;
		return;
	}
	j->f->crcs[j->index] = j->h.crc;
	if (k->t->csum == XFER_CSUM_SHA256) {
		j->status = ck_sha256(data, j->h.len,
				      j->f->shas + j->index * CK_SHA256_LEN);
		if (j->status)
			return;
	}
	j->status = io_pwrite_full(j->f->fd, data, j->h.len, j->h.offset);
}

static int snk_on_data(struct engine *e, const struct cm_event *ev)
{
	struct sink *k = e->role_data;
	struct wire_slot_hdr h;
	struct snk_file *f;
	struct snk_job *j;
	uint64_t seq, idx, want;
	int slot, rc;

	slot = credit_rx_arrive(&k->rx, ev->imm, &seq);
	if (slot < 0)
		return engine_fail(e, XFER_FAIL_PROTOCOL, -EPROTO,
				   "%s wrote out of turn (immediate 0x%08x): "
				   "credit protocol violated",
				   e->c->peer, ev->imm);
	rc = wire_slot_decode(cm_slot(e->c, (unsigned int)slot), &h);
	if (rc == 0 &&
	    (h.seq != seq || h.file_id >= k->nfiles || !k->files[h.file_id] ||
	     h.len + WIRE_SLOT_HDR != ev->len || h.flags))
		rc = -EPROTO;
	if (rc)
		return engine_fail(e, XFER_FAIL_PROTOCOL, rc,
				   "%s wrote a bad slot header (seq %llu)",
				   e->c->peer, (unsigned long long)seq);
	f = k->files[h.file_id];
	idx = h.offset / k->chunk;
	want = idx < f->nslots ? f->size - h.offset : 0;
	if (want > k->chunk)
		want = k->chunk;
	if (f->ended || h.offset % k->chunk || idx >= f->nslots ||
	    h.len != want || f->got[idx])
		return engine_fail(e, XFER_FAIL_PROTOCOL, -EPROTO,
				   "%s sent a chunk outside '%s' (offset %llu, "
				   "%u bytes)",
				   e->c->peer, f->shown,
				   (unsigned long long)h.offset, h.len);
	f->got[idx] = 1;
	f->received++;
	if (f->err) {
		/* Drain without writing; the result is already known. */
		if (credit_rx_drain(&k->rx, (unsigned int)slot))
			return engine_fail(e, XFER_FAIL_INTERNAL, -EPROTO,
					   "slot accounting");
		return 0;
	}
	j = &k->jobs[slot];
	j->h = h;
	j->f = f;
	j->index = idx;
	j->status = 0;
	f->inflight++;
	workq_push(e->wq, &j->item);
	return 0;
}

/* ---- FILE_END and placement ---- */

static void finalize(struct workq_item *item)
{
	struct snk_fin *fin = (struct snk_fin *)item;
	struct snk_file *f = fin->f;
	const struct sink_target *t = fin->k->t;
	uint32_t crc = 0;
	int rc;

	if (f->err)
		goto out_unlink;
	if (t->csum == XFER_CSUM_CRC32) {
		for (uint64_t i = 0; i < f->nslots; i++) {
			uint64_t len = f->size - i * fin->k->chunk;

			if (!f->got[i])
				continue;
			if (len > fin->k->chunk)
				len = fin->k->chunk;
			crc = ck_crc32_combine(crc, f->crcs[i], len);
		}
		crc = htobe32(crc);
		memcpy(fin->digest, &crc, 4);
		fin->dlen = 4;
	} else if (t->csum == XFER_CSUM_SHA256) {
		struct ck_sha256 *tree;

		rc = ck_sha256_create(&tree);
		for (uint64_t i = 0; !rc && i < f->nslots; i++)
			if (f->got[i])
				rc = ck_sha256_update(
					tree, f->shas + i * CK_SHA256_LEN,
					CK_SHA256_LEN);
		if (!rc)
			rc = ck_sha256_final(tree, fin->digest);
		ck_sha256_destroy(tree);
		if (rc) {
			file_fail(f, rc, "SHA-256 failed");
			goto out_unlink;
		}
		fin->dlen = CK_SHA256_LEN;
	}
	if (fin->dlen != f->end.digest_len ||
	    memcmp(fin->digest, f->end.digest, fin->dlen)) {
		file_fail(f, -EBADMSG,
			  "'%s' failed verification: its digest does not "
			  "match the sender's (corrupted in transit?); not "
			  "placed",
			  f->shown);
		goto out_unlink;
	}
	if (fchmod(f->fd, f->mode & 0777 & ~t->umask) < 0) {
		file_fail(f, -errno, "cannot set mode of '%s': %s", f->shown,
			  strerror(errno));
		goto out_unlink;
	}
	if (t->fsync && fsync(f->fd) < 0) {
		file_fail(f, -errno, "cannot fsync '%s': %s", f->shown,
			  strerror(errno));
		goto out_unlink;
	}
	rc = io_close(f->fd);
	f->fd = -1;
	if (rc) {
		file_fail(f, rc, "cannot write '%s': %s", f->shown,
			  strerror(-rc));
		unlinkat(f->dirfd, f->tmp, 0);
		return;
	}
	if (renameat(f->dirfd, f->tmp, f->dirfd, f->name) < 0) {
		file_fail(f, -errno, "cannot rename into '%s': %s", f->shown,
			  strerror(errno));
		unlinkat(f->dirfd, f->tmp, 0);
	}
	return;

out_unlink:
	if (f->fd >= 0) {
		close(f->fd);
		f->fd = -1;
		unlinkat(f->dirfd, f->tmp, 0);
	}
}

static int maybe_finalize(struct sink *k, struct snk_file *f)
{
	struct snk_fin *fin;

	if (!f->ended || f->inflight || f->finalizing)
		return 0;
	if (!f->err && f->received != f->end.nchunks)
		file_fail(f, -EPROTO, "'%s': %llu chunks announced, %llu came",
			  f->shown, (unsigned long long)f->end.nchunks,
			  (unsigned long long)f->received);
	fin = calloc(1, sizeof(*fin));
	if (!fin)
		return engine_fail(k->e, XFER_FAIL_RESOURCE, -ENOMEM,
				   "out of memory");
	fin->item.fn = finalize;
	fin->k = k;
	fin->f = f;
	f->finalizing = true;
	workq_push(k->e->wq, &fin->item);
	return 0;
}

static int on_end(struct sink *k, const struct wire_file_end *end)
{
	struct snk_file *f;

	if (end->file_id >= k->nfiles || !(f = k->files[end->file_id]) ||
	    f->ended || end->csum != (uint8_t)k->t->csum)
		return engine_fail(k->e, XFER_FAIL_PROTOCOL, -EPROTO,
				   "%s ended a file it never announced",
				   k->e->c->peer);
	f->ended = true;
	f->end = *end;
	if (end->flags & WIRE_END_ABORT)
		file_fail(f, -ECANCELED, "'%s': the sender gave up on it",
			  f->shown);
	return maybe_finalize(k, f);
}

static int send_result(struct sink *k, struct snk_fin *fin)
{
	struct snk_file *f = fin->f;
	struct wire_msg m = { .type = WIRE_FILE_RESULT };
	int rc;

	m.u.result.file_id = f->id;
	m.u.result.status = f->err;
	if (f->err) {
		snprintf(m.u.result.msg, sizeof(m.u.result.msg), "%s",
			 f->errmsg);
		if (f->err != -ECANCELED)
			log_warn("%s", f->errmsg);
		if (!k->st->files_failed++)
			k->st->first_fail = engine_klass_of(f->err, false);
	} else {
		m.u.result.digest_len = fin->dlen;
		memcpy(m.u.result.digest, fin->digest, fin->dlen);
		log_info("received '%s' (%llu bytes)", f->shown,
			 (unsigned long long)f->size);
		k->st->files_ok++;
		k->st->bytes += f->size;
	}
	rc = engine_send(k->e, &m);
	k->files[f->id] = NULL;
	k->active--;
	file_free(f);
	free(fin);
	return rc;
}

/* ---- engine role ---- */

static int snk_on_msg(struct engine *e, const struct wire_msg *m)
{
	struct sink *k = e->role_data;

	switch (m->type) {
	case WIRE_CREDIT:
		return 0;
	case WIRE_FILE:
		if (!k->done)
			return on_file(k, &m->u.file);
		break;
	case WIRE_FILE_END:
		if (!k->done)
			return on_end(k, &m->u.end);
		break;
	case WIRE_DONE:
		if (!k->done) {
			k->done = true;
			return 0;
		}
		break;
	default:
		break;
	}
	return engine_fail(e, XFER_FAIL_PROTOCOL, -EPROTO,
			   "%s sent an unexpected %s", e->c->peer,
			   wire_type_name(m->type));
}

static void snk_on_work(struct engine *e, struct workq_item *it)
{
	struct sink *k = e->role_data;

	if (it->fn == finalize) {
		send_result(k, (struct snk_fin *)it);
		return;
	}
	{
		struct snk_job *j = (struct snk_job *)it;
		struct snk_file *f = j->f;

		if (j->status == -EBADMSG)
			file_fail(f, -EBADMSG,
				  "'%s': chunk at offset %llu failed its CRC32 "
				  "check (corrupted in transit); not placed",
				  f->shown, (unsigned long long)j->h.offset);
		else if (j->status)
			file_fail(f, j->status, "cannot write '%s': %s",
				  f->shown, strerror(-j->status));
		f->inflight--;
		if (credit_rx_drain(&k->rx, j->slot)) {
			engine_fail(e, XFER_FAIL_INTERNAL, -EPROTO,
				    "slot accounting");
			return;
		}
		maybe_finalize(k, f);
	}
}

static int snk_pump(struct engine *e)
{
	struct sink *k = e->role_data;
	struct wire_msg m = { .type = WIRE_CREDIT };

	if (k->done && !k->active && !k->bye_sent) {
		m.type = WIRE_BYE;
		m.u.bye.files_ok = k->st->files_ok;
		m.u.bye.files_failed = k->st->files_failed;
		m.u.bye.bytes = k->st->bytes;
		k->bye_sent = true;
		e->closing = true;
		return engine_send(e, &m) ? 0 : 1;
	}
	/* Hand released slots back: batched, or at once when idle. */
	if (!k->bye_sent && credit_rx_should_report(&k->rx) &&
	    engine_out_empty(e) && credit_ctrl_can_send(&e->cc, false))
		return engine_send(e, &m) ? 0 : 1;
	return 0;
}

static bool snk_finished(const struct engine *e)
{
	const struct sink *k = e->role_data;

	return k->bye_sent && engine_out_empty(e) && e->tx_inflight == 0;
}

static uint32_t snk_slot_ack(const struct engine *e)
{
	struct sink *k = e->role_data;

	k->rx.reported = k->rx.released;
	return (uint32_t)k->rx.released;
}

static int snk_on_write_done(struct engine *e, uint64_t wr_id)
{
	return engine_fail(e, XFER_FAIL_INTERNAL, -EPROTO,
			   "write completion on the sink");
}

static const struct engine_role sink_role = {
	.on_msg = snk_on_msg,
	.on_data = snk_on_data,
	.on_write_done = snk_on_write_done,
	.on_work = snk_on_work,
	.pump = snk_pump,
	.finished = snk_finished,
	.slot_ack = snk_slot_ack,
};

int sink_run(struct engine *e, const struct sink_target *t,
	     struct xfer_stats *st)
{
	struct sink k = { 0 };
	int rc;

	k.e = e;
	k.t = t;
	k.st = st;
	k.chunk = e->c->geom.slot_size - WIRE_SLOT_HDR;
	rc = credit_rx_init(&k.rx, e->c->geom.slots);
	k.jobs = calloc(e->c->geom.slots, sizeof(*k.jobs));
	if (rc || !k.jobs) {
		rc = engine_fail(e, XFER_FAIL_RESOURCE, -ENOMEM,
				 "out of memory");
		goto out;
	}
	for (unsigned int i = 0; i < e->c->geom.slots; i++) {
		k.jobs[i].item.fn = write_chunk;
		k.jobs[i].k = &k;
		k.jobs[i].slot = i;
	}
	rc = engine_run(e, &sink_role, &k);
out:
	/* Let the workers finish before their files and jobs go away. */
	workq_wait_idle(e->wq);
	for (struct workq_item *it = workq_take_done(e->wq), *next; it;
	     it = next) {
		next = it->next;
		if (it->fn == finalize)
			free(it); /* its file is freed below */
	}
	workq_destroy(e->wq);
	e->wq = NULL;
	for (uint32_t i = 0; i < k.nfiles; i++)
		file_free(k.files[i]); /* removes unfinished temporaries */
	free(k.files);
	free(k.jobs);
	credit_rx_release(&k.rx);
	return rc;
}
