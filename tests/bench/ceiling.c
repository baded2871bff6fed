/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * bench_ceiling: the network-free ceiling of issue #14, for `make bench`
 * (tests/bench/ceiling.sh runs it). One push session, file to file, with
 * the real engine on both ends in one process: session_client() in the
 * main thread, session_serve() in a second one, over the in-memory
 * transport the engine tests use (tests/unit/memconn.c), so what is left
 * is the part of the pipeline a NIC does not hide: pread into staging,
 * CRC, the sink's CRC and pwrite, the engine's bookkeeping and thread
 * hand-offs.
 *
 * The transport moves each chunk with one memcpy (staging buffer to ring
 * slot, in the source's thread when it posts): the source's staging
 * cannot be the sink's ring, because the source reads ahead into any free
 * staging buffer (job index) while the chunk goes to the slot the credits
 * give it, which the sink may still be writing out. A NIC makes that copy
 * by DMA; -m measures its CPU cost per GiB so that it can be taken off.
 *
 *   bench_ceiling [-w WORKERS] [-c CHUNK] [-n WINDOW] [-k crc32|sha256|none]
 *                 [-d on|off|auto]  (O_DIRECT: --direct, --no-direct, auto)
 *                 [-H auto|on|off]  (ring and staging pages: --hugepages;
 *                                   -w 0: the default worker count)
 *                 [-D EVERY:MIN-MAX] (a slow sink: every EVERY-th chunk
 *                                   write takes MIN..MAX ms longer: the
 *                                   worker sleeps first, or the io_uring
 *                                   holds the write that long)
 *                 [-R MS]           (a slow source: every chunk read takes
 *                                   MS ms longer: the worker sleeps
 *                                   first, or the io_uring holds the read)
 *                 [-U DEPTH|off]    (the writes and reads in flight through
 *                                   io_uring: --io-depth; 0 the default)
 *                 [-G GBPS]         (no -n: the window cm_connect sizes
 *                                   for a link of GBPS Gb/s; 0 unknown)
 *                 SRC ROOT NAME     copy SRC to ROOT/NAME, print one line
 *   bench_ceiling -m [MIB]          per-core costs: CRC32 (ISA-L/zlib as
 *                                   built, and zlib), SHA-256, memcpy
 *
 * The copy's line: "CEIL key=value ...": wall seconds, bytes, user and
 * system CPU seconds of each side's threads (getrusage RUSAGE_THREAD of
 * every thread at its exit; a thread belongs to the side that started
 * it, through a --wrap of pthread_create), the process's peak RSS, the
 * chunks memconn delivered and its count of transport-rule breaches,
 * and iodepth=: the most writes or reads either side had in flight
 * through its io_uring (0: none, the workers wrote and read).
 * Exit 0 only when both verdicts are ok and memconn saw no breach.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "memconn.h"
#include "transfer/client/client_int.h"
#include "transfer/session/session.h"
#include "transfer/wire/wire.h"
#include "transfer/xfer.h"
#include "util/checksum.h"
#include "util/clock.h"
#include "util/hugemem.h"
#include "util/log.h"
#include "util/workq.h"

/* ---- CPU per side: every thread accounts for itself as it exits ---- */

enum {
	SIDE_SRC = 1,
	SIDE_SINK = 2
};

static pthread_key_t side_key; /* value: the thread's side */
static pthread_mutex_t cpu_lock = PTHREAD_MUTEX_INITIALIZER;
static double cpu_user[3], cpu_sys[3];
static unsigned int nthreads[3];

static void account_thread(int side)
{
	struct rusage ru;

	if (getrusage(RUSAGE_THREAD, &ru))
		return;
	pthread_mutex_lock(&cpu_lock);
	cpu_user[side] += ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6;
	cpu_sys[side] += ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
	nthreads[side]++;
	pthread_mutex_unlock(&cpu_lock);
}

static void side_exit(void *v)
{
	account_thread((int)(uintptr_t)v);
}

static int side_of_self(void)
{
	void *v = pthread_getspecific(side_key);

	return v ? (int)(uintptr_t)v : SIDE_SRC; /* the main thread: source */
}

static void set_side(int side)
{
	pthread_setspecific(side_key, (void *)(uintptr_t)side);
}

struct tramp {
	void *(*fn)(void *);
	void *arg;
	int side;
};

static void *tramp_main(void *p)
{
	struct tramp t = *(struct tramp *)p;

	free(p);
	set_side(t.side); /* side_exit runs when the thread ends */
	return t.fn(t.arg);
}

/* Linked with -Wl,--wrap=pthread_create (Makefile): librdcp.a's too. */
int __real_pthread_create(pthread_t *th, const pthread_attr_t *attr,
			  void *(*fn)(void *), void *arg);
int __wrap_pthread_create(pthread_t *th, const pthread_attr_t *attr,
			  void *(*fn)(void *), void *arg);

int __wrap_pthread_create(pthread_t *th, const pthread_attr_t *attr,
			  void *(*fn)(void *), void *arg)
{
	struct tramp *t = malloc(sizeof(*t));
	int rc;

	if (!t)
		return EAGAIN;
	t->fn = fn;
	t->arg = arg;
	t->side = side_of_self();
	rc = __real_pthread_create(th, attr, tramp_main, t);
	if (rc)
		free(t);
	return rc;
}

/* ---- -D: a sink whose writes are sometimes slow ---- */

/*
 * Linked with -Wl,--wrap=direct_pwrite (Makefile): the sink's chunk
 * writes (sink_chunk.c) come here. Every slow_every-th call sleeps first,
 * for slow_min..slow_max ms spread evenly by a fixed sequence, so that A
 * and B runs see the same delays at the same chunks: a disk or a file
 * system that stalls now and then (a journal commit, a flush, writeback
 * throttling) while the others go at full speed.
 */
static unsigned int slow_every, slow_min_ms, slow_max_ms;
static unsigned long slow_calls, slow_delays;

/* The delay of call n (1, 2, ...): 0 or slow_min..slow_max ms. */
static unsigned int slow_ms(void)
{
	unsigned long n, k;

	if (!slow_every)
		return 0;
	n = __atomic_add_fetch(&slow_calls, 1, __ATOMIC_RELAXED);
	if (n % slow_every)
		return 0;
	k = n / slow_every;
	__atomic_add_fetch(&slow_delays, 1, __ATOMIC_RELAXED);
	return slow_min_ms +
	       (unsigned int)((k * 7) % (slow_max_ms - slow_min_ms + 1));
}

struct direct_fd;
int __real_direct_pwrite(const struct direct_fd *d, int fd, const void *buf,
			 size_t len, uint64_t off);
int __wrap_direct_pwrite(const struct direct_fd *d, int fd, const void *buf,
			 size_t len, uint64_t off);

int __wrap_direct_pwrite(const struct direct_fd *d, int fd, const void *buf,
			 size_t len, uint64_t off)
{
	unsigned int ms = slow_ms();

	if (ms)
		usleep(ms * 1000u);
	return __real_direct_pwrite(d, fd, buf, len, off);
}

/*
 * -Wl,--wrap=direct_pwrite_async: the sink's writes with an io_uring
 * (-U). The delay goes with the write the pool submits (a linked
 * timeout: the device is slow, the worker goes on); what was written at
 * once (a file that does not go direct) waits here, as above.
 */
int __real_direct_pwrite_async(const struct direct_fd *d, int fd,
			       const void *buf, size_t len, uint64_t off,
			       struct workq_item *item);
int __wrap_direct_pwrite_async(const struct direct_fd *d, int fd,
			       const void *buf, size_t len, uint64_t off,
			       struct workq_item *item);

int __wrap_direct_pwrite_async(const struct direct_fd *d, int fd,
			       const void *buf, size_t len, uint64_t off,
			       struct workq_item *item)
{
	unsigned int ms = slow_ms();
	int rc = __real_direct_pwrite_async(d, fd, buf, len, off, item);

	if (ms && item->io.len)
		item->io.delay_ns = (uint64_t)ms * 1000000u;
	else if (ms)
		usleep(ms * 1000u);
	return rc;
}

/* ---- -R: a source whose reads are slow ---- */

static unsigned int read_ms; /* added to every chunk read */

int __real_direct_pread(const struct direct_fd *d, int fd, void *buf,
			size_t len, uint64_t off);
int __wrap_direct_pread(const struct direct_fd *d, int fd, void *buf,
			size_t len, uint64_t off);

/* -Wl,--wrap=direct_pread: the workers' reads (source_file.c). */
int __wrap_direct_pread(const struct direct_fd *d, int fd, void *buf,
			size_t len, uint64_t off)
{
	if (read_ms)
		usleep(read_ms * 1000u);
	return __real_direct_pread(d, fd, buf, len, off);
}

bool __real_direct_pread_async(const struct direct_fd *d, void *buf,
			       size_t len, uint64_t off,
			       struct workq_item *item);
bool __wrap_direct_pread_async(const struct direct_fd *d, void *buf,
			       size_t len, uint64_t off,
			       struct workq_item *item);

/*
 * -Wl,--wrap=direct_pread_async: a read for the io_uring carries the
 * delay (a linked timeout); one it declines is read by a worker, above.
 */
bool __wrap_direct_pread_async(const struct direct_fd *d, void *buf,
			       size_t len, uint64_t off,
			       struct workq_item *item)
{
	bool ring = __real_direct_pread_async(d, buf, len, off, item);

	if (ring && read_ms)
		item->io.delay_ns = (uint64_t)read_ms * 1000000u;
	return ring;
}

/* -Wl,--wrap=workq_destroy: the io_uring depth either side reached. */
static unsigned int io_peak;
void __real_workq_destroy(struct workq *q);
void __wrap_workq_destroy(struct workq *q);

void __wrap_workq_destroy(struct workq *q)
{
	/* The sink's thread; read after it is joined. */
	if (q && workq_io_peak(q) > io_peak)
		io_peak = workq_io_peak(q);
	__real_workq_destroy(q);
}

static int parse_slow(const char *s)
{
	char *end;

	slow_every = (unsigned int)strtoul(s, &end, 10);
	if (*end != ':')
		return -EINVAL;
	slow_min_ms = (unsigned int)strtoul(end + 1, &end, 10);
	if (*end != '-')
		return -EINVAL;
	slow_max_ms = (unsigned int)strtoul(end + 1, &end, 10);
	if (*end || !slow_every || slow_max_ms < slow_min_ms ||
	    slow_max_ms > 10000)
		return -EINVAL;
	return 0;
}

/* ---- one session ---- */

struct sink_arg {
	const struct xfer_opts *o;
	int rootfd;
	struct cm_conn *c;
	enum xfer_fail v;
};

static void *sink_main(void *p)
{
	struct sink_arg *a = p;

	set_side(SIDE_SINK); /* and every worker it starts */
	a->v = session_serve(a->o, a->rootfd, a->c);
	return NULL;
}

static int parse_csum(const char *s, enum xfer_csum *out)
{
	if (!strcmp(s, "crc32"))
		*out = XFER_CSUM_CRC32;
	else if (!strcmp(s, "sha256"))
		*out = XFER_CSUM_SHA256;
	else if (!strcmp(s, "none"))
		*out = XFER_CSUM_NONE;
	else
		return -EINVAL;
	return 0;
}

/* The source's staging pages as one word: hugetlb, thp, 4k or none. */
static const char *pages_token(const char *pages)
{
	return !strcmp(pages, hugemem_kind_name(HUGEMEM_HUGETLB)) ? "hugetlb"
	       : !strcmp(pages, hugemem_kind_name(HUGEMEM_THP))   ? "thp"
	       : !strcmp(pages, hugemem_kind_name(HUGEMEM_PLAIN)) ? "4k"
								  : "none";
}

/* -L: memconn delivers as this many queue pairs would (0, 1: one). */
static unsigned int ceil_lanes;
/* -G: the link rate the window is sized for when -n does not set it. */
static unsigned int ceil_gbps;

static int copy_once(struct xfer_opts *co, const char *root)
{
	struct xfer_opts so;
	struct cm_geom g = client_geom(co);
	struct sink_arg sa = { .o = &so };
	struct cm_conn *a = NULL, *b = NULL;
	struct memconn_stats ms;
	struct xfer_stats st = { 0 };
	struct rusage ru;
	enum xfer_fail vc;
	pthread_t tid;
	double t0, secs;
	int rc;

	/* memconn is no link: size the window as cm_connect would. */
	if (!g.slots)
		g.slots = (uint16_t)cm_window_slots(ceil_gbps, g.chunk_size, 0);
	so = *co;
	so.copy.srcs = NULL;
	so.copy.nsrcs = 0;
	so.copy.dest = NULL;
	so.serve.root = root;
	sa.rootfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (sa.rootfd < 0) {
		fprintf(stderr, "bench_ceiling: cannot open '%s': %s\n", root,
			strerror(errno));
		return 2;
	}
	struct memconn_faults lf = { .lanes = ceil_lanes, .seed = 1 };

	rc = memconn_pair(&g, ceil_lanes > 1 ? &lf : NULL, &a, &b);
	if (rc) {
		fprintf(stderr, "bench_ceiling: memconn_pair: %s\n",
			strerror(-rc));
		return 2;
	}
	sa.c = b;
	t0 = clock_now_s();
	rc = pthread_create(&tid, NULL, sink_main, &sa);
	if (rc) {
		fprintf(stderr, "bench_ceiling: pthread_create: %s\n",
			strerror(rc));
		return 2;
	}
	vc = session_client(co, a, &st);
	memconn_get_stats(a, &ms);
	cm_conn_destroy(a);
	pthread_join(tid, NULL);
	secs = clock_now_s() - t0;
	account_thread(SIDE_SRC); /* the source's engine: this thread */
	cm_conn_destroy(b);
	close(sa.rootfd);
	getrusage(RUSAGE_SELF, &ru);
	printf("CEIL secs=%.4f bytes=%llu src_user=%.3f src_sys=%.3f "
	       "sink_user=%.3f sink_sys=%.3f src_threads=%u sink_threads=%u "
	       "maxrss_kib=%ld chunks=%llu breaches=%llu client=%s server=%s "
	       "workers=%u pages=%s window=%u slow=%lu wait=%.4f iodepth=%u\n",
	       secs, (unsigned long long)st.bytes, cpu_user[SIDE_SRC],
	       cpu_sys[SIDE_SRC], cpu_user[SIDE_SINK], cpu_sys[SIDE_SINK],
	       nthreads[SIDE_SRC], nthreads[SIDE_SINK], ru.ru_maxrss,
	       (unsigned long long)ms.writes,
	       (unsigned long long)memconn_violations(&ms), xfer_fail_name(vc),
	       xfer_fail_name(sa.v), st.workers, pages_token(st.pages),
	       (unsigned int)g.slots, slow_delays, st.window_wait_s, io_peak);
	if (st.error[0])
		fprintf(stderr, "bench_ceiling: %s\n", st.error);
	return vc == XFER_OK && sa.v == XFER_OK && !memconn_violations(&ms) ? 0
									    : 1;
}

/* ---- per-core costs ---- */

static uint8_t *big_buffer(size_t len)
{
	uint8_t *p = aligned_alloc(4096, len);
	uint64_t x = 0x9e3779b97f4a7c15ull;

	if (!p) {
		perror("bench_ceiling: aligned_alloc");
		exit(2);
	}
	for (size_t i = 0; i < len; i += 8) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		memcpy(p + i, &x, 8);
	}
	return p;
}

enum micro_kind {
	M_CK_CRC32,
	M_ZLIB_CRC32,
	M_SHA256,
	M_MEMCPY
};

/* GB/s (1e9 bytes) of one pass of kind over len bytes in chunks. */
static double micro_pass(enum micro_kind k, uint8_t *src, uint8_t *dst,
			 size_t len, size_t chunk)
{
	volatile uint32_t sink = 0;
	uint8_t md[CK_SHA256_LEN];
	double t0 = clock_now_s(), dt;

	for (size_t off = 0; off < len; off += chunk) {
		switch (k) {
		case M_CK_CRC32:
			sink ^= ck_crc32(0, src + off, chunk);
			break;
		case M_ZLIB_CRC32:
			sink ^= (uint32_t)crc32_z(0, src + off, chunk);
			break;
		case M_SHA256:
			if (ck_sha256(src + off, chunk, md))
				exit(2);
			sink ^= md[0];
			break;
		case M_MEMCPY:
			memcpy(dst + off, src + off, chunk);
			sink ^= dst[off];
			break;
		}
	}
	dt = clock_now_s() - t0;
	(void)sink;
	return (double)len / 1e9 / dt;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static int micro(size_t mib)
{
	static const struct {
		enum micro_kind k;
		const char *name;
	} kinds[] = {
		{ M_CK_CRC32, "crc32_rdcp" },
		{ M_ZLIB_CRC32, "crc32_zlib" },
		{ M_SHA256, "sha256" },
		{ M_MEMCPY, "memcpy" },
	};
	size_t len = mib << 20, chunk = 1u << 20;
	uint8_t *src = big_buffer(len), *dst = big_buffer(len);

	/* Medians of 7 passes over a buffer far beyond the caches. */
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
		double r[7];

		for (int n = 0; n < 7; n++)
			r[n] = micro_pass(kinds[i].k, src, dst, len, chunk);
		qsort(r, 7, sizeof(r[0]), cmp_double);
		printf("MICRO %s %.3f GB/s %.3f s/GiB\n", kinds[i].name, r[3],
		       1.073741824 / r[3]);
	}
#ifdef RDCP_HAVE_ISAL
	printf("MICRO crc32_rdcp_is isal\n");
#else
	printf("MICRO crc32_rdcp_is zlib\n");
#endif
	free(src);
	free(dst);
	return 0;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: bench_ceiling [-w WORKERS] [-c CHUNK] [-n WINDOW] "
		"[-k crc32|sha256|none] [-d on|off|auto] [-H auto|on|off] "
		"[-L LANES] [-D EVERY:MIN-MAX] [-R MS] [-G GBPS] [-U DEPTH|off] "
		"SRC ROOT NAME\n"
		"       bench_ceiling -m [MIB]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	struct xfer_opts co;
	const char *srcs[1];
	int opt;

	if (pthread_key_create(&side_key, side_exit))
		return 2;
	log_set_level(getenv("CEIL_DEBUG") ? LOG_DEBUG : LOG_WARN);
	xfer_opts_init(&co);
	while ((opt = getopt(argc, argv, "w:c:n:k:d:H:L:D:R:G:U:m")) != -1) {
		switch (opt) {
		case 'L':
			ceil_lanes = (unsigned int)atoi(optarg);
			break;
		case 'G':
			ceil_gbps = (unsigned int)atoi(optarg);
			break;
		case 'D':
			if (parse_slow(optarg))
				usage();
			break;
		case 'R':
			read_ms = (unsigned int)atoi(optarg);
			break;
		case 'U':
			co.link.io_depth = !strcmp(optarg, "off")
						   ? XFER_IO_DEPTH_OFF
						   : (unsigned int)strtoul(
							     optarg, NULL, 0);
			break;
		case 'w':
			co.link.workers = (unsigned int)atoi(optarg);
			break;
		case 'c':
			co.link.chunk_size = (uint32_t)strtoul(optarg, NULL, 0);
			break;
		case 'n':
			co.link.window = (uint16_t)atoi(optarg);
			break;
		case 'k':
			if (parse_csum(optarg, &co.copy.csum))
				usage();
			break;
		case 'd':
			if (!strcmp(optarg, "on"))
				co.link.direct = XFER_DIRECT_ON;
			else if (!strcmp(optarg, "off"))
				co.link.direct = XFER_DIRECT_OFF;
			else if (strcmp(optarg, "auto"))
				usage();
			break;
		case 'H':
			if (!strcmp(optarg, "on"))
				co.link.hugepages = HUGEMEM_ON;
			else if (!strcmp(optarg, "off"))
				co.link.hugepages = HUGEMEM_OFF;
			else if (strcmp(optarg, "auto"))
				usage();
			break;
		case 'm':
			return micro(optind < argc
					     ? strtoul(argv[optind], NULL, 0)
					     : 512);
		default:
			usage();
		}
	}
	if (argc - optind != 3 || co.link.chunk_size < 4096 ||
	    (co.link.chunk_size & (co.link.chunk_size - 1)))
		usage();
	srcs[0] = argv[optind];
	co.copy.srcs = srcs;
	co.copy.nsrcs = 1;
	co.copy.dest = argv[optind + 2];
	return copy_once(&co, argv[optind + 1]);
}
