/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * The source's packs: runs of small regular files (no holes, never file
 * id 0) go whole into one slot as records of header, digest, path and
 * data, read by one worker job; a file that cannot be read goes as an
 * ABORT record with the reason. One PACK_DONE answers for the slot.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "transfer/source/source_int.h"
#include "util/checksum.h"
#include "util/clock.h"
#include "util/io.h"
#include "util/log.h"

/* Digest and data bytes kept for f's record, room for an abort too. */
static size_t pack_data_room(const struct source *s, const struct src_file *f)
{
	size_t data = s->dlen + (size_t)f->w->st.st_size;

	return data > PACK_ABORT_ROOM ? data : PACK_ABORT_ROOM;
}

/* The most an owner adds to a record: two names of the longest. */
#define PACK_OWNER_ROOM (10 + 2 * WIRE_OWNER_NAME_MAX)

static size_t pack_rec_len(const struct source *s, const struct src_file *f)
{
	return wire_pack_rec_len(strlen(f->w->wire), 0, pack_data_room(s, f)) +
	       (s->cfg->p.flags & WIRE_HELLO_OWNERS ? PACK_OWNER_ROOM : 0);
}

/*
 * Whether f travels in a pack: a small regular file without holes, never
 * the session's first id (the sink names DEST after that one as it is
 * announced, in its engine thread).
 */
bool src_packable(struct source *s, struct src_file *f)
{
	const struct walk_entry *w = f->w;

	/* -H: a file of several names goes alone, LINKED (source_links.c) */
	/* -X/-A: one with attributes too, after its XATTRS (looked at last) */
	return s->pack_max && !w->err && w->kind == WIRE_KIND_FILE &&
	       !w->range && s->nwire > 0 && !src_links_may(s, f) &&
	       (uint64_t)w->st.st_size <= s->pack_max &&
	       (uint64_t)w->st.st_blocks * 512 >= (uint64_t)w->st.st_size &&
	       pack_rec_len(s, f) <= s->chunk_size &&
	       (!src_xattrs_asked(s) || !src_has_xattrs(s, f));
}

/*
 * Worker: f's record at out + *pos, or an aborting one if it fails; *crc
 * goes on over the record's header, digest and path.
 */
static int pack_file(struct source *s, struct src_file *f, uint8_t *out,
		     size_t *pos, uint32_t *crc)
{
	size_t head;
	struct wire_pack_rec r = {
		.file_id = f->wire_id,
		.path = f->w->wire,
		.path_len = (uint16_t)strlen(f->w->wire),
		.mode = f->st.st_mode & 07777,
		.mtime_sec = f->st.st_mtim.tv_sec,
		.mtime_nsec = (uint32_t)f->st.st_mtim.tv_nsec,
		.atime_sec = f->st.st_atim.tv_sec,
		.atime_nsec = (uint32_t)f->st.st_atim.tv_nsec,
		.size = (uint32_t)f->st.st_size,
		.digest_len = s->dlen,
	};
	uint8_t *data;
	struct stat now;
	int fd, rc;

	if (src_owner(s, &f->st, &r.owner))
		r.flags |= WIRE_PACK_OWNER;
	data = out + *pos + wire_pack_rec_len(r.path_len, s->dlen, 0) +
	       wire_pack_owner_len(&r);
	fd = walk_open(&s->walk, f->w);
	rc = fd < 0 ? fd : io_pread_full(fd, data, r.size, 0);
	if (fd < 0)
		file_fail(f, fd, "cannot open '%s': %s", f->path,
			  strerror(-fd));
	else if (rc == -ENODATA)
		file_fail(f, -ESTALE,
			  "'%s' changed while it was being sent: not copied",
			  f->path);
	else if (rc)
		file_fail(f, rc, "cannot read '%s': %s", f->path,
			  strerror(-rc));
	else
		src_check_unchanged(f, fd, &now);
	if (fd >= 0)
		close(fd);
	if (!f->err) {
		rc = wire_pack_digest((uint8_t)s->cfg->p.csum, data, r.size,
				      f->digest);
		if (rc < 0)
			return rc;
		f->dlen = (uint8_t)rc;
		memcpy(r.digest, f->digest, f->dlen);
	} else {
		/*
		 * The sink reports it failed, with our message, cut to the
		 * room planned for this record (the full one is ours).
		 */
		r.flags = WIRE_PACK_ABORT;
		r.status = f->err;
		r.digest_len = 0;
		r.size = (uint32_t)strnlen(f->errmsg, WIRE_MSG_MAX);
		if (r.size > pack_data_room(s, f))
			r.size = (uint32_t)pack_data_room(s, f);
		memcpy(out + *pos + wire_pack_rec_len(r.path_len, 0, 0),
		       f->errmsg, r.size);
	}
	head = wire_pack_put(out + *pos, &r);
	*crc = ck_crc32(*crc, out + *pos, head);
	*pos += head + r.size;
	return 0;
}

/* Worker: read every file of a pack into its records, then seal. */
static void read_pack(struct workq_item *item)
{
	struct src_job *j = (struct src_job *)item;
	struct source *s = j->s;
	uint8_t *data = cm_stage(s->e->c, j->idx);
	uint8_t *raw = j->pl.scratch ? j->pl.scratch : data;
	size_t pos = 0;

	j->crc = 0; /* of the records' metadata: their digests cover data */
	for (unsigned int i = 0; !j->status && i < j->nfiles; i++)
		j->status = pack_file(s, src_file_at(s, j->first + i), raw,
				      &pos, &j->crc);
	if (j->status)
		return;
	j->len = j->wire_len = (uint32_t)pos;
	j->flags = WIRE_SLOT_PACKED;
	j->status = src_seal(s, j, raw, data, src_file_at(s, j->first)->wire_id,
			     j->nfiles, 0);
}

/*
 * Plans a pack of the small files from next_file on, as many as fit one
 * slot. Returns 1, 0 when no staging buffer is free, -1 on a failure.
 */
int src_plan_pack(struct source *s)
{
	struct src_job *j = src_take_job(s);
	size_t room = s->chunk_size;

	if (!j)
		return 0;
	j->first = s->next_file;
	j->nfiles = 0;
	while (j->nfiles < WIRE_PACK_MAX_FILES) {
		struct src_file *f;

		if (s->next_file == s->nfiles && !s->walk.done &&
		    src_more_files(s)) {
			src_free_job(s, j);
			return -1;
		}
		if (s->next_file == s->nfiles)
			break;
		f = src_file_at(s, s->next_file);
		if (!src_packable(s, f) || pack_rec_len(s, f) > room)
			break;
		room -= pack_rec_len(s, f);
		f->t0 = clock_now_s();
		f->st = f->w->st;
		f->packed = true;
		src_announce(s, f);
		src_started(s, f);
		s->next_file++;
		j->nfiles++;
	}
	src_file_at(s, j->first)->pack_len = j->nfiles;
	j->state = JOB_READING;
	j->f = NULL;
	j->status = 0;
	j->item.fn = read_pack;
	src_fifo_push(s, IT_PACK, NULL, j);
	s->held++;
	workq_push(s->e->wq, &j->item);
	return 1;
}
