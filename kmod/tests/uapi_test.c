// SPDX-License-Identifier: GPL-2.0
/*
 * The fpga_p2p uapi from C, as a kselftest (the kernel source's
 * tools/testing/selftests/kselftest_harness.h): the header compiles in C
 * and means what it says. INFO and the limits it reports, the documented
 * errno of hostile arguments, read() and WAIT semantics, an event queue
 * that overflows, and the card removed under an open, streaming file. The
 * capture suites (tests/capture-suite, through tegra-p2p) cover streaming,
 * ownership, revocation, crashes and the full hostile-argument set; these
 * are the parts they do not reach.
 *
 * Run by the QEMU harness as the suite "uapi" (tests/qemu/guest-init.sh),
 * against the emulated card, as root in the guest: the removal test writes
 * to the card's sysfs remove file and to /sys/bus/pci/rescan.
 * FPGA_P2P_DEV names the device node (default /dev/fpga-p2p0).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "../include/uapi/fpga_p2p.h"
#include "kselftest_harness.h"

#define SLOT_BYTES	(16 * 1024)
#define CHUNK_BYTES	(4 * 1024)
#define NR_SLOTS	4
#define BAD_HANDLE	12345
#define CAPS_KNOWN	(FPGA_P2P_CAP_CAPTURE | FPGA_P2P_CAP_TRANSMIT | \
			 FPGA_P2P_CAP_TEST_PATTERN | FPGA_P2P_CAP_PLAYBACK | \
			 FPGA_P2P_CAP_CHUNK_EVENTS | FPGA_P2P_CAP_COMPLETION)
/* The card's PCI IDs (kmod/fpga_p2p_regs.h) and its user block ID. */
#define CARD_VENDOR	0x10ee
#define CARD_DEVICE	0x9038
#define CARD_ID		0x52414452U
#define SHIM_STATS	"/sys/kernel/debug/nvp2p_shim/stats"

/* A call that must fail with @err; errno is read before anything else. */
#define EXPECT_ERRNO(err, call) do {					\
	long __ret;							\
	int __err;							\
	errno = 0;							\
	__ret = (call);							\
	__err = errno;							\
	EXPECT_EQ(-1, __ret) TH_LOG("%s succeeded", #call);		\
	EXPECT_EQ(err, __err) TH_LOG("%s: %s", #call, strerror(__err)); \
} while (0)

static const char *dev_path(void)
{
	const char *p = getenv("FPGA_P2P_DEV");

	return p ? p : "/dev/fpga-p2p0";
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/*
 * Ring memory with a page below it that is never unmapped: NVIDIA's
 * nv-p2p revokes a buffer when a mapping that ends exactly at its start
 * goes away.
 */
static void *ring_alloc(size_t bytes)
{
	long page = sysconf(_SC_PAGESIZE);
	char *p = mmap(NULL, bytes + page, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);

	return p == MAP_FAILED ? NULL : p + page;
}

static struct fpga_p2p_ring capture_ring(void *mem, __u32 slots,
					 __u64 slot_bytes, __u32 chunk_bytes)
{
	struct fpga_p2p_ring r = {
		.addr = (uintptr_t)mem,
		.slot_bytes = slot_bytes,
		.nr_slots = slots,
		.direction = FPGA_P2P_DIR_C2H,
		.chunk_bytes = chunk_bytes,
	};

	return r;
}

static struct fpga_p2p_start pattern_start(__u32 handle, __u32 flags,
					   __u32 timeout_ms)
{
	struct fpga_p2p_start s = {
		.handle = handle,
		.source = FPGA_P2P_SRC_TEST_PATTERN,
		.chunk_period_ns = 20000,
		.flags = flags,
		.event_timeout_ms = timeout_ms,
	};

	return s;
}

/* Events queued now, read without waiting; the number read or -errno. */
static long drain(int fd, __u64 *overflowed)
{
	struct fpga_p2p_event ev[8];
	struct pollfd p = { .fd = fd, .events = POLLIN };
	long total = 0;
	ssize_t n;
	int i;

	while (poll(&p, 1, 0) == 1 && (p.revents & POLLIN)) {
		n = read(fd, ev, sizeof(ev));
		if (n < 0)
			return -errno;
		if (n % sizeof(ev[0]))
			return -EMSGSIZE;
		for (i = 0; i < n / (ssize_t)sizeof(ev[0]); i++)
			if (ev[i].type == FPGA_P2P_EV_OVERFLOW && overflowed)
				*overflowed += ev[i].dropped;
		total += n / sizeof(ev[0]);
	}
	return total;
}

/* The card's directory under /sys/bus/pci/devices, or NULL. */
static char *card_dir(void)
{
	static char path[300];
	struct dirent *de;
	DIR *d = opendir("/sys/bus/pci/devices");
	char *found = NULL;

	if (!d)
		return NULL;
	while (!found && (de = readdir(d))) {
		unsigned int vendor = 0, device = 0;
		FILE *f;

		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/vendor",
			 de->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		if (fscanf(f, "%x", &vendor) != 1)
			vendor = 0;
		fclose(f);
		snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/device",
			 de->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		if (fscanf(f, "%x", &device) != 1)
			device = 0;
		fclose(f);
		if (vendor == CARD_VENDOR && device == CARD_DEVICE) {
			snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s",
				 de->d_name);
			found = path;
		}
	}
	closedir(d);
	return found;
}

static int write_str(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = write(fd, s, strlen(s));
	close(fd);
	return n == (ssize_t)strlen(s) ? 0 : -EIO;
}

/* A "key N" line of the nv-p2p shim's stats; -1 when there is none. */
static long shim_stat(const char *key)
{
	char line[128], name[64];
	long v, found = -1;
	FILE *f = fopen(SHIM_STATS, "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%63s %ld", name, &v) == 2 && !strcmp(name, key))
			found = v;
	fclose(f);
	return found;
}

FIXTURE(fpga) {
	int fd;
	struct fpga_p2p_info info;
};

FIXTURE_SETUP(fpga)
{
	self->fd = open(dev_path(), O_RDWR);
	ASSERT_LE(0, self->fd) TH_LOG("open %s: %s", dev_path(), strerror(errno));
	ASSERT_EQ(0, ioctl(self->fd, FPGA_P2P_IOC_INFO, &self->info));
}

FIXTURE_TEARDOWN(fpga)
{
	if (self->fd >= 0)
		close(self->fd);
	/* A removal test that failed half-way leaves the card to the suites after it. */
	if (!card_dir())
		write_str("/sys/bus/pci/rescan", "1");
}

/* INFO says what the header says, and the limits it reports are the driver's. */
TEST_F_TIMEOUT(fpga, info_and_limits, 120)
{
	const struct fpga_p2p_info *i = &self->info;
	__u32 chunks = i->max_chunks_per_frame;
	struct fpga_p2p_ring r;
	void *mem;

	EXPECT_EQ(FPGA_P2P_UAPI_VERSION, (int)i->uapi_version);
	EXPECT_EQ(FPGA_P2P_SLOT_ALIGN, (int)i->slot_align);
	EXPECT_EQ(sizeof(struct fpga_p2p_event), (size_t)i->event_bytes);
	EXPECT_EQ(CARD_ID, i->hw_id);
	EXPECT_EQ(FPGA_P2P_CAP_CAPTURE | FPGA_P2P_CAP_TRANSMIT,
		  i->caps & (FPGA_P2P_CAP_CAPTURE | FPGA_P2P_CAP_TRANSMIT));
	EXPECT_EQ(0U, i->caps & ~CAPS_KNOWN) TH_LOG("reserved caps bits set: 0x%x", i->caps);
	EXPECT_LE(2U, i->max_slots);
	EXPECT_LE(1U, chunks);
	EXPECT_LT(0ULL, i->max_slot_bytes);
	EXPECT_EQ(0ULL, i->max_slot_bytes % i->slot_align);
	EXPECT_EQ(0U, i->reserved0);
	EXPECT_EQ(0ULL, i->reserved[0] | i->reserved[1] | i->reserved[2] | i->reserved[3]);

	/* At the limits a ring registers; one past any of them it does not. */
	mem = ring_alloc((size_t)2 * chunks * i->slot_align);
	ASSERT_NE(NULL, mem);
	r = capture_ring(mem, i->max_slots, i->slot_align, 0);
	ASSERT_EQ(0, ioctl(self->fd, FPGA_P2P_IOC_REGISTER, &r))
		TH_LOG("max_slots: %s", strerror(errno));
	EXPECT_NE(0U, r.handle);
	EXPECT_EQ(0, ioctl(self->fd, FPGA_P2P_IOC_UNREGISTER, &r.handle));
	r = capture_ring(mem, 2, (__u64)chunks * i->slot_align, i->slot_align);
	ASSERT_EQ(0, ioctl(self->fd, FPGA_P2P_IOC_REGISTER, &r))
		TH_LOG("max_chunks_per_frame: %s", strerror(errno));
	EXPECT_EQ(0, ioctl(self->fd, FPGA_P2P_IOC_UNREGISTER, &r.handle));

	r = capture_ring(mem, i->max_slots + 1, i->slot_align, 0);
	EXPECT_ERRNO(EINVAL, ioctl(self->fd, FPGA_P2P_IOC_REGISTER, &r));
	r = capture_ring(mem, 2, (__u64)(chunks + 1) * i->slot_align, i->slot_align);
	EXPECT_ERRNO(EINVAL, ioctl(self->fd, FPGA_P2P_IOC_REGISTER, &r));
	r = capture_ring(mem, 2, i->max_slot_bytes + i->slot_align, 0);
	EXPECT_ERRNO(EINVAL, ioctl(self->fd, FPGA_P2P_IOC_REGISTER, &r));
}

/* Hostile arguments get the errno the header documents; nothing else changes. */
TEST_F_TIMEOUT(fpga, hostile_arguments, 120)
{
	struct fpga_p2p_release rel = { .handle = BAD_HANDLE };
	struct fpga_p2p_tx tx = { .handle = BAD_HANDLE, .bytes = 64 };
	struct fpga_p2p_wait w = { .release_slot = FPGA_P2P_NO_SLOT };
	__u32 bad = BAD_HANDLE, zero = 0, h;
	struct fpga_p2p_start s;
	struct fpga_p2p_ring r;
	void *mem, *hole;
	int fd2;

	mem = ring_alloc(NR_SLOTS * SLOT_BYTES);
	ASSERT_NE(NULL, mem);
	hole = mmap(NULL, NR_SLOTS * SLOT_BYTES, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, hole);
	ASSERT_EQ(0, munmap(hole, NR_SLOTS * SLOT_BYTES));

	/* Unknown commands: a number, a size, a magic the driver has not. */
	EXPECT_ERRNO(ENOTTY, ioctl(self->fd, _IO(FPGA_P2P_IOC_MAGIC, 0x7f)));
	EXPECT_ERRNO(ENOTTY, ioctl(self->fd, _IOR(FPGA_P2P_IOC_MAGIC, 0x00, __u64), &self->info));
	EXPECT_ERRNO(ENOTTY, ioctl(self->fd, _IOR(0xF3, 0x00, struct fpga_p2p_info), &self->info));
	/* Bad user pointers. */
	EXPECT_ERRNO(EFAULT, ioctl(self->fd, FPGA_P2P_IOC_INFO, NULL));
	EXPECT_ERRNO(EFAULT, ioctl(self->fd, FPGA_P2P_IOC_COUNTERS, NULL));
	EXPECT_ERRNO(EFAULT, ioctl(self->fd, FPGA_P2P_IOC_REGISTER, NULL));
	EXPECT_ERRNO(EFAULT, ioctl(self->fd, FPGA_P2P_IOC_WAIT, NULL));

	/* REGISTER: every rule of the header. */
	r = capture_ring(mem, NR_SLOTS, SLOT_BYTES, CHUNK_BYTES);
	r.reserved[0] = 1;
	EXPECT_ERRNO(EINVAL, ioctl(self->fd, FPGA_P2P_IOC_REGISTER, &r));
	r = capture_ring(mem, NR_SLOTS, SLOT_BYTES, CHUNK_BYTES);
	r.reserved0 = 1;
	EXPECT_ERRNO(EINVAL, ioctl(self->fd, FPGA_P2P_IOC_REGISTER, &r));
	r = capture_ring(mem, NR_SLOTS, SLOT_BYTES, CHUNK_BYTES);
	r.flags = 1U << 7;	/* a flag the header does not define */
	EXPECT_ERRNO(EINVAL, ioctl(self->fd, FPGA_P2P_IOC_REGISTER, &r));
	r = capture_ring((char *)mem + 64, NR_SLOTS, SLOT_BYTES, CHUNK_BYTES);
	EXPECT_ERRNO(EINVAL, ioctl(self->fd, FPGA_P2P_IOC_REGISTER, &r));
	r = capture_ring(NULL, NR_SLOTS, SLOT_BYTES, CHUNK_BYTES);
	EXPECT_ERRNO(EINVAL, ioctl(self->fd, FPGA_P2P_IOC_REGISTER, &r));
	r = capture_ring(mem, NR_SLOTS, 0, 0);
	EXPECT_ERRNO(EINVAL, ioctl(self->fd, FPGA_P2P_IOC_REGISTER, &r));
	r = capture_ring(mem, NR_SLOTS, SLOT_BYTES + 1, 0);
	EXPECT_ERRNO(EINVAL, ioctl(self->fd, FPGA_P2P_IOC_REGISTER, &r));
	r = capture_ring(mem, 1, SLOT_BYTES, CHUNK_BYTES);
	EXPECT_ERRNO(EINVAL, ioctl(self->fd, FPGA_P2P_IOC_REGISTER, &r));
	r = capture_ring(mem, NR_SLOTS, SLOT_BYTES, 3 * CHUNK_BYTES);
	EXPECT_ERRNO(EINVAL, ioctl(self->fd, FPGA_P2P_IOC_REGISTER, &r));
	r = capture_ring(mem, NR_SLOTS, SLOT_BYTES, 1000);
	EXPECT_ERRNO(EINVAL, ioctl(self->fd, FPGA_P2P_IOC_REGISTER, &r));
	r = capture_ring(mem, NR_SLOTS, SLOT_BYTES, CHUNK_BYTES);
	r.direction = 2;
	EXPECT_ERRNO(EINVAL, ioctl(self->fd, FPGA_P2P_IOC_REGISTER, &r));
	r.direction = FPGA_P2P_DIR_H2C;		/* transmit: no chunks */
	EXPECT_ERRNO(EINVAL, ioctl(self->fd, FPGA_P2P_IOC_REGISTER, &r));
	r = capture_ring(mem, 1, SLOT_BYTES, 0);
	r.direction = FPGA_P2P_DIR_H2C;
	r.flags = FPGA_P2P_RING_COMPLETION;	/* completion records: capture only */
	EXPECT_ERRNO(EINVAL, ioctl(self->fd, FPGA_P2P_IOC_REGISTER, &r));
	r = capture_ring(mem, NR_SLOTS, SLOT_BYTES, CHUNK_BYTES);
	r.addr = UINT64_MAX & ~(__u64)(FPGA_P2P_SLOT_ALIGN - 1);
	EXPECT_ERRNO(EINVAL, ioctl(self->fd, FPGA_P2P_IOC_REGISTER, &r));
	r = capture_ring(hole, NR_SLOTS, SLOT_BYTES, CHUNK_BYTES);
	EXPECT_ERRNO(EFAULT, ioctl(self->fd, FPGA_P2P_IOC_REGISTER, &r));

	/* Handles this file does not have. */
	EXPECT_ERRNO(ENOENT, ioctl(self->fd, FPGA_P2P_IOC_UNREGISTER, &zero));
	EXPECT_ERRNO(ENOENT, ioctl(self->fd, FPGA_P2P_IOC_UNREGISTER, &bad));
	EXPECT_ERRNO(ENOENT, ioctl(self->fd, FPGA_P2P_IOC_STOP, &bad));
	EXPECT_ERRNO(ENOENT, ioctl(self->fd, FPGA_P2P_IOC_RELEASE, &rel));
	EXPECT_ERRNO(ENOENT, ioctl(self->fd, FPGA_P2P_IOC_TX_SUBMIT, &tx));
	s = pattern_start(BAD_HANDLE, 0, 0);
	EXPECT_ERRNO(ENOENT, ioctl(self->fd, FPGA_P2P_IOC_START, &s));

	/* START and WAIT arguments, checked before the handle. */
	s.reserved[0] = 1;
	EXPECT_ERRNO(EINVAL, ioctl(self->fd, FPGA_P2P_IOC_START, &s));
	s = pattern_start(BAD_HANDLE, 0x80, 0);
	EXPECT_ERRNO(EINVAL, ioctl(self->fd, FPGA_P2P_IOC_START, &s));
	s = pattern_start(BAD_HANDLE, 0, 3600001);
	EXPECT_ERRNO(EINVAL, ioctl(self->fd, FPGA_P2P_IOC_START, &s));
	s = pattern_start(BAD_HANDLE, 0, 0);
	s.source = 7;
	EXPECT_ERRNO(EINVAL, ioctl(self->fd, FPGA_P2P_IOC_START, &s));
	s = pattern_start(BAD_HANDLE, 0, 0);
	s.playback_frames = 1;
	EXPECT_ERRNO(EINVAL, ioctl(self->fd, FPGA_P2P_IOC_START, &s));
	w.reserved0 = 1;
	EXPECT_ERRNO(EINVAL, ioctl(self->fd, FPGA_P2P_IOC_WAIT, &w));
	w.reserved0 = 0;
	w.timeout_ms = 3600001;
	EXPECT_ERRNO(EINVAL, ioctl(self->fd, FPGA_P2P_IOC_WAIT, &w));
	tx.target = FPGA_P2P_TX_PLAYBACK + 1;
	EXPECT_ERRNO(EINVAL, ioctl(self->fd, FPGA_P2P_IOC_TX_SUBMIT, &tx));

	/* With a capture ring registered. */
	r = capture_ring(mem, NR_SLOTS, SLOT_BYTES, CHUNK_BYTES);
	ASSERT_EQ(0, ioctl(self->fd, FPGA_P2P_IOC_REGISTER, &r))
		TH_LOG("REGISTER: %s", strerror(errno));
	h = r.handle;
	EXPECT_ERRNO(EBUSY, ioctl(self->fd, FPGA_P2P_IOC_REGISTER, &r));
	fd2 = open(dev_path(), O_RDWR);
	ASSERT_LE(0, fd2);
	EXPECT_ERRNO(EBUSY, ioctl(fd2, FPGA_P2P_IOC_REGISTER, &r));
	EXPECT_ERRNO(ENOENT, ioctl(fd2, FPGA_P2P_IOC_STOP, &h));
	close(fd2);
	rel.handle = h;
	rel.slot = NR_SLOTS;
	EXPECT_ERRNO(ERANGE, ioctl(self->fd, FPGA_P2P_IOC_RELEASE, &rel));
	rel.slot = 0;
	EXPECT_ERRNO(EINVAL, ioctl(self->fd, FPGA_P2P_IOC_RELEASE, &rel));
	tx.handle = h;
	tx.target = FPGA_P2P_TX_DETECTIONS;
	EXPECT_ERRNO(EINVAL, ioctl(self->fd, FPGA_P2P_IOC_TX_SUBMIT, &tx));
	EXPECT_ERRNO(EALREADY, ioctl(self->fd, FPGA_P2P_IOC_STOP, &h));
	s = pattern_start(h, 0, 0);
	ASSERT_EQ(0, ioctl(self->fd, FPGA_P2P_IOC_START, &s)) TH_LOG("START: %s", strerror(errno));
	EXPECT_ERRNO(EALREADY, ioctl(self->fd, FPGA_P2P_IOC_START, &s));
	EXPECT_EQ(0, ioctl(self->fd, FPGA_P2P_IOC_STOP, &h));
	EXPECT_ERRNO(EALREADY, ioctl(self->fd, FPGA_P2P_IOC_STOP, &h));
	EXPECT_EQ(0, ioctl(self->fd, FPGA_P2P_IOC_UNREGISTER, &h));
	EXPECT_ERRNO(ENOENT, ioctl(self->fd, FPGA_P2P_IOC_UNREGISTER, &h));
}

/* read() hands out whole records and waits as long as START or WAIT said. */
TEST_F_TIMEOUT(fpga, read_and_wait, 120)
{
	struct fpga_p2p_wait w = { .release_slot = FPGA_P2P_NO_SLOT, .timeout_ms = 200 };
	struct fpga_p2p_event ev[5];
	struct fpga_p2p_start s;
	struct fpga_p2p_ring r;
	void *mem;
	double t0, dt;
	ssize_t n;
	int nb;

	mem = ring_alloc(NR_SLOTS * SLOT_BYTES);
	ASSERT_NE(NULL, mem);
	r = capture_ring(mem, NR_SLOTS, SLOT_BYTES, CHUNK_BYTES);
	ASSERT_EQ(0, ioctl(self->fd, FPGA_P2P_IOC_REGISTER, &r))
		TH_LOG("REGISTER: %s", strerror(errno));

	EXPECT_ERRNO(EINVAL, read(self->fd, ev, sizeof(ev[0]) - 1));
	nb = open(dev_path(), O_RDWR | O_NONBLOCK);
	ASSERT_LE(0, nb);
	EXPECT_ERRNO(EAGAIN, read(nb, ev, sizeof(ev)));
	close(nb);

	/* Events while capture runs: whole records only. */
	s = pattern_start(r.handle, FPGA_P2P_START_CHUNK_EVENTS, 3000);
	ASSERT_EQ(0, ioctl(self->fd, FPGA_P2P_IOC_START, &s)) TH_LOG("START: %s", strerror(errno));
	n = read(self->fd, ev, sizeof(ev) - sizeof(ev[0]) / 2);
	EXPECT_LT(0, n) TH_LOG("read while streaming: %s", strerror(errno));
	EXPECT_EQ(0, n % (ssize_t)sizeof(ev[0]));
	EXPECT_EQ(0, ioctl(self->fd, FPGA_P2P_IOC_STOP, &r.handle));
	EXPECT_LE(0, drain(self->fd, NULL));

	/* Nothing more comes: the file's timeout from START, not the default 1 s. */
	t0 = now_s();
	EXPECT_ERRNO(ETIMEDOUT, read(self->fd, ev, sizeof(ev)));
	dt = now_s() - t0;
	EXPECT_LE(2.9, dt) TH_LOG("read gave up after %.2f s, not 3 s", dt);
	EXPECT_GT(30.0, dt);
	/* WAIT's own timeout wins over the file's. */
	t0 = now_s();
	EXPECT_ERRNO(ETIMEDOUT, ioctl(self->fd, FPGA_P2P_IOC_WAIT, &w));
	dt = now_s() - t0;
	EXPECT_LE(0.19, dt);
	EXPECT_GT(2.9, dt) TH_LOG("WAIT gave up after %.2f s, not 0.2 s", dt);
	EXPECT_EQ(0, ioctl(self->fd, FPGA_P2P_IOC_UNREGISTER, &r.handle));
}

/* A queue nobody reads overflows: the loss is reported in order and counted. */
TEST_F_TIMEOUT(fpga, event_queue_overflow, 120)
{
	struct fpga_p2p_counters c0, c1;
	struct fpga_p2p_event ev;
	struct fpga_p2p_start s;
	struct fpga_p2p_ring r;
	__u64 overflowed = 0;
	void *mem;
	double t0;
	__u32 i;

	mem = ring_alloc(NR_SLOTS * SLOT_BYTES);
	ASSERT_NE(NULL, mem);
	ASSERT_EQ(0, ioctl(self->fd, FPGA_P2P_IOC_COUNTERS, &c0));
	r = capture_ring(mem, NR_SLOTS, SLOT_BYTES, CHUNK_BYTES);
	ASSERT_EQ(0, ioctl(self->fd, FPGA_P2P_IOC_REGISTER, &r))
		TH_LOG("REGISTER: %s", strerror(errno));
	s = pattern_start(r.handle, FPGA_P2P_START_CHUNK_EVENTS, 200);
	ASSERT_EQ(0, ioctl(self->fd, FPGA_P2P_IOC_START, &s)) TH_LOG("START: %s", strerror(errno));
	/* Slots released blindly, events never read: 5 events a frame pile up. */
	t0 = now_s();
	while (now_s() - t0 < 2.0) {
		for (i = 0; i < NR_SLOTS; i++) {
			struct fpga_p2p_release rel = { .handle = r.handle, .slot = i };

			ioctl(self->fd, FPGA_P2P_IOC_RELEASE, &rel);
		}
		usleep(1000);
	}
	EXPECT_EQ(0, ioctl(self->fd, FPGA_P2P_IOC_STOP, &r.handle));
	EXPECT_LT(0, drain(self->fd, &overflowed));
	EXPECT_ERRNO(ETIMEDOUT, read(self->fd, &ev, sizeof(ev)));
	ASSERT_EQ(0, ioctl(self->fd, FPGA_P2P_IOC_COUNTERS, &c1));
	EXPECT_LT(0ULL, overflowed);
	EXPECT_GE(c1.event_overflows - c0.event_overflows, overflowed)
		TH_LOG("overflow markers say %llu lost, the counter %llu",
		       (unsigned long long)overflowed,
		       (unsigned long long)(c1.event_overflows - c0.event_overflows));
	EXPECT_EQ(0, ioctl(self->fd, FPGA_P2P_IOC_UNREGISTER, &r.handle));
}

/*
 * The card goes away (PCI removal) under an open file that streams: the
 * ring faults with DEVICE_GONE, then the file says ENODEV, poll() says
 * POLLERR | POLLHUP, UNREGISTER still works, nothing stays pinned, the node
 * is gone; a rescan brings the card, and /dev/fpga-p2pN, back.
 */
TEST_F_TIMEOUT(fpga, card_removed_while_streaming, 120)
{
	struct fpga_p2p_wait w = { .release_slot = FPGA_P2P_NO_SLOT, .timeout_ms = 5000 };
	struct pollfd p = { .events = POLLIN };
	struct fpga_p2p_start s;
	struct fpga_p2p_ring r;
	int frames = 0, ret, err, fd, tries;
	bool gone_fault = false;
	char path[340];
	const char *card;
	void *mem;

	card = card_dir();
	ASSERT_NE(NULL, card) TH_LOG("no PCI device %04x:%04x", CARD_VENDOR, CARD_DEVICE);
	mem = ring_alloc(NR_SLOTS * SLOT_BYTES);
	ASSERT_NE(NULL, mem);
	r = capture_ring(mem, NR_SLOTS, SLOT_BYTES, 0);
	ASSERT_EQ(0, ioctl(self->fd, FPGA_P2P_IOC_REGISTER, &r))
		TH_LOG("REGISTER: %s", strerror(errno));
	s = pattern_start(r.handle, 0, 5000);
	ASSERT_EQ(0, ioctl(self->fd, FPGA_P2P_IOC_START, &s)) TH_LOG("START: %s", strerror(errno));
	while (frames < 3) {
		ASSERT_EQ(0, ioctl(self->fd, FPGA_P2P_IOC_WAIT, &w))
			TH_LOG("WAIT: %s", strerror(errno));
		w.release_handle = r.handle;
		w.release_slot = FPGA_P2P_NO_SLOT;
		if (w.event.type == FPGA_P2P_EV_FRAME) {
			w.release_slot = w.event.slot;
			frames++;
		}
	}

	snprintf(path, sizeof(path), "%s/remove", card);
	ASSERT_EQ(0, write_str(path, "1")) TH_LOG("%s", path);
	w.release_slot = FPGA_P2P_NO_SLOT;
	for (;;) {
		errno = 0;
		ret = ioctl(self->fd, FPGA_P2P_IOC_WAIT, &w);
		err = errno;
		if (ret)
			break;
		if (w.event.type == FPGA_P2P_EV_FAULT &&
		    w.event.chunk == FPGA_P2P_FAULT_DEVICE_GONE)
			gone_fault = true;
	}
	EXPECT_EQ(ENODEV, err) TH_LOG("WAIT after the removal: %s", strerror(err));
	EXPECT_TRUE(gone_fault);
	p.fd = self->fd;
	ASSERT_EQ(1, poll(&p, 1, 0));
	EXPECT_EQ(POLLERR | POLLHUP, p.revents & (POLLERR | POLLHUP));
	EXPECT_EQ(0, ioctl(self->fd, FPGA_P2P_IOC_UNREGISTER, &r.handle));
	close(self->fd);
	self->fd = -1;
	/* The shim counts what it holds (NVIDIA's nv-p2p has no such file). */
	if (access(SHIM_STATS, R_OK) == 0) {
		EXPECT_EQ(0, shim_stat("page_tables"));
		EXPECT_EQ(0, shim_stat("mappings"));
	}
	EXPECT_ERRNO(ENOENT, open(dev_path(), O_RDWR));

	ASSERT_EQ(0, write_str("/sys/bus/pci/rescan", "1"));
	fd = -1;
	for (tries = 0; tries < 100 && fd < 0; tries++) {
		fd = open(dev_path(), O_RDWR);
		if (fd < 0)
			usleep(100000);
	}
	ASSERT_LE(0, fd) TH_LOG("%s did not come back after a rescan", dev_path());
	EXPECT_EQ(0, ioctl(fd, FPGA_P2P_IOC_INFO, &self->info));
	close(fd);
}

TEST_HARNESS_MAIN
