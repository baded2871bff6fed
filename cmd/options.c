/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * The option table and --help text (options.h).
 */
#include "cmd/options.h"

const char rdcp_doc[] =
	"rdcp -- copy files between hosts over RDMA (rdma_cm + verbs), or "
	"TCP where there is no RDMA; every chunk and every file verified.\n\n"
	"  rdcp SRC... [USER@]HOST:DEST   send (rdcp started on HOST over ssh)\n"
	"  rdcp [USER@]HOST:SRC... DEST   fetch\n"
	"  rdcp H1:SRC... H2:DEST         from one host to the other\n"
	"  rdcp SRC... HOST::DEST         to a receiver already running (rdcpd)\n"
	"  rdcp --listen --root DIR       run a receiver\n"
	"  rdcp --keygen FILE             make a pre-shared key\n"
	"  rdcp --check [HOST]            diagnose RDMA and the way to HOST\n\n"
	"Over ssh, remote paths are relative to the remote home or absolute, "
	"and no key file is needed; to a receiver (HOST::PATH, "
	"rdcp://HOST[:PORT]/PATH) they are relative to its --root. A DEST ending in '/' or naming a directory receives into it "
	"(created if it ends in '/'); several SRCs need a directory. IPv6 "
	"addresses go in brackets: [fe80::1]:dir/."
	"\v"
	"Exit status:\n"
	"  0   all files copied and verified\n"
	"  1   internal error (a bug)\n"
	"  2   usage error\n"
	"  3   cannot connect or listen\n"
	"  4   authentication failed, or no usable key file\n"
	"  5   protocol error or version mismatch\n"
	"  6   local I/O error (a source unreadable, ...)\n"
	"  7   remote I/O error (the receiver could not write)\n"
	"  8   verification failed (file not placed)\n"
	"  9   partial: some files copied, some failed\n"
	"  10  resources: memory, memlock limit, RDMA device\n"
	"  11  peer lost: host down, link cut, or process killed\n"
	"  12  ssh failed, or rdcp is missing or too old on the other host\n"
	"  13  --max-delete: more would be deleted; nothing was\n"
	"  130 interrupted\n\n"
	"Sizes and rates take K/M/G/T (powers of 1024) or KB/MB/GB/TB (powers "
	"of 1000).";

const char rdcp_args_doc[] =
	"SRC... HOST:DEST\nHOST:SRC... DEST\nH1:SRC... H2:DEST\n--listen\n"
	"--keygen FILE\n--check [HOST]";

const struct argp_option rdcp_options[] = {
	{ NULL, 0, NULL, 0, "Receiver:", 1 },
	{ "listen", 'l', NULL, 0, "Run as a receiver", 1 },
	{ "root", OPT_ROOT, "DIR", 0,
	  "Directory that DEST paths are confined to (default: .)", 1 },
	{ "bind", OPT_BIND, "ADDR", 0,
	  "Listen on this address only (default: every IPv6 and IPv4 address)",
	  1 },
	{ "once", OPT_ONCE, NULL, 0, "Serve one session, exit with its status",
	  1 },
	{ "max-sessions", OPT_MAX_SESSIONS, "N", 0,
	  "Concurrent sessions (default 16)", 1 },
	{ "allow-owners", OPT_ALLOW_OWNERS, NULL, 0,
	  "Let clients' -o/-g give files other owners and keep setuid/setgid "
	  "bits (else: files stay the receiver's, those bits cleared)",
	  1 },
	{ "allow-devices", OPT_ALLOW_DEVICES, NULL, 0,
	  "Let clients' --devices make device nodes (as root; else: none, "
	  "said once a session)",
	  1 },
	{ "clients", OPT_CLIENTS, "DIR", 0,
	  "Named clients' keys, DIR/NAME.key each (default: /etc/rdcp/clients "
	  "if it exists); the site key is then optional",
	  1 },
	{ "modules", OPT_MODULES, "FILE", 0,
	  "Serve the modules FILE declares, each with who may read and write "
	  "it (rdcp-modules.conf(5); default: /etc/rdcp/modules.conf if it "
	  "exists); SIGHUP reads keys and modules again",
	  1 },
	{ "audit-log", OPT_AUDIT_LOG, "FILE", 0,
	  "Also append the session lines (and with -v the file lines) as "
	  "JSON lines to FILE, reopened on SIGHUP",
	  1 },
	{ "metrics", OPT_METRICS, "[HOST:]PORT", 0,
	  "Serve Prometheus metrics at http://HOST:PORT/metrics (HOST "
	  "default 127.0.0.1; off unless given)",
	  1 },
	{ NULL, 0, NULL, 0, "Copying:", 2 },
	{ "recursive", 'r', NULL, 0,
	  "Copy directories: their trees, with empty directories and "
	  "symlinks (copied as links, never followed); hard links become "
	  "separate files (unless -H)",
	  2 },
	{ "preserve", 'p', NULL, 0,
	  "Keep mode, access and modification times (else: mode less the "
	  "umask, new times)",
	  2 },
	{ "resume", OPT_RESUME, NULL, 0,
	  "Finish an interrupted copy: what is already at DEST is checked "
	  "chunk by chunk against the source's chunk digests and only what "
	  "differs is sent; partial files are kept on failure for the next "
	  "try",
	  2 },
	{ "archive", 'a', NULL, 0,
	  "-r -p -o -g --sync mtime: mirror a tree with its owners; a re-run "
	  "sends only files whose size or modification time differ (and sets "
	  "the mode, times and owners of the others)",
	  2 },
	{ "owner", 'o', NULL, 0,
	  "Keep owners (by name, else the number; a receiver that may not set "
	  "them warns once); setuid bits only with the owner",
	  2 },
	{ "group", 'g', NULL, 0,
	  "Keep groups (by name, else the number); setgid bits only with the "
	  "group",
	  2 },
	{ "numeric-ids", OPT_NUMERIC_IDS, NULL, 0,
	  "With -o/-g/-A: owners, groups and ACLs' users and groups by "
	  "number, never by name",
	  2 },
	{ "xattrs", 'X', NULL, 0,
	  "Keep extended attributes: user.*, and trusted.*/security.* where "
	  "both sides are root (at most 8 KiB a file)",
	  2 },
	{ "acls", 'A', NULL, 0,
	  "Keep POSIX ACLs (access and directories' default), their users "
	  "and groups by name, else the number",
	  2 },
	{ "hard-links", 'H', NULL, 0,
	  "Keep hard links: names of one file within the copy become links "
	  "to its first name sent",
	  2 },
	{ NULL, 'D', NULL, 0, "Same as --devices --specials", 2 },
	{ "devices", OPT_DEVICES, NULL, 0,
	  "Make device nodes (where the receiving side is root; else it "
	  "warns once)",
	  2 },
	{ "specials", OPT_SPECIALS, NULL, 0, "Make FIFOs and sockets", 2 },
	{ "sync", OPT_SYNC, "LEVEL", OPTION_ARG_OPTIONAL,
	  "Keep files already at DEST that pass a check: exists, size, mtime "
	  "(size and modification time, the default) or checksum (every "
	  "chunk compared; only differing chunks sent)",
	  2 },
	{ "no-clobber", 'n', NULL, 0, "Never replace an existing file", 2 },
	{ "update", 'u', NULL, 0,
	  "Replace only files older than the source (modification time)", 2 },
	{ "dry-run", OPT_DRY_RUN, NULL, 0,
	  "Ask the receiving side what it has and print what a copy would "
	  "do to each entry (new, replace, exists, keep); write nothing, "
	  "send no file data",
	  2 },
	{ "delete", OPT_DELETE, NULL, 0,
	  "With -r, once every file is copied and verified: remove from the "
	  "directories sent what the source lacks (kept: what --exclude "
	  "leaves out), as rsync --delete; with --dry-run, list it",
	  2 },
	{ "max-delete", OPT_MAX_DELETE, "N", 0,
	  "With --delete: if more than N entries would go, remove none (exit "
	  "13)",
	  2 },
	{ "sparse", OPT_SPARSE, NULL, 0,
	  "Also turn all-zero chunks into holes (holes in the source are "
	  "always kept)",
	  2 },
	{ "compress", OPT_COMPRESS, "LEVEL", OPTION_ARG_OPTIONAL,
	  "zlib per chunk, level 1-9 (default 1); chunks that do not shrink "
	  "go raw",
	  2 },
	{ "encrypt", OPT_ENCRYPT, NULL, 0,
	  "Encrypt file data with AES-256-GCM under a per-session key "
	  "derived from the pre-shared key",
	  2 },
	{ "bwlimit", OPT_BWLIMIT, "RATE", 0,
	  "Send at most RATE bytes per second (500M, 2G, 1GB)", 2 },
	{ NULL, 0, NULL, 0,
	  "Other host (HOST:PATH over ssh, HOST::PATH to a "
	  "receiver):",
	  3 },
	{ "rsh", 'e', "COMMAND", 0,
	  "The ssh command line that starts rdcp on HOST (default: "
	  "$RDCP_RSH, else ssh), e.g. -e 'ssh -p 2222 -i ~/.ssh/dtn'",
	  3 },
	{ "rdcp-path", OPT_RDCP_PATH, "PROGRAM", 0,
	  "rdcp on the other host, as its shell reads it (default: rdcp)", 3 },
	{ "daemon", OPT_DAEMON, NULL, 0,
	  "HOST:PATH names a receiver already running (rdcpd, rdcp "
	  "--listen), as HOST::PATH does; for rdcp.conf on sites with rdcpd",
	  3 },
	{ "ssh", OPT_SSH, NULL, 0,
	  "HOST:PATH goes over ssh even if rdcp.conf says daemon", 3 },
	{ "port-range", OPT_PORT_RANGE, "LO-HI", 0,
	  "Ports the rdcp started over ssh may listen on, for firewalls "
	  "(default 49152-65535)",
	  3 },
	{ "rdma-addr", OPT_RDMA_ADDR, "ADDR", 0,
	  "Connect for data to this address of the host started over ssh "
	  "(default: the first of its RDMA addresses rdma_cm routes to)",
	  3 },
	{ "server", OPT_SERVER, NULL, OPTION_HIDDEN,
	  "Internal: the other end of a copy over ssh", 3 },
	{ "boot-stdin", OPT_BOOT_STDIN, "HOST", OPTION_HIDDEN,
	  "Internal: send SRC... to DEST on HOST, whose rdcp --server's "
	  "bootstrap line is the first line of stdin",
	  3 },
	{ NULL, 0, NULL, 0, "Transfer:", 4 },
	{ "transport", OPT_TRANSPORT, "T", 0,
	  "rdma, tcp, or auto (default): RDMA when rdma_cm resolves the peer "
	  "to an RDMA device, else TCP; a receiver serves both",
	  4 },
	{ "device", OPT_DEVICE, "NAME", 0,
	  "Use this RDMA device (mlx5_0, rxe0, ...) when a host has several: "
	  "RDMA is then required, and a receiver without --bind listens on "
	  "the device's address; a list (rxe0,rxe1) names the rails --streams "
	  "lanes may use, the first lane 0's, and a receiver then listens on "
	  "every address",
	  4 },
	{ "gid-index", OPT_GID_INDEX, "N", 0,
	  "RoCE: use the address of GID N of the device (see rdcp --check): "
	  "with --device, pins the GID the connection uses",
	  4 },
	{ "streams", OPT_STREAMS, "N", 0,
	  "Queue pairs (TCP: connections) per session, 1..16 (default: "
	  "RDMA 4 on a port of 100 Gb/s or more, else 2; TCP 1)",
	  4 },
	{ "split", OPT_SPLIT, "N", 0,
	  "Push one file of at least --split-size in N byte ranges, one "
	  "session each, 2..16; 0 or 1: one session; auto (default): one per "
	  "rail over RDMA, to a receiver already running",
	  4 },
	{ "split-size", OPT_SPLIT_SIZE, "SIZE", 0,
	  "The smallest file --split splits (default 1G)", 4 },
	{ "port", 'P', "PORT", 0, "Port (default 7471)", 4 },
	{ "ipv4", '4', NULL, 0, "Use IPv4 only", 4 },
	{ "ipv6", '6', NULL, 0, "Use IPv6 only", 4 },
	{ "chunk-size", OPT_CHUNK, "SIZE", 0,
	  "Bytes per ring slot, a power of two, 4K..64M (default 1M); the "
	  "receiver's value is the maximum",
	  4 },
	{ "window", OPT_WINDOW, "N", 0,
	  "Ring slots = writes in flight, 1..4096 (default: sized to the "
	  "link, 64 over TCP); the receiver's value is the maximum",
	  4 },
	{ "checksum", OPT_CHECKSUM, "ALG", 0,
	  "File digest: crc32 (default), sha256, or none (no chunk CRC "
	  "either)",
	  4 },
	{ "fsync", OPT_FSYNC, NULL, 0,
	  "Receiver fsyncs each file before giving it its name", 4 },
	{ "direct", OPT_DIRECT, NULL, 0,
	  "Read and write file data with O_DIRECT, bypassing the page cache, "
	  "wherever the file system allows (default: files of 64 MiB and "
	  "more, unless the source's is cached)",
	  4 },
	{ "no-direct", OPT_NO_DIRECT, NULL, 0,
	  "Always go through the page cache, as cp does", 4 },
	{ "poll", OPT_POLL, "MODE", 0,
	  "Completions: adaptive (default), busy, event", 4 },
	{ "timeout", OPT_TIMEOUT, "SECONDS", 0,
	  "Give up when the peer is silent this long (default 10)", 4 },
	{ "connect-timeout", OPT_CONNECT_TIMEOUT, "SECONDS", 0,
	  "Bound on resolving and connecting (default 10)", 4 },
	{ "retry", OPT_RETRY, "N", 0,
	  "Sender: when the peer is lost or cannot be reached, connect again "
	  "up to N times and go on where it stopped (implies --resume)",
	  4 },
	{ "retry-wait", OPT_RETRY_WAIT, "SECONDS", 0,
	  "First wait before a retry (default 5), doubling up to 60, +-20 %",
	  4 },
	{ "workers", OPT_WORKERS, "N", 0,
	  "Threads for disk I/O and checksums (default: half the CPUs of "
	  "the device's NUMA node, 2..8)",
	  4 },
	{ "io-depth", OPT_IO_DEPTH, "N", 0,
	  "O_DIRECT writes and reads in flight per session through io_uring, "
	  "1..4096 (default: the window's slots), or off: each worker makes "
	  "its own",
	  4 },
	{ "numa", OPT_NUMA, "NODE", 0,
	  "Ring, staging buffers and threads on this NUMA node: auto (the "
	  "RDMA device's, default), off, or a node number",
	  4 },
	{ "hugepages", OPT_HUGEPAGES, "MODE", 0,
	  "Ring and staging buffers in 2 MiB huge pages: auto (when "
	  "vm.nr_hugepages has enough free, default), on (or fail), off",
	  4 },
	{ "check", OPT_CHECK, NULL, 0,
	  "Check this host's RDMA setup and, with a HOST argument, the way "
	  "to a receiver there; print the fix for each problem (exit 0: none "
	  "found, 10: some)",
	  1 },
	{ NULL, 0, NULL, 0, "Authentication:", 5 },
	{ "keygen", OPT_KEYGEN, "FILE", 0,
	  "Write a new random key to FILE (mode 0600) and exit", 5 },
	{ "name", OPT_NAME, "NAME", 0,
	  "With --keygen: the key is client NAME's (A-Z a-z 0-9 . _ -, up to "
	  "64), for a receiver's --clients directory as NAME.key",
	  5 },
	{ "key-file", OPT_KEY_FILE, "FILE", 0,
	  "Pre-shared key (default: $XDG_CONFIG_HOME/rdcp/key, then "
	  "/etc/rdcp/key); both sides need the same",
	  5 },
	{ "no-auth", OPT_NO_AUTH, NULL, 0,
	  "Run without authentication: anybody who reaches the port may "
	  "write into the root. Isolated fabrics only",
	  5 },
	{ "require-encrypt", OPT_REQUIRE_ENCRYPT, NULL, 0,
	  "Receiver: refuse sessions without --encrypt. Sender: refuse to "
	  "copy without --encrypt",
	  5 },
	{ NULL, 0, NULL, 0, "Output:", 6 },
	{ "json", OPT_JSON, NULL, 0,
	  "Sender: newline-delimited JSON events on stdout (file_start, "
	  "file_done, file_deleted, attempt, error, summary). Receiver: "
	  "its audit log's lines (session; file at -v)",
	  6 },
	{ "progress", OPT_PROGRESS, NULL, 0,
	  "Sender: show progress even when stderr is not a terminal (it is "
	  "shown by default on a terminal)",
	  6 },
	{ "manifest", OPT_MANIFEST, "FILE", 0,
	  "Write FILE: a line per file copied, its whole-file digest: "
	  "sha256sum's format with --checksum sha256 (sha256sum -c FILE "
	  "checks them), else \"CRC32 (NAME) = HEX\"",
	  6 },
	{ "print-config", OPT_PRINT_CONFIG, NULL, 0,
	  "Print the options in effect and where each comes from: "
	  "/etc/rdcp/rdcp.conf, then ~/.config/rdcp/rdcp.conf (long option "
	  "names, one a line), then the command line, which wins",
	  6 },
	{ "no-config", OPT_NO_CONFIG, NULL, 0,
	  "Read no rdcp.conf (a receiver never reads them)", 6 },
	{ "quiet", 'q', NULL, 0, "Print nothing but errors", 6 },
	{ "verbose", 'v', NULL, 0, "More detail; twice for debug", 6 },
	{ NULL, 0, NULL, 0, "Selecting files:", 7 },
	{ "exclude", OPT_EXCLUDE, "PATTERN", 0,
	  "Leave out what PATTERN matches (rsync's rules: *, **, ?, [...], "
	  "a trailing / for directories, a leading / anchors at the top); "
	  "the first --include/--exclude that matches decides",
	  7 },
	{ "include", OPT_INCLUDE, "PATTERN", 0,
	  "Keep what PATTERN matches, even if a later --exclude matches", 7 },
	{ "exclude-from", OPT_EXCLUDE_FROM, "FILE", 0,
	  "--exclude each pattern in FILE (- for stdin), one a line; blank "
	  "lines and lines starting with # or ; are skipped",
	  7 },
	{ "include-from", OPT_INCLUDE_FROM, "FILE", 0,
	  "--include each pattern in FILE, as --exclude-from", 7 },
	{ "files-from", OPT_FILES_FROM, "FILE", 0,
	  "Copy the paths listed in FILE (- for stdin), one a line, each "
	  "relative to the one SRC directory (local, or on HOST for a pull) "
	  "and kept as it is beneath DEST (rsync's --files-from)",
	  7 },
	{ "from0", '0', NULL, 0,
	  "Names in --files-from and rules in --*-from files end in a NUL "
	  "(find -print0), not a newline",
	  7 },
	{ 0 }
};
