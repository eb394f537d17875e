/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
/*
 * fpga_p2p: userspace interface of the radar FPGA capture/transmit driver.
 *
 * The FPGA streams frames by DMA into a ring of slots that userspace
 * allocated (GPU-visible pinned memory) and registered once. Every frame
 * that completes produces one fixed-size event record, read with read();
 * the application owns that slot until it releases it. A transmit ring
 * carries buffers to the FPGA on the host-to-card channel.
 *
 * All structures have fixed sizes and explicit padding so that 32-bit and
 * 64-bit userspace share one layout. Reserved fields must be zero on input
 * (the driver returns -EINVAL otherwise) and are zero on output.
 *
 * Rings belong to the open file that registered them: handles are only valid
 * on that file. A device has at most one capture (C2H) ring and one transmit
 * (H2C) ring at a time. Events of all rings of a file arrive on that file in
 * the order they happened; use one open file per ring when separate threads
 * consume capture and transmit events.
 *
 * Errors of the ioctls, read() and poll():
 *   EINVAL     malformed argument: nonzero reserved field, unknown flag, source,
 *              direction or target, bad alignment or size, the wrong ring
 *              direction for the call, releasing a slot the application
 *              does not own
 *   ENOENT     the handle names no ring of this open file
 *   ERANGE     slot index >= nr_slots
 *   EBUSY      REGISTER: the device already has a ring of that direction, or
 *              the file already has one; TX_SUBMIT: the slot is in flight
 *   EALREADY   START on a running ring, STOP on a stopped one
 *   EFAULT     bad user pointer; ring memory not mapped or not writable
 *   ENOMEM     out of memory or pinnable memory
 * (rings beyond the limits in INFO, or not a multiple of slot_align, are
 * EINVAL)
 *   EIO        the ring's memory was revoked (EV_REVOKED: only UNREGISTER
 *              remains) or its engine faulted (EV_FAULT: STOP or START
 *              recover capture, transmit needs a new REGISTER); read() and
 *              WAIT return it once the queue is empty
 *   ENODEV     the device was removed; only close() remains useful
 *   EAGAIN     read() with O_NONBLOCK and no event queued
 *   EOPNOTSUPP REGISTER with FPGA_P2P_RING_COMPLETION where the DMA path to
 *              the ring's memory needs syncs (bounce buffering, caches the
 *              device does not snoop): a record the consumer resets in place
 *              would be undone; register without it
 *   ETIMEDOUT  read() or WAIT: no event within the timeout; STOP: the
 *              engine did not stop within 500 ms (counted in dma_timeouts)
 *   EINTR      interrupted by a signal (WAIT: a release it carried was
 *              done before the wait began)
 * poll(): EPOLLIN when events are queued; EPOLLERR while a ring of the file is
 * revoked or faulted or the device is gone; EPOLLHUP when the device is gone.
 */
#ifndef _UAPI_FPGA_P2P_H
#define _UAPI_FPGA_P2P_H

#include <linux/ioctl.h>
#include <linux/types.h>

#define FPGA_P2P_UAPI_VERSION		1

/* Slot addresses and sizes must be multiples of this (Tegra nv-p2p). */
#define FPGA_P2P_SLOT_ALIGN		4096

/*
 * Capabilities (fpga_p2p_info.caps); bits 5-7 and 9-31 are reserved, zero.
 * Bit 8 and up belong to GPU-triggered processing (completion records).
 */
#define FPGA_P2P_CAP_CAPTURE		(1U << 0)	/* card-to-host stream */
#define FPGA_P2P_CAP_TRANSMIT		(1U << 1)	/* host-to-card stream */
#define FPGA_P2P_CAP_TEST_PATTERN	(1U << 2)
#define FPGA_P2P_CAP_PLAYBACK		(1U << 3)
#define FPGA_P2P_CAP_CHUNK_EVENTS	(1U << 4)
/* --- GPU-triggered processing: completion records (capability bit 8) --- */
#define FPGA_P2P_CAP_COMPLETION		(1U << 8)	/* see fpga_p2p_completion */

struct fpga_p2p_info {
	__u32 uapi_version;		/* FPGA_P2P_UAPI_VERSION */
	__u32 caps;			/* FPGA_P2P_CAP_* */
	__u32 hw_id;			/* user block ID register */
	__u32 hw_version;		/* user block version register */
	__u32 max_slots;		/* per ring */
	__u32 max_chunks_per_frame;
	__u64 max_slot_bytes;
	__u32 slot_align;		/* FPGA_P2P_SLOT_ALIGN */
	__u32 event_bytes;		/* sizeof(struct fpga_p2p_event) */
	__u32 max_playback_frames;	/* frames the playback memory holds */
	__u32 reserved0;
	__u64 reserved[4];
};

/* Ring direction (fpga_p2p_ring.direction). */
#define FPGA_P2P_DIR_C2H		0	/* capture: card to host */
#define FPGA_P2P_DIR_H2C		1	/* transmit: host to card */

/* REGISTER flags (fpga_p2p_ring.flags). */
#define FPGA_P2P_RING_COMPLETION	(1U << 0)	/* a status page of completion records */

/*
 * REGISTER: addr and slot_bytes multiples of slot_align, slot_bytes <=
 * max_slot_bytes, 2 <= nr_slots <= max_slots for capture (1 for transmit),
 * the whole ring at most 1 GiB. Capture: chunk_bytes 0 (one chunk per slot)
 * or a multiple of slot_align dividing slot_bytes, at most
 * max_chunks_per_frame chunks; transmit: chunk_bytes 0. The memory must be
 * mapped writable by the calling process; it stays pinned until UNREGISTER,
 * close or revocation. Capture and transmit rings of one file must not
 * overlap.
 *
 * FPGA_P2P_RING_COMPLETION (capture, cards with FPGA_P2P_CAP_COMPLETION;
 * EINVAL otherwise):
 * the registration also covers FPGA_P2P_STATUS_BYTES right after the last
 * slot (addr + nr_slots * slot_bytes), in the same pinning and mapping: the
 * status page. After the last data byte of every chunk the card writes that
 * slot's struct fpga_p2p_completion at offset slot * sizeof(struct
 * fpga_p2p_completion) of the page, in the same DMA stream as the data, so
 * the record never overtakes the chunk's bytes (PCIe posted writes, Relaxed
 * Ordering off). A GPU can wait on its first word (docs/capture-path.md).
 */
struct fpga_p2p_ring {
	__u64 addr;			/* user virtual address, slot-aligned */
	__u64 slot_bytes;		/* bytes per slot, slot-aligned */
	__u32 nr_slots;			/* >= 2 for capture, >= 1 for transmit */
	__u32 direction;		/* FPGA_P2P_DIR_* */
	__u32 chunk_bytes;		/* capture: DMA chunk; divides slot_bytes */
	__u32 handle;			/* out: names the ring in later calls */
	__u32 flags;			/* FPGA_P2P_RING_* */
	__u32 reserved0;
	__u64 reserved[1];
};

/* --- GPU-triggered processing: the status page (FPGA_P2P_RING_COMPLETION) --- */
#define FPGA_P2P_STATUS_BYTES		4096
#define FPGA_P2P_COMPLETION_MAGIC	0x434f4d50U	/* "COMP" */

/*
 * A slot's completion record, written by the card after each chunk of the
 * frame it is filling. chunks counts the frame's chunks landed in the slot
 * so far (chunk c writes c + 1): when it reads n, chunks 0 .. n-1 of the
 * slot hold the frame's bytes. The card never reads it and never resets it:
 * the consumer writes 0 to chunks before it releases the slot (the card
 * fills a slot only after its release, so the next frame counts up from 0).
 * The count never exceeds the chunks of a frame (at most
 * max_chunks_per_frame), so it does not wrap.
 */
struct fpga_p2p_completion {
	__u32 chunks;			/* chunks landed; the consumer resets it */
	__u32 magic;			/* FPGA_P2P_COMPLETION_MAGIC */
	__u64 sequence;			/* the frame's sequence number */
	__u32 chunk;			/* the chunk just landed */
	__u32 reserved0;
	__u64 timestamp_ns;		/* card clock when the chunk's last byte left */
};

/* Frame sources of the FPGA (fpga_p2p_start.source). */
#define FPGA_P2P_SRC_ADC		0	/* the radar front end */
#define FPGA_P2P_SRC_TEST_PATTERN	1	/* checkable pattern, see docs */
#define FPGA_P2P_SRC_PLAYBACK		2	/* frames uploaded by transmit */

/* fpga_p2p_start.flags */
#define FPGA_P2P_START_CHUNK_EVENTS	(1U << 0)	/* an event per chunk too */

/*
 * START (capture rings): playback_frames is 1..max_playback_frames for
 * FPGA_P2P_SRC_PLAYBACK (and slot_bytes must fit a playback frame), 0
 * otherwise; event_timeout_ms at most 3600000. Slots the application holds
 * stay held; all others go to the engine.
 */
struct fpga_p2p_start {
	__u32 handle;			/* a capture ring */
	__u32 source;			/* FPGA_P2P_SRC_* */
	__u32 chunk_period_ns;		/* pattern/playback pacing, 0 = default */
	__u32 flags;			/* FPGA_P2P_START_* */
	__u32 playback_frames;		/* playback: frames to cycle through */
	__u32 event_timeout_ms;		/* read() gives up after this, 0 = 1000 */
	__u64 reserved[2];
};

struct fpga_p2p_release {
	__u32 handle;
	__u32 slot;
};

/* Transmit targets inside the FPGA (fpga_p2p_tx.target). */
#define FPGA_P2P_TX_DETECTIONS		0	/* detection list for the host link */
#define FPGA_P2P_TX_WAVEFORM		1	/* chirp waveform table */
#define FPGA_P2P_TX_PLAYBACK		2	/* a frame for playback memory */

struct fpga_p2p_tx {
	__u32 handle;			/* a transmit ring */
	__u32 slot;
	__u32 bytes;			/* > 0, <= slot_bytes */
	__u32 target;			/* FPGA_P2P_TX_* */
	__u32 index;			/* playback: frame index in card memory */
	__u32 reserved0;
	__u64 cookie;			/* echoed in the completion event */
};

/* Event types (fpga_p2p_event.type). */
#define FPGA_P2P_EV_FRAME		1	/* a capture slot is READY */
#define FPGA_P2P_EV_CHUNK		2	/* a chunk of a frame landed */
#define FPGA_P2P_EV_TX_DONE		3	/* a transmit slot is free again */
#define FPGA_P2P_EV_REVOKED		4	/* ring memory went away */
#define FPGA_P2P_EV_FAULT		5	/* engine error; capture stopped */
#define FPGA_P2P_EV_OVERFLOW		6	/* events were lost (never expected) */

/* Event flags (fpga_p2p_event.flags). */
#define FPGA_P2P_EVF_SHORT		(1U << 0)	/* fewer bytes than a slot */
#define FPGA_P2P_EVF_CRC_MISMATCH	(1U << 1)	/* FPGA saw corrupt data */
#define FPGA_P2P_EVF_LINK_ERROR		(1U << 2)	/* ADC link error */
#define FPGA_P2P_EVF_TX_ERROR		(1U << 3)	/* EV_TX_DONE: not sent */

/* EV_FAULT: the reason, in fpga_p2p_event.chunk; .bytes holds a detail. */
#define FPGA_P2P_FAULT_ENGINE		1	/* DMA engine error; detail: status */
#define FPGA_P2P_FAULT_STREAM		2	/* writeback/metadata inconsistent */
#define FPGA_P2P_FAULT_DMA_TIMEOUT	3	/* engine did not stop in time */
#define FPGA_P2P_FAULT_DEVICE_GONE	4	/* device removed */

/*
 * One event. Fields by type (others are zero; slot is FPGA_P2P_NO_SLOT
 * where there is none). A frame's times: timestamp_ns is the card's clock
 * at the frame's first sample (a PTP hardware clock, /dev/ptpN, kept on
 * TAI by linuxptp); host_ns is the same instant on the host's
 * CLOCK_MONOTONIC, converted by the driver at the frame's interrupt from the
 * card's clock read then (0 when the card has no clock, or its clock was
 * stepped back past the frame since).
 *   EV_FRAME    slot (now the application's), sequence, timestamp_ns,
 *               host_ns, bytes (valid bytes), crc32, flags, dropped
 *   EV_CHUNK    slot (still the engine's: read-only), chunk, bytes (chunk
 *               size); only with FPGA_P2P_START_CHUNK_EVENTS
 *   EV_TX_DONE  slot (free again), bytes, cookie, flags (EVF_TX_ERROR if the
 *               packet was not sent)
 *   EV_REVOKED  handle: the ring's memory went away; the ring only awaits
 *               UNREGISTER
 *   EV_FAULT    chunk = FPGA_P2P_FAULT_*, bytes = detail (engine status);
 *               capture stopped (STOP or START recovers), transmit stopped
 *               (re-register)
 *   EV_OVERFLOW dropped = events lost because the queue was full
 */
struct fpga_p2p_event {
	__u32 type;			/* FPGA_P2P_EV_* */
	__u32 handle;			/* ring the event belongs to */
	__u32 slot;
	__u32 flags;			/* FPGA_P2P_EVF_* */
	__u64 sequence;			/* frame sequence number from the FPGA */
	__u64 timestamp_ns;		/* first sample, the card's clock (TAI) */
	__u32 bytes;			/* payload bytes in the slot */
	__u32 crc32;			/* CRC-32 (IEEE) of the payload, by the FPGA */
	__u32 dropped;			/* frames dropped at the source before this one */
	__u32 chunk;			/* EV_CHUNK: chunk index; EV_FAULT: FPGA_P2P_FAULT_* */
	__u64 cookie;			/* EV_TX_DONE: from fpga_p2p_tx */
	__u64 host_ns;			/* EV_FRAME: first sample, CLOCK_MONOTONIC */
};

/*
 * The frame wait of a real-time loop in one system call: release a slot the
 * application owns (if release_slot is not FPGA_P2P_NO_SLOT), then wait for
 * the next event. If the release fails, WAIT returns that error without
 * waiting. Otherwise the same errors as read(); -ETIMEDOUT after timeout_ms
 * (at most 3600000).
 */
#define FPGA_P2P_NO_SLOT		0xffffffffU

struct fpga_p2p_wait {
	__u32 release_handle;		/* ring of the slot to release first */
	__u32 release_slot;		/* slot, or FPGA_P2P_NO_SLOT */
	__u32 timeout_ms;		/* 0 = the ring's event_timeout_ms */
	__u32 reserved0;
	struct fpga_p2p_event event;	/* out: the next event */
};

/* Counters of one device since load (also in sysfs). */
struct fpga_p2p_counters {
	__u64 frames;			/* frames delivered */
	__u64 chunks;			/* chunks completed */
	__u64 drops_no_slot;		/* dropped at source: no FREE slot */
	__u64 drops_fault;		/* dropped by the FPGA for link errors */
	__u64 short_frames;
	__u64 crc_errors;
	__u64 desc_errors;		/* descriptor or engine errors */
	__u64 irqs;
	__u64 revocations;
	__u64 tx_submitted;
	__u64 tx_completed;
	__u64 event_overflows;
	__u64 dma_timeouts;
	__u64 lost_irqs;		/* completions found by the watchdog */
	__u64 quarantined;		/* rings whose memory is kept for ever */
	__u64 reserved[1];
};

#define FPGA_P2P_IOC_MAGIC		0xF2

#define FPGA_P2P_IOC_INFO		_IOR(FPGA_P2P_IOC_MAGIC, 0x00, struct fpga_p2p_info)
#define FPGA_P2P_IOC_REGISTER		_IOWR(FPGA_P2P_IOC_MAGIC, 0x01, struct fpga_p2p_ring)
#define FPGA_P2P_IOC_UNREGISTER		_IOW(FPGA_P2P_IOC_MAGIC, 0x02, __u32)
#define FPGA_P2P_IOC_START		_IOW(FPGA_P2P_IOC_MAGIC, 0x03, struct fpga_p2p_start)
#define FPGA_P2P_IOC_STOP		_IOW(FPGA_P2P_IOC_MAGIC, 0x04, __u32)
#define FPGA_P2P_IOC_RELEASE		_IOW(FPGA_P2P_IOC_MAGIC, 0x05, struct fpga_p2p_release)
#define FPGA_P2P_IOC_COUNTERS		_IOR(FPGA_P2P_IOC_MAGIC, 0x06, struct fpga_p2p_counters)
#define FPGA_P2P_IOC_TX_SUBMIT		_IOW(FPGA_P2P_IOC_MAGIC, 0x07, struct fpga_p2p_tx)
#define FPGA_P2P_IOC_WAIT		_IOWR(FPGA_P2P_IOC_MAGIC, 0x08, struct fpga_p2p_wait)

#endif /* _UAPI_FPGA_P2P_H */
