// SPDX-License-Identifier: GPL-2.0
/*
 * fpga_p2p_test: exercises /dev/fpga-p2pN through its uapi, against the
 * emulated card in QEMU (tests/qemu/fpga-card/; its test port BAR2 injects
 * faults) and nvp2p_shim.ko. Every mode checks
 * and exits non-zero on the first failure, printing why.
 *
 *   fpga_p2p_test info
 *   fpga_p2p_test stream [-n frames] [-s slots] [-b slot_bytes] [-c chunk_bytes]
 *                        [-p period_ns] [-e (chunk events)]
 *   fpga_p2p_test hold   [-n frames]       a held slot is never written;
 *                                          frames dropped at the source
 *   fpga_p2p_test faults [-n frames]       the card's fault injection seen
 *   fpga_p2p_test revoke [-n cycles]       munmap / debugfs revoke while streaming
 *   fpga_p2p_test kill   [-n cycles]       kill -9 while streaming
 *   fpga_p2p_test fuzz   [-n calls]        hostile ioctl arguments
 *   fpga_p2p_test duplex [-n frames]       transmit while capturing; playback
 *   fpga_p2p_test remove                   PCI removal of the card while open
 *   fpga_p2p_test events                   read() semantics, queue overflow
 *   fpga_p2p_test race   [-n seconds]      threads racing revocation
 *   fpga_p2p_test remove-race [-n cycles]  device removal under threads
 *   fpga_p2p_test holdopen                 keep the device open until killed
 *
 * Options: -d /dev/fpga-p2pN (default /dev/fpga-p2p0); -q skips the
 * byte-for-byte check of stream (sequence checks stay), to time the kernel.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../include/uapi/fpga_p2p.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

static const char *dev_path = "/dev/fpga-p2p0";
static unsigned long opt_n;
static unsigned int opt_slots = 4;
static unsigned long opt_slot_bytes = 16384;
static unsigned long opt_chunk_bytes;
static unsigned int opt_period = 20000;
static int opt_events;
static int opt_noverify;

#define SHIM_DIR "/sys/kernel/debug/nvp2p_shim"
#define PCI_DIR "/sys/bus/pci/devices"
/* The emulated card's test port (tests/qemu/fpga-card/fpga_card_test.h). */
#define CARD_TEST_BAR_LEN	0x20000
#define CARD_TEST_ID		0x000
#define CARD_TEST_ID_VALUE	0x54455354
#define CARD_DROP_EVERY		0x004
#define CARD_SHORT_EVERY	0x008
#define CARD_CORRUPT_EVERY	0x00c
#define CARD_C2H_DESC_ERROR	0x010

static void die(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "FAIL: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n");
	exit(1);
}

#define CHECK(cond, ...) do { if (!(cond)) die(__VA_ARGS__); } while (0)

static uint32_t crc_table[256];

static void crc_init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;

		for (int k = 0; k < 8; k++)
			c = c & 1 ? 0xEDB88320U ^ (c >> 1) : c >> 1;
		crc_table[i] = c;
	}
}

static uint32_t crc32_buf(const void *buf, size_t len)
{
	const uint8_t *p = buf;
	uint32_t c = 0xFFFFFFFFU;

	while (len--)
		c = crc_table[(c ^ *p++) & 0xff] ^ (c >> 8);
	return c ^ 0xFFFFFFFFU;
}

static uint32_t pattern_word(uint64_t s, uint32_t w, uint32_t chunk_words)
{
	uint32_t c = w / chunk_words, k = w - c * chunk_words;
	uint32_t lo = (uint32_t)s, hi = (uint32_t)(s >> 32);

	switch (k) {
	case 0: return 0x7E57F00D;
	case 1: return lo;
	case 2: return hi;
	case 3: return c;
	default: return (w * 0x9E3779B1U) ^ (lo * 0x85EBCA6BU) ^ hi;
	}
}

/* Check a delivered test-pattern frame; returns NULL or what is wrong. */
static const char *verify_frame(const void *slot, const struct fpga_p2p_event *ev,
				uint32_t frame_bytes, uint32_t chunk_bytes)
{
	static char why[160];
	const uint32_t *p = slot;
	uint32_t words = ev->bytes / 4;

	if (crc32_buf(slot, ev->bytes) != ev->crc32)
		return "CRC mismatch";
	for (uint32_t w = 0; w < words; w++) {
		uint32_t want = pattern_word(ev->sequence, w, chunk_bytes / 4);

		if (p[w] != want) {
			snprintf(why, sizeof(why),
				 "seq %llu word %u: 0x%08x, want 0x%08x",
				 (unsigned long long)ev->sequence, w, p[w], want);
			return why;
		}
	}
	if (ev->bytes == frame_bytes && ev->flags)
		return "flags on a full frame";
	return NULL;
}

static int dev_open(void)
{
	int fd = open(dev_path, O_RDWR);

	CHECK(fd >= 0, "open %s: %s", dev_path, strerror(errno));
	return fd;
}

/*
 * Ring memory: anonymous, 2 MiB aligned and advised for transparent huge
 * pages (fewer, longer DMA segments where the kernel has THP), locked so
 * that it stays out of reclaim, like CUDA's pinned host memory.
 */
static void *ring_alloc(size_t bytes)
{
	size_t align = 2 << 20;
	uint8_t *p = mmap(NULL, bytes + align, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	uint8_t *a;

	CHECK(p != MAP_FAILED, "mmap %zu: %s", bytes, strerror(errno));
	a = (uint8_t *)(((uintptr_t)p + align - 1) & ~(uintptr_t)(align - 1));
	if (a > p)
		munmap(p, a - p);
	munmap(a + bytes, p + align - a);
	madvise(a, bytes, MADV_HUGEPAGE);
	memset(a, 0, bytes);
	CHECK(!mlock(a, bytes), "mlock: %s", strerror(errno));
	return a;
}

static uint32_t reg_ring(int fd, void *addr, uint64_t slot_bytes,
			 uint32_t slots, uint32_t dir, uint32_t chunk)
{
	struct fpga_p2p_ring r = {
		.addr = (uintptr_t)addr, .slot_bytes = slot_bytes,
		.nr_slots = slots, .direction = dir, .chunk_bytes = chunk,
	};

	CHECK(!ioctl(fd, FPGA_P2P_IOC_REGISTER, &r), "REGISTER: %s",
	      strerror(errno));
	CHECK(r.handle, "REGISTER gave handle 0");
	return r.handle;
}

static void start(int fd, uint32_t h, uint32_t source, uint32_t flags,
		  uint32_t pb_frames)
{
	struct fpga_p2p_start s = {
		.handle = h, .source = source, .chunk_period_ns = opt_period,
		.flags = flags, .playback_frames = pb_frames,
		.event_timeout_ms = 5000,
	};

	CHECK(!ioctl(fd, FPGA_P2P_IOC_START, &s), "START: %s", strerror(errno));
}

static int wait_ev(int fd, uint32_t rh, uint32_t rslot, struct fpga_p2p_event *ev)
{
	struct fpga_p2p_wait w = {
		.release_handle = rh, .release_slot = rslot, .timeout_ms = 5000,
	};
	int ret = ioctl(fd, FPGA_P2P_IOC_WAIT, &w);

	if (!ret)
		*ev = w.event;
	return ret ? -errno : 0;
}

static void counters(int fd, struct fpga_p2p_counters *c)
{
	CHECK(!ioctl(fd, FPGA_P2P_IOC_COUNTERS, c), "COUNTERS: %s",
	      strerror(errno));
}

static long read_stat(const char *path, const char *key)
{
	char line[128];
	size_t kl = strlen(key);
	long v = -1;
	FILE *f = fopen(path, "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, key, kl) && line[kl] == ' ')
			v = strtol(line + kl + 1, NULL, 0);
	fclose(f);
	return v;
}

static void write_file(const char *path, const char *val)
{
	int fd = open(path, O_WRONLY);

	CHECK(fd >= 0, "open %s: %s", path, strerror(errno));
	CHECK(write(fd, val, strlen(val)) == (ssize_t)strlen(val),
	      "write %s: %s", path, strerror(errno));
	close(fd);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

struct stream_stats {
	unsigned long frames, dropped, chunks, short_frames, corrupt;
};

/*
 * Capture @frames frames of the test pattern and verify every one. With
 * @tolerate_faults, short and corrupt frames are counted instead of failing.
 */
static void stream_verify(int fd, uint32_t h, uint8_t *ring, uint64_t slot_bytes,
			  uint32_t chunk, unsigned long frames,
			  struct stream_stats *st, int tolerate_faults)
{
	uint32_t rel = FPGA_P2P_NO_SLOT;
	int64_t last_seq = -1;
	unsigned long next_chunk = 0;

	memset(st, 0, sizeof(*st));
	while (st->frames < frames) {
		struct fpga_p2p_event ev;
		const char *why;
		int ret = wait_ev(fd, h, rel, &ev);

		CHECK(!ret, "WAIT after %lu frames: %s", st->frames,
		      strerror(-ret));
		rel = FPGA_P2P_NO_SLOT;
		if (ev.type == FPGA_P2P_EV_CHUNK) {
			CHECK(ev.chunk == next_chunk, "chunk %u, want %lu",
			      ev.chunk, next_chunk);
			next_chunk++;
			st->chunks++;
			continue;
		}
		CHECK(ev.type == FPGA_P2P_EV_FRAME, "event type %u", ev.type);
		CHECK(ev.handle == h && ev.slot < opt_slots, "bad event slot");
		if (opt_events)
			CHECK(next_chunk == slot_bytes / chunk,
			      "%lu chunk events before frame", next_chunk);
		next_chunk = 0;
		if (last_seq >= 0)
			CHECK(ev.sequence == (uint64_t)last_seq + 1 + ev.dropped,
			      "sequence %llu after %lld with %u dropped",
			      (unsigned long long)ev.sequence,
			      (long long)last_seq, ev.dropped);
		last_seq = ev.sequence;
		st->dropped += ev.dropped;
		why = opt_noverify ? NULL :
		      verify_frame(ring + ev.slot * slot_bytes, &ev,
				   slot_bytes, chunk);
		if (ev.flags & FPGA_P2P_EVF_SHORT) {
			CHECK(tolerate_faults && ev.bytes < slot_bytes,
			      "short frame");
			st->short_frames++;
		}
		if (why) {
			CHECK(tolerate_faults && !strcmp(why, "CRC mismatch"),
			      "frame %lu: %s", st->frames, why);
			st->corrupt++;
		}
		st->frames++;
		rel = ev.slot;
	}
	if (rel != FPGA_P2P_NO_SLOT) {
		struct fpga_p2p_release r = { .handle = h, .slot = rel };

		CHECK(!ioctl(fd, FPGA_P2P_IOC_RELEASE, &r), "RELEASE: %s",
		      strerror(errno));
	}
}

static void result(const char *suite, const char *fmt, ...)
{
	va_list ap;

	printf("PASS %s: ", suite);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
}

static void cmd_info(void)
{
	struct fpga_p2p_info info;
	int fd = dev_open();

	CHECK(!ioctl(fd, FPGA_P2P_IOC_INFO, &info), "INFO: %s", strerror(errno));
	printf("uapi %u caps 0x%x hw_id 0x%08x hw_version 0x%08x\n",
	       info.uapi_version, info.caps, info.hw_id, info.hw_version);
	printf("max_slots %u max_chunks %u max_slot_bytes %llu align %u\n",
	       info.max_slots, info.max_chunks_per_frame,
	       (unsigned long long)info.max_slot_bytes, info.slot_align);
	printf("event_bytes %u playback_frames %u\n", info.event_bytes,
	       info.max_playback_frames);
	CHECK(info.event_bytes == sizeof(struct fpga_p2p_event), "event size");
	close(fd);
}

static void cmd_stream(void)
{
	uint32_t chunk = opt_chunk_bytes ? opt_chunk_bytes : opt_slot_bytes;
	size_t bytes = opt_slot_bytes * opt_slots;
	unsigned long frames = opt_n ? opt_n : 1000;
	struct fpga_p2p_counters c0, c1;
	struct stream_stats st;
	int fd = dev_open();
	uint8_t *ring = ring_alloc(bytes);
	uint32_t h;
	double t0, dt;

	counters(fd, &c0);
	h = reg_ring(fd, ring, opt_slot_bytes, opt_slots, FPGA_P2P_DIR_C2H,
		     opt_chunk_bytes);
	start(fd, h, FPGA_P2P_SRC_TEST_PATTERN,
	      opt_events ? FPGA_P2P_START_CHUNK_EVENTS : 0, 0);
	t0 = now_s();
	stream_verify(fd, h, ring, opt_slot_bytes, chunk, frames, &st, 0);
	dt = now_s() - t0;
	CHECK(!ioctl(fd, FPGA_P2P_IOC_STOP, &h), "STOP: %s", strerror(errno));
	CHECK(ioctl(fd, FPGA_P2P_IOC_STOP, &h) && errno == EALREADY,
	      "second STOP: %s", strerror(errno));
	counters(fd, &c1);
	CHECK(c1.frames - c0.frames >= st.frames, "frame counter");
	CHECK(c1.desc_errors == c0.desc_errors, "descriptor errors");
	CHECK(!ioctl(fd, FPGA_P2P_IOC_UNREGISTER, &h), "UNREGISTER: %s",
	      strerror(errno));
	close(fd);
	munmap(ring, bytes);
	result("stream", "%lu frames of %lu bytes %s, %lu dropped, %lu chunk events",
	       st.frames, opt_slot_bytes, opt_noverify ? "seen" : "verified",
	       st.dropped, st.chunks);
	printf("%.1f frames/s, %llu irqs\n", st.frames / dt,
	       (unsigned long long)(c1.irqs - c0.irqs));
}

/* A held slot is never written; without free slots frames drop at source. */
static void cmd_hold(void)
{
	uint32_t chunk = opt_chunk_bytes ? opt_chunk_bytes : opt_slot_bytes;
	size_t bytes = opt_slot_bytes * opt_slots;
	unsigned long frames = opt_n ? opt_n : 200;
	struct fpga_p2p_event ev, held;
	struct fpga_p2p_counters c0, c1;
	struct stream_stats st;
	int fd = dev_open();
	uint8_t *ring = ring_alloc(bytes);
	uint8_t *copy = malloc(opt_slot_bytes);
	uint32_t h, rel = FPGA_P2P_NO_SLOT;
	unsigned long got = 0;
	int64_t last;

	counters(fd, &c0);
	h = reg_ring(fd, ring, opt_slot_bytes, opt_slots, FPGA_P2P_DIR_C2H,
		     opt_chunk_bytes);
	start(fd, h, FPGA_P2P_SRC_TEST_PATTERN, 0, 0);
	CHECK(!wait_ev(fd, h, FPGA_P2P_NO_SLOT, &held), "first frame");
	memcpy(copy, ring + held.slot * opt_slot_bytes, opt_slot_bytes);
	last = held.sequence;
	/* Keep the first slot; stream through the others. */
	while (got < frames) {
		CHECK(!wait_ev(fd, h, rel, &ev), "WAIT: %s", strerror(errno));
		CHECK(ev.type == FPGA_P2P_EV_FRAME && ev.slot != held.slot,
		      "held slot %u delivered again", held.slot);
		CHECK(ev.sequence == (uint64_t)last + 1 + ev.dropped, "sequence");
		CHECK(!verify_frame(ring + ev.slot * opt_slot_bytes, &ev,
				    opt_slot_bytes, chunk), "frame content");
		last = ev.sequence;
		rel = ev.slot;
		got++;
	}
	CHECK(!memcmp(copy, ring + held.slot * opt_slot_bytes, opt_slot_bytes),
	      "the held slot was written");
	/* Now hold everything: the source must drop, never overwrite. */
	{
		struct fpga_p2p_release r = { .handle = h, .slot = rel };
		uint8_t *snap = malloc(bytes);

		CHECK(!ioctl(fd, FPGA_P2P_IOC_RELEASE, &r), "release");
		for (unsigned int i = 0; i < opt_slots - 1; i++) {
			CHECK(!wait_ev(fd, FPGA_P2P_NO_SLOT, FPGA_P2P_NO_SLOT,
				       &ev), "fill");
			CHECK(!verify_frame(ring + ev.slot * opt_slot_bytes, &ev,
					    opt_slot_bytes, chunk), "content");
		}
		memcpy(snap, ring, bytes);
		usleep(300000);
		CHECK(!memcmp(snap, ring, bytes),
		      "a slot owned by the application was written");
		free(snap);
	}
	counters(fd, &c1);
	CHECK(c1.drops_no_slot > c0.drops_no_slot, "no drops counted");
	/* Release all: the next frame explains the gap. */
	for (unsigned int s = 0; s < opt_slots; s++) {
		struct fpga_p2p_release r = { .handle = h, .slot = s };

		CHECK(!ioctl(fd, FPGA_P2P_IOC_RELEASE, &r), "release %u: %s", s,
		      strerror(errno));
	}
	stream_verify(fd, h, ring, opt_slot_bytes, chunk, 4, &st, 0);
	CHECK(st.dropped > 0, "no drop reported after holding all slots");
	CHECK(!ioctl(fd, FPGA_P2P_IOC_UNREGISTER, &h), "UNREGISTER");
	close(fd);
	munmap(ring, bytes);
	free(copy);
	result("hold", "%lu frames beside a held slot, slot untouched; %lu drops reported",
	       got, st.dropped);
}

/* The PCI directory of the first card (vendor 0x10ee, device 0x9038). */
static const char *card_dir(void)
{
	static char dir[300];
	char path[320], id[16];
	struct dirent *e;
	DIR *d = opendir(PCI_DIR);
	FILE *f;
	int ok;

	CHECK(d, "no " PCI_DIR);
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), PCI_DIR "/%s/vendor", e->d_name);
		f = fopen(path, "r");
		ok = f && fgets(id, sizeof(id), f) && !strncmp(id, "0x10ee", 6);
		if (f)
			fclose(f);
		snprintf(path, sizeof(path), PCI_DIR "/%s/device", e->d_name);
		f = ok ? fopen(path, "r") : NULL;
		ok = f && fgets(id, sizeof(id), f) && !strncmp(id, "0x9038", 6);
		if (f)
			fclose(f);
		if (ok) {
			snprintf(dir, sizeof(dir), PCI_DIR "/%s", e->d_name);
			closedir(d);
			return dir;
		}
	}
	closedir(d);
	die("no FPGA card under " PCI_DIR);
	return NULL;
}

/* A fault injection register of the emulated card's test port. */
static void card_set(unsigned int off, uint32_t val)
{
	static uint32_t *port;

	if (!port) {
		char path[320];
		int fd;

		snprintf(path, sizeof(path), "%s/resource2", card_dir());
		fd = open(path, O_RDWR);
		CHECK(fd >= 0, "%s: %s (not the emulated card?)", path,
		      strerror(errno));
		port = mmap(NULL, CARD_TEST_BAR_LEN, PROT_READ | PROT_WRITE,
			    MAP_SHARED, fd, 0);
		close(fd);
		CHECK(port != MAP_FAILED, "mmap %s: %s", path, strerror(errno));
		/* MMIO: __atomic accesses are single, untorn 32-bit ones. */
		CHECK(__atomic_load_n(&port[CARD_TEST_ID / 4], __ATOMIC_SEQ_CST) ==
		      CARD_TEST_ID_VALUE,
		      "%s is not the emulated card's test port", path);
	}
	__atomic_store_n(&port[off / 4], val, __ATOMIC_SEQ_CST);
}

/* PCI removal of the card, as a hot unplug does it. */
static void card_remove(void)
{
	char path[330];

	snprintf(path, sizeof(path), "%s/remove", card_dir());
	write_file(path, "1");
}

/* The card comes back (a rescan probes it again). */
static void card_rescan(void)
{
	write_file("/sys/bus/pci/rescan", "1");
}

static void cmd_faults(void)
{
	size_t bytes = opt_slot_bytes * opt_slots;
	unsigned long frames = opt_n ? opt_n : 300;
	struct fpga_p2p_counters c0, c1;
	struct fpga_p2p_event ev;
	struct stream_stats st, faulty;
	int fd = dev_open();
	uint8_t *ring = ring_alloc(bytes);
	uint32_t h;
	int ret;

	counters(fd, &c0);
	card_set(CARD_DROP_EVERY, 7);
	card_set(CARD_SHORT_EVERY, 11);
	card_set(CARD_CORRUPT_EVERY, 13);
	h = reg_ring(fd, ring, opt_slot_bytes, opt_slots, FPGA_P2P_DIR_C2H, 0);
	start(fd, h, FPGA_P2P_SRC_TEST_PATTERN, 0, 0);
	stream_verify(fd, h, ring, opt_slot_bytes, opt_slot_bytes, frames, &st, 1);
	card_set(CARD_DROP_EVERY, 0);
	card_set(CARD_SHORT_EVERY, 0);
	card_set(CARD_CORRUPT_EVERY, 0);
	counters(fd, &c1);
	CHECK(st.short_frames && st.corrupt && st.dropped,
	      "faults not seen: %lu short %lu corrupt %lu dropped",
	      st.short_frames, st.corrupt, st.dropped);
	faulty = st;
	CHECK(c1.drops_fault > c0.drops_fault, "fault drops not counted");
	CHECK(c1.short_frames > c0.short_frames, "short frames not counted");
	/* A descriptor error stops capture with EV_FAULT. */
	card_set(CARD_C2H_DESC_ERROR, 1);
	for (;;) {
		ret = wait_ev(fd, FPGA_P2P_NO_SLOT, FPGA_P2P_NO_SLOT, &ev);
		CHECK(!ret, "no fault event: %s", strerror(-ret));
		if (ev.type == FPGA_P2P_EV_FAULT)
			break;
		if (ev.type == FPGA_P2P_EV_FRAME) {
			struct fpga_p2p_release r = { .handle = h, .slot = ev.slot };

			CHECK(!ioctl(fd, FPGA_P2P_IOC_RELEASE, &r), "release");
		}
	}
	CHECK(ev.chunk == FPGA_P2P_FAULT_ENGINE, "fault code %u", ev.chunk);
	{
		struct pollfd p = { .fd = fd, .events = POLLIN };

		CHECK(poll(&p, 1, 1000) == 1 && (p.revents & POLLERR),
		      "poll after fault: 0x%x", p.revents);
	}
	CHECK(wait_ev(fd, FPGA_P2P_NO_SLOT, FPGA_P2P_NO_SLOT, &ev) == -EIO,
	      "WAIT after fault");
	/* STOP/START recovers. */
	CHECK(!ioctl(fd, FPGA_P2P_IOC_STOP, &h), "STOP after fault: %s",
	      strerror(errno));
	for (unsigned int s = 0; s < opt_slots; s++) {
		struct fpga_p2p_release r = { .handle = h, .slot = s };

		ioctl(fd, FPGA_P2P_IOC_RELEASE, &r);
	}
	start(fd, h, FPGA_P2P_SRC_TEST_PATTERN, 0, 0);
	stream_verify(fd, h, ring, opt_slot_bytes, opt_slot_bytes, 20, &st, 0);
	CHECK(!ioctl(fd, FPGA_P2P_IOC_UNREGISTER, &h), "UNREGISTER");
	close(fd);
	munmap(ring, bytes);
	result("faults", "drops %llu, short %lu, corrupt %lu; EV_FAULT, recovered",
	       (unsigned long long)(c1.drops_fault - c0.drops_fault),
	       faulty.short_frames, faulty.corrupt);
}

static void shim_check_clean(void)
{
	long pt = read_stat(SHIM_DIR "/stats", "page_tables");
	long pages = read_stat(SHIM_DIR "/stats", "pinned_pages");
	long maps = read_stat(SHIM_DIR "/stats", "mappings");

	CHECK(pt == 0 && pages == 0 && maps == 0,
	      "shim leaks: %ld page tables, %ld pages, %ld mappings", pt, pages,
	      maps);
}

/* Revocation while streaming: munmap, or the shim's debugfs revoke. */
static void cmd_revoke(void)
{
	unsigned long cycles = opt_n ? opt_n : 20;
	size_t bytes = opt_slot_bytes * opt_slots;
	struct fpga_p2p_counters c0, c1;

	{
		int fd = dev_open();

		counters(fd, &c0);
		close(fd);
	}
	for (unsigned long i = 0; i < cycles; i++) {
		int fd = dev_open();
		uint8_t *ring = ring_alloc(bytes);
		struct fpga_p2p_event ev;
		struct pollfd p = { .fd = fd, .events = POLLIN };
		struct stream_stats st;
		uint32_t h;
		int ret, seen = 0;

		h = reg_ring(fd, ring, opt_slot_bytes, opt_slots,
			     FPGA_P2P_DIR_C2H, 0);
		start(fd, h, FPGA_P2P_SRC_TEST_PATTERN, 0, 0);
		stream_verify(fd, h, ring, opt_slot_bytes, opt_slot_bytes,
			      3 + i % 5, &st, 0);
		if (i & 1) {
			char cmd[64];

			snprintf(cmd, sizeof(cmd), "%d 0x%lx", getpid(),
				 (unsigned long)ring);
			write_file(SHIM_DIR "/revoke", cmd);
		} else {
			CHECK(!munmap(ring, bytes), "munmap");
		}
		/* Drain until EV_REVOKED, then poll must say error. */
		for (;;) {
			ret = wait_ev(fd, FPGA_P2P_NO_SLOT, FPGA_P2P_NO_SLOT, &ev);
			if (ret)
				break;
			if (ev.type == FPGA_P2P_EV_REVOKED)
				seen = 1;
		}
		CHECK(seen, "cycle %lu: no EV_REVOKED (%s)", i, strerror(-ret));
		CHECK(ret == -EIO, "WAIT after revoke: %s", strerror(-ret));
		CHECK(poll(&p, 1, 0) == 1 && (p.revents & POLLERR),
		      "poll after revoke: 0x%x", p.revents);
		{
			struct fpga_p2p_release r = { .handle = h, .slot = 0 };

			CHECK(ioctl(fd, FPGA_P2P_IOC_RELEASE, &r) && errno == EIO,
			      "RELEASE after revoke: %s", strerror(errno));
			CHECK(ioctl(fd, FPGA_P2P_IOC_STOP, &h) && errno == EIO,
			      "STOP after revoke");
		}
		CHECK(!ioctl(fd, FPGA_P2P_IOC_UNREGISTER, &h), "UNREGISTER: %s",
		      strerror(errno));
		close(fd);
		if (i & 1)
			munmap(ring, bytes);
		shim_check_clean();
	}
	{
		int fd = dev_open();

		counters(fd, &c1);
		close(fd);
	}
	CHECK(c1.revocations - c0.revocations == cycles, "revocations %llu",
	      (unsigned long long)(c1.revocations - c0.revocations));
	result("revoke", "%lu revocations while streaming, nothing leaked",
	       cycles);
}

static void cmd_kill(void)
{
	unsigned long cycles = opt_n ? opt_n : 20;

	for (unsigned long i = 0; i < cycles; i++) {
		int pipefd[2], status;
		char c;
		pid_t pid;

		CHECK(!pipe(pipefd), "pipe");
		pid = fork();
		CHECK(pid >= 0, "fork");
		if (!pid) {
			size_t bytes = opt_slot_bytes * opt_slots;
			int fd = dev_open();
			uint8_t *ring = ring_alloc(bytes);
			uint32_t h = reg_ring(fd, ring, opt_slot_bytes, opt_slots,
					      FPGA_P2P_DIR_C2H, 0);
			struct stream_stats st;

			start(fd, h, FPGA_P2P_SRC_TEST_PATTERN, 0, 0);
			stream_verify(fd, h, ring, opt_slot_bytes,
				      opt_slot_bytes, 2, &st, 0);
			CHECK(write(pipefd[1], "x", 1) == 1, "pipe");
			stream_verify(fd, h, ring, opt_slot_bytes,
				      opt_slot_bytes, ~0UL >> 1, &st, 0);
			_exit(0);
		}
		close(pipefd[1]);
		CHECK(read(pipefd[0], &c, 1) == 1, "child did not stream");
		usleep((i % 7) * 3000);
		kill(pid, SIGKILL);
		CHECK(waitpid(pid, &status, 0) == pid, "waitpid");
		CHECK(WIFSIGNALED(status), "child exited by itself");
		close(pipefd[0]);
		shim_check_clean();
	}
	result("kill", "%lu kill -9 cycles while streaming, nothing leaked",
	       cycles);
}

/* --- hostile ioctls ------------------------------------------------------ */

static uint64_t rnd_state = 0x9E3779B97F4A7C15ULL;

static uint64_t rnd(void)
{
	rnd_state ^= rnd_state << 13;
	rnd_state ^= rnd_state >> 7;
	rnd_state ^= rnd_state << 17;
	return rnd_state;
}

static uint64_t pick64(uint64_t good)
{
	static const uint64_t odd[] = {
		0, 1, 4095, 4096, 4097, 0x7fffffff, 0x80000000, 0xffffffff,
		0x100000000ULL, 0xfffffffffffff000ULL, 0xffffffffffffffffULL,
		0xffff800000000000ULL, 1ULL << 47, (1ULL << 47) - 4096,
	};

	switch (rnd() % 4) {
	case 0:
		return good;
	case 1:
		return odd[rnd() % ARRAY_SIZE(odd)];
	case 2:
		return good + (rnd() % 3) * 4096 - 4096;
	default:
		return rnd();
	}
}

static void cmd_fuzz(void)
{
	unsigned long calls = opt_n ? opt_n : 20000;
	static const unsigned long cmds[] = {
		FPGA_P2P_IOC_INFO, FPGA_P2P_IOC_REGISTER, FPGA_P2P_IOC_UNREGISTER,
		FPGA_P2P_IOC_START, FPGA_P2P_IOC_STOP, FPGA_P2P_IOC_RELEASE,
		FPGA_P2P_IOC_COUNTERS, FPGA_P2P_IOC_TX_SUBMIT, FPGA_P2P_IOC_WAIT,
		_IOC(_IOC_READ | _IOC_WRITE, FPGA_P2P_IOC_MAGIC, 0x01, 8),
		_IOC(_IOC_READ | _IOC_WRITE, FPGA_P2P_IOC_MAGIC, 0x08, 16),
		_IOC(_IOC_WRITE, FPGA_P2P_IOC_MAGIC, 0x03, 4),
		_IOC(_IOC_WRITE, FPGA_P2P_IOC_MAGIC, 0x7f, 4), 0x1234,
	};
	size_t bytes = 64 * 4096;
	uint8_t *good = ring_alloc(bytes);
	uint8_t *ro = mmap(NULL, bytes, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS,
			   -1, 0);
	uint8_t *unmapped = mmap(NULL, bytes, PROT_NONE,
				 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	uint32_t handles[8] = { 0, 1, 2, 3, 0xffffffff };
	unsigned long ok = 0, errs = 0, n;
	int fds[3];

	munmap(unmapped, bytes);
	for (int i = 0; i < 3; i++)
		fds[i] = dev_open();
	for (n = 0; n < calls; n++) {
		int fd = fds[rnd() % 3];
		unsigned long cmd = cmds[rnd() % ARRAY_SIZE(cmds)];
		union {
			struct fpga_p2p_ring r;
			struct fpga_p2p_start s;
			struct fpga_p2p_release rel;
			struct fpga_p2p_tx tx;
			struct fpga_p2p_wait w;
			uint32_t h;
			uint8_t raw[256];
		} a;
		void *arg = &a;
		uint8_t *bases[] = { good, ro, unmapped, good + 4096 };
		int ret;

		memset(&a, 0, sizeof(a));
		switch (_IOC_NR(cmd)) {
		case 0x01:
			a.r.addr = pick64((uintptr_t)bases[rnd() % 4]);
			a.r.slot_bytes = pick64(4096 << (rnd() % 4));
			a.r.nr_slots = pick64(2 + rnd() % 4);
			a.r.direction = pick64(rnd() % 2);
			a.r.chunk_bytes = a.r.direction ? pick64(0) : pick64(4096);
			if (!(rnd() % 8))
				a.r.reserved[rnd() % 2] = rnd();
			break;
		case 0x02:
		case 0x04:
			a.h = handles[rnd() % 8];
			break;
		case 0x03:
			a.s.handle = handles[rnd() % 8];
			a.s.source = pick64(1);
			a.s.chunk_period_ns = pick64(1000);
			a.s.flags = pick64(0);
			a.s.playback_frames = pick64(0);
			a.s.event_timeout_ms = pick64(10);
			if (!(rnd() % 8))
				a.s.reserved[rnd() % 2] = rnd();
			break;
		case 0x05:
			a.rel.handle = handles[rnd() % 8];
			a.rel.slot = pick64(rnd() % 4);
			break;
		case 0x07:
			a.tx.handle = handles[rnd() % 8];
			a.tx.slot = pick64(rnd() % 4);
			a.tx.bytes = pick64(4096);
			a.tx.target = pick64(rnd() % 3);
			a.tx.index = pick64(0);
			a.tx.reserved0 = rnd() % 8 ? 0 : 1;
			a.tx.cookie = rnd();
			break;
		case 0x08:
			a.w.release_handle = handles[rnd() % 8];
			a.w.release_slot = rnd() % 2 ? FPGA_P2P_NO_SLOT : rnd() % 5;
			a.w.timeout_ms = 1 + rnd() % 3;
			a.w.reserved0 = rnd() % 8 ? 0 : 1;
			break;
		default:
			for (size_t i = 0; i < sizeof(a.raw); i++)
				a.raw[i] = rnd();
		}
		switch (rnd() % 16) {
		case 0:
			arg = NULL;
			break;
		case 1:
			arg = (void *)(uintptr_t)0xffffffffffff0000ULL;
			break;
		case 2:
			arg = unmapped;
			break;
		case 3:
			arg = ro;
			break;
		}
		ret = ioctl(fd, cmd, arg);
		if (ret == 0) {
			ok++;
			if (_IOC_NR(cmd) == 0x01 && arg == &a) {
				handles[5 + rnd() % 3] = a.r.handle;
				/* Sometimes leave it running, sometimes stream. */
				if (!a.r.direction && rnd() % 2) {
					struct fpga_p2p_start s = {
						.handle = a.r.handle,
						.source = 1,
						.chunk_period_ns = 100000,
					};

					ioctl(fd, FPGA_P2P_IOC_START, &s);
				}
			}
		} else {
			CHECK(errno != 0, "no errno");
			errs++;
		}
		if (!(rnd() % 500)) {
			/* Close and reopen: everything must go away cleanly. */
			int i = rnd() % 3;

			close(fds[i]);
			fds[i] = dev_open();
		}
	}
	for (int i = 0; i < 3; i++)
		close(fds[i]);
	munmap(good, bytes);
	munmap(ro, bytes);
	shim_check_clean();
	result("fuzz", "%lu hostile ioctls: %lu succeeded, %lu errno", n, ok, errs);
}

/* Transmit while capturing; play back uploaded frames and compare. */
static void cmd_duplex(void)
{
	unsigned long frames = opt_n ? opt_n : 200;
	size_t cbytes = opt_slot_bytes * opt_slots;
	const unsigned int txslots = 4, pbn = 3;
	size_t tbytes = opt_slot_bytes * txslots;
	struct fpga_p2p_counters c0, c1;
	int cfd = dev_open(), tfd = dev_open();
	uint8_t *cring = ring_alloc(cbytes), *tring = ring_alloc(tbytes);
	uint32_t ch, th, rel = FPGA_P2P_NO_SLOT;
	unsigned long sent = 0, done = 0, got = 0;
	uint64_t cookie = 1000;
	int64_t last = -1;

	counters(cfd, &c0);
	th = reg_ring(tfd, tring, opt_slot_bytes, txslots, FPGA_P2P_DIR_H2C, 0);
	/* Upload pbn playback frames, each filled with its own value. */
	for (unsigned int i = 0; i < pbn; i++) {
		struct fpga_p2p_tx tx = {
			.handle = th, .slot = i, .bytes = opt_slot_bytes,
			.target = FPGA_P2P_TX_PLAYBACK, .index = i, .cookie = i,
		};

		memset(tring + i * opt_slot_bytes, 0xA0 + i, opt_slot_bytes);
		CHECK(!ioctl(tfd, FPGA_P2P_IOC_TX_SUBMIT, &tx), "TX: %s",
		      strerror(errno));
		CHECK(ioctl(tfd, FPGA_P2P_IOC_TX_SUBMIT, &tx) && errno == EBUSY,
		      "double submit");
	}
	for (unsigned int i = 0; i < pbn; i++) {
		struct fpga_p2p_event ev;

		CHECK(!wait_ev(tfd, FPGA_P2P_NO_SLOT, FPGA_P2P_NO_SLOT, &ev),
		      "TX_DONE");
		CHECK(ev.type == FPGA_P2P_EV_TX_DONE && ev.cookie == i &&
		      !ev.flags, "tx event %u cookie %llu", ev.type,
		      (unsigned long long)ev.cookie);
	}
	ch = reg_ring(cfd, cring, opt_slot_bytes, opt_slots, FPGA_P2P_DIR_C2H, 0);
	start(cfd, ch, FPGA_P2P_SRC_PLAYBACK, 0, pbn);
	/* Capture played-back frames while transmitting detection lists. */
	while (got < frames) {
		struct fpga_p2p_event ev;
		struct pollfd p = { .fd = tfd, .events = POLLIN };

		if (sent - done < txslots) {
			struct fpga_p2p_tx tx = {
				.handle = th, .slot = sent % txslots,
				.bytes = 4096 * (1 + sent % 3),
				.target = FPGA_P2P_TX_DETECTIONS,
				.cookie = cookie + sent,
			};

			CHECK(!ioctl(tfd, FPGA_P2P_IOC_TX_SUBMIT, &tx),
			      "TX %lu: %s", sent, strerror(errno));
			sent++;
		}
		while (poll(&p, 1, 0) == 1) {
			CHECK(!wait_ev(tfd, FPGA_P2P_NO_SLOT, FPGA_P2P_NO_SLOT,
				       &ev), "TX_DONE");
			CHECK(ev.type == FPGA_P2P_EV_TX_DONE &&
			      ev.cookie == cookie + done, "tx order");
			done++;
		}
		CHECK(!wait_ev(cfd, ch, rel, &ev), "capture WAIT");
		CHECK(ev.type == FPGA_P2P_EV_FRAME, "capture event");
		if (last >= 0)
			CHECK(ev.sequence == (uint64_t)last + 1 + ev.dropped,
			      "sequence");
		last = ev.sequence;
		{
			uint8_t want = 0xA0 + ev.sequence % pbn;
			uint8_t *s = cring + ev.slot * opt_slot_bytes;

			for (size_t i = 0; i < opt_slot_bytes; i++)
				CHECK(s[i] == want, "playback byte %zu", i);
			CHECK(crc32_buf(s, ev.bytes) == ev.crc32, "playback CRC");
		}
		rel = ev.slot;
		got++;
	}
	counters(cfd, &c1);
	CHECK(c1.tx_completed - c0.tx_completed >= done + pbn, "tx counters");
	CHECK(!ioctl(cfd, FPGA_P2P_IOC_UNREGISTER, &ch), "UNREGISTER");
	CHECK(!ioctl(tfd, FPGA_P2P_IOC_UNREGISTER, &th), "UNREGISTER tx");
	close(cfd);
	close(tfd);
	result("duplex", "%lu played-back frames verified, %lu transmits done",
	       got, done);
}

/* The card goes away (PCI removal) under open files and streaming. */
static void cmd_remove(void)
{
	size_t bytes = opt_slot_bytes * opt_slots;
	int fd = dev_open();
	uint8_t *ring = ring_alloc(bytes);
	uint32_t h = reg_ring(fd, ring, opt_slot_bytes, opt_slots,
			      FPGA_P2P_DIR_C2H, 0);
	struct fpga_p2p_event ev;
	struct stream_stats st;
	struct pollfd p = { .fd = fd, .events = POLLIN };
	int ret;

	start(fd, h, FPGA_P2P_SRC_TEST_PATTERN, 0, 0);
	stream_verify(fd, h, ring, opt_slot_bytes, opt_slot_bytes, 5, &st, 0);
	card_remove();
	do
		ret = wait_ev(fd, FPGA_P2P_NO_SLOT, FPGA_P2P_NO_SLOT, &ev);
	while (!ret);
	CHECK(ret == -ENODEV, "WAIT after removal: %s", strerror(-ret));
	CHECK(poll(&p, 1, 0) == 1 && (p.revents & (POLLERR | POLLHUP)),
	      "poll after removal");
	CHECK(!ioctl(fd, FPGA_P2P_IOC_UNREGISTER, &h), "UNREGISTER: %s",
	      strerror(errno));
	shim_check_clean();
	close(fd);
	CHECK(open(dev_path, O_RDWR) < 0, "device node still opens");
	card_rescan();
	result("remove", "device removed while streaming; file closed cleanly");
}

/*
 * Races: one thread registers, starts, waits and unregisters in a loop;
 * one unmaps and remaps the ring memory or revokes it through the shim;
 * one releases, submits and reads counters with whatever handles it sees;
 * one opens and closes the device. Nothing may crash, hang or leak.
 */
static atomic_int race_stop;
static atomic_uint race_handle;
static uint8_t *race_mem;
static size_t race_bytes;
static int race_fd;

static void *race_owner(void *arg)
{
	unsigned long *loops = arg;

	while (!race_stop) {
		struct fpga_p2p_ring r = {
			.addr = (uintptr_t)race_mem, .slot_bytes = opt_slot_bytes,
			.nr_slots = opt_slots, .direction = FPGA_P2P_DIR_C2H,
		};
		struct fpga_p2p_start st = {
			.source = FPGA_P2P_SRC_TEST_PATTERN,
			.chunk_period_ns = 5000, .event_timeout_ms = 20,
		};
		struct fpga_p2p_event ev;

		if (ioctl(race_fd, FPGA_P2P_IOC_REGISTER, &r))
			continue;
		race_handle = r.handle;
		st.handle = r.handle;
		ioctl(race_fd, FPGA_P2P_IOC_START, &st);
		for (int i = 0; i < (int)(rnd() % 8); i++)
			if (wait_ev(race_fd, r.handle, rnd() % 2 ? FPGA_P2P_NO_SLOT :
				    rnd() % opt_slots, &ev) == -ENODEV)
				break;
		if (rnd() % 2)
			ioctl(race_fd, FPGA_P2P_IOC_STOP, &r.handle);
		ioctl(race_fd, FPGA_P2P_IOC_UNREGISTER, &r.handle);
		(*loops)++;
	}
	return NULL;
}

static void *race_revoker(void *arg)
{
	char cmd[64];

	(void)arg;
	snprintf(cmd, sizeof(cmd), "%d", getpid());
	while (!race_stop) {
		usleep(rnd() % 3000);
		if (rnd() % 2) {
			int fd = open(SHIM_DIR "/revoke", O_WRONLY);

			if (fd >= 0) {
				/* ESRCH when nothing is registered. */
				ssize_t n = write(fd, cmd, strlen(cmd));

				(void)n;
				close(fd);
			}
		} else {
			/* Memory goes away and comes back at the same place. */
			munmap(race_mem, race_bytes);
			CHECK(mmap(race_mem, race_bytes, PROT_READ | PROT_WRITE,
				   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED |
				   MAP_POPULATE, -1, 0) == race_mem, "remap");
		}
	}
	return NULL;
}

static void *race_poker(void *arg)
{
	(void)arg;
	while (!race_stop) {
		struct fpga_p2p_release rel = {
			.handle = race_handle, .slot = rnd() % opt_slots,
		};
		struct fpga_p2p_counters c;
		struct fpga_p2p_event ev;
		int fd;

		ioctl(race_fd, FPGA_P2P_IOC_RELEASE, &rel);
		ioctl(race_fd, FPGA_P2P_IOC_COUNTERS, &c);
		if (read(race_fd, &ev, sizeof(ev)) < 0 && errno == ENODEV)
			break;
		fd = open(dev_path, O_RDWR | O_NONBLOCK);
		if (fd >= 0) {
			struct fpga_p2p_ring r = {
				.addr = (uintptr_t)race_mem,
				.slot_bytes = opt_slot_bytes,
				.nr_slots = opt_slots,
				.direction = FPGA_P2P_DIR_C2H,
			};

			/* Another file: the device's capture ring is taken. */
			if (!ioctl(fd, FPGA_P2P_IOC_REGISTER, &r))
				ioctl(fd, FPGA_P2P_IOC_UNREGISTER, &r.handle);
			close(fd);
		}
	}
	return NULL;
}

static void cmd_race(void)
{
	unsigned long secs = opt_n ? opt_n : 20, loops = 0;
	pthread_t t[3];

	race_bytes = opt_slot_bytes * opt_slots;
	race_mem = ring_alloc(race_bytes);
	race_fd = open(dev_path, O_RDWR);
	CHECK(race_fd >= 0, "open");
	pthread_create(&t[0], NULL, race_owner, &loops);
	pthread_create(&t[1], NULL, race_revoker, NULL);
	pthread_create(&t[2], NULL, race_poker, NULL);
	sleep(secs);
	race_stop = 1;
	for (int i = 0; i < 3; i++)
		pthread_join(t[i], NULL);
	close(race_fd);
	shim_check_clean();
	result("race", "%lu register/stream/unregister loops against revocation",
	       loops);
}

/* The device goes away under threads registering, streaming and polling. */
static void cmd_remove_race(void)
{
	unsigned long cycles = opt_n ? opt_n : 10, loops = 0;

	race_bytes = opt_slot_bytes * opt_slots;
	race_mem = ring_alloc(race_bytes);
	for (unsigned long i = 0; i < cycles; i++) {
		pthread_t t[2];

		race_stop = 0;
		race_fd = dev_open();
		pthread_create(&t[0], NULL, race_owner, &loops);
		pthread_create(&t[1], NULL, race_poker, NULL);
		usleep(50000 + rnd() % 400000);
		card_remove();
		usleep(rnd() % 100000);
		race_stop = 1;
		pthread_join(t[0], NULL);
		pthread_join(t[1], NULL);
		close(race_fd);
		shim_check_clean();
		card_rescan();
		/* The next cycle opens the node that the new probe creates. */
		for (int w = 0; w < 100 && access(dev_path, F_OK); w++)
			usleep(20000);
	}
	result("remove-race", "%lu removals under %lu stream loops", cycles,
	       loops);
}

/* read(): whole records, EINVAL, EAGAIN, ETIMEDOUT; queue overflow. */
static void cmd_events(void)
{
	size_t bytes = opt_slot_bytes * opt_slots;
	struct fpga_p2p_event ev[4];
	struct fpga_p2p_counters c0, c1;
	int fd = dev_open();
	uint8_t *ring = ring_alloc(bytes);
	uint32_t h;
	unsigned long overflow = 0, frames = 0;
	ssize_t n;
	double t0;

	counters(fd, &c0);
	h = reg_ring(fd, ring, opt_slot_bytes, opt_slots, FPGA_P2P_DIR_C2H,
		     opt_slot_bytes / 4);
	CHECK(read(fd, ev, sizeof(ev[0]) - 1) < 0 && errno == EINVAL,
	      "short read buffer: %s", strerror(errno));
	{
		int nb = open(dev_path, O_RDWR | O_NONBLOCK);

		CHECK(read(nb, ev, sizeof(ev)) < 0 && errno == EAGAIN,
		      "O_NONBLOCK read: %s", strerror(errno));
		close(nb);
	}
	{
		/* A 50 ms event timeout, nothing running: ETIMEDOUT. */
		struct fpga_p2p_start s = {
			.handle = h, .source = FPGA_P2P_SRC_TEST_PATTERN,
			.chunk_period_ns = opt_period,
			.flags = FPGA_P2P_START_CHUNK_EVENTS,
			.event_timeout_ms = 50,
		};

		CHECK(!ioctl(fd, FPGA_P2P_IOC_START, &s), "START");
		CHECK(!ioctl(fd, FPGA_P2P_IOC_STOP, &h), "STOP");
		while (read(fd, ev, sizeof(ev)) > 0)
			;
		t0 = now_s();
		CHECK(read(fd, ev, sizeof(ev)) < 0 && errno == ETIMEDOUT,
		      "read timeout: %s", strerror(errno));
		CHECK(now_s() - t0 < 1.0, "timeout took %.2f s", now_s() - t0);
		for (unsigned int i = 0; i < opt_slots; i++) {
			struct fpga_p2p_release r = { .handle = h, .slot = i };

			ioctl(fd, FPGA_P2P_IOC_RELEASE, &r);
		}
		CHECK(!ioctl(fd, FPGA_P2P_IOC_START, &s), "START");
	}
	/* Release slots blindly without reading: chunk events pile up. */
	t0 = now_s();
	while (now_s() - t0 < 2.0) {
		for (unsigned int i = 0; i < opt_slots; i++) {
			struct fpga_p2p_release r = { .handle = h, .slot = i };

			ioctl(fd, FPGA_P2P_IOC_RELEASE, &r);
		}
		usleep(1000);
	}
	CHECK(!ioctl(fd, FPGA_P2P_IOC_STOP, &h), "STOP");
	while ((n = read(fd, ev, sizeof(ev))) > 0) {
		CHECK(n % sizeof(ev[0]) == 0, "partial record");
		for (ssize_t i = 0; i < n / (ssize_t)sizeof(ev[0]); i++) {
			if (ev[i].type == FPGA_P2P_EV_OVERFLOW)
				overflow += ev[i].dropped;
			frames += ev[i].type == FPGA_P2P_EV_FRAME;
		}
	}
	CHECK(errno == ETIMEDOUT, "final read: %s", strerror(errno));
	counters(fd, &c1);
	CHECK(overflow && overflow <= c1.event_overflows - c0.event_overflows,
	      "overflow marker %lu, counter %llu", overflow,
	      (unsigned long long)(c1.event_overflows - c0.event_overflows));
	CHECK(!ioctl(fd, FPGA_P2P_IOC_UNREGISTER, &h), "UNREGISTER");
	close(fd);
	result("events", "read() semantics; %lu events lost and reported", overflow);
}

/* Cost of trivial ioctl round trips. */
static void cmd_bench(void)
{
	struct fpga_p2p_counters c;
	struct fpga_p2p_info info;
	int fd = dev_open();
	double t0 = now_s();

	for (int i = 0; i < 20000; i++)
		ioctl(fd, FPGA_P2P_IOC_INFO, &info);
	printf("INFO ioctl: %.2f us\n", (now_s() - t0) / 20000 * 1e6);
	t0 = now_s();
	for (int i = 0; i < 20000; i++)
		ioctl(fd, FPGA_P2P_IOC_COUNTERS, &c);
	printf("COUNTERS ioctl: %.2f us\n", (now_s() - t0) / 20000 * 1e6);
	close(fd);
}

static void cmd_holdopen(void)
{
	int fd = dev_open();

	pause();
	close(fd);
}

static const struct {
	const char *name;
	void (*fn)(void);
} commands[] = {
	{ "info", cmd_info },
	{ "stream", cmd_stream },
	{ "hold", cmd_hold },
	{ "faults", cmd_faults },
	{ "revoke", cmd_revoke },
	{ "kill", cmd_kill },
	{ "fuzz", cmd_fuzz },
	{ "duplex", cmd_duplex },
	{ "remove", cmd_remove },
	{ "events", cmd_events },
	{ "race", cmd_race },
	{ "remove-race", cmd_remove_race },
	{ "bench", cmd_bench },
	{ "holdopen", cmd_holdopen },
};

int main(int argc, char **argv)
{
	const char *cmd;
	int opt;

	crc_init();
	if (argc < 2) {
		fprintf(stderr, "usage: see the source\n");
		return 2;
	}
	cmd = argv[1];
	optind = 2;
	while ((opt = getopt(argc, argv, "d:n:s:b:c:p:eq")) != -1) {
		switch (opt) {
		case 'd':
			dev_path = optarg;
			break;
		case 'n':
			opt_n = strtoul(optarg, NULL, 0);
			break;
		case 's':
			opt_slots = strtoul(optarg, NULL, 0);
			break;
		case 'b':
			opt_slot_bytes = strtoul(optarg, NULL, 0);
			break;
		case 'c':
			opt_chunk_bytes = strtoul(optarg, NULL, 0);
			break;
		case 'p':
			opt_period = strtoul(optarg, NULL, 0);
			break;
		case 'e':
			opt_events = 1;
			break;
		case 'q':
			opt_noverify = 1;
			break;
		default:
			return 2;
		}
	}
	for (size_t i = 0; i < ARRAY_SIZE(commands); i++) {
		if (!strcmp(cmd, commands[i].name)) {
			commands[i].fn();
			return 0;
		}
	}
	fprintf(stderr, "unknown command %s\n", cmd);
	return 2;
}
