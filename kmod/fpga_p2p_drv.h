/* SPDX-License-Identifier: GPL-2.0 */
/*
 * fpga_p2p: driver-internal declarations.
 *
 * Objects: one fp_dev per card; one fp_file per open of
 * /dev/fpga-p2pN; at most one capture and one transmit fp_ring per file and
 * per device.
 *
 * Lock order (outer first); a lock may be taken while holding any lock to
 * its left, never the other way round:
 *
 *   fp_file.lock -> mmap_lock -> fp_dev.hw_lock -> fp_dev.irq_lock
 *                                               -> fp_ring.lock -> fp_file.ev_lock
 *   fp_file.lock -> fp_dev.lock -> fp_dev.hw_lock
 *   fp_file.read_lock -> mmap_lock
 *   fp_file.rings_lock is a leaf (lookups take a ring reference and drop it)
 *   fp_ptp.lock (the card's clock registers) is a leaf, taken with
 *   interrupts off: in the interrupt under irq_lock and ring.lock, and alone
 *   in the PTP clock's operations
 *
 * mmap_lock is in the chain because REGISTER calls nvidia_p2p_get_pages()
 * (which takes it) with fp_file.lock held, and the nv-p2p free callback may
 * run with mmap_lock held (munmap) and takes fp_dev.hw_lock, fp_dev.irq_lock,
 * fp_ring.lock and fp_file.ev_lock. Hence: hw_lock is never held while
 * allocating memory, touching user memory or calling into nv-p2p, and the
 * callback never takes fp_file.lock, fp_dev.lock or fp_file.read_lock.
 * The callback is also reached through the mmu notifier's invalidate path,
 * which lockdep orders after fs_reclaim; that is why nothing allocates with
 * hw_lock, irq_lock, ring.lock or ev_lock held.
 */
#ifndef FPGA_P2P_DRV_H
#define FPGA_P2P_DRV_H

#include <linux/atomic.h>
#include <linux/completion.h>
#include <linux/device.h>
#include <linux/dma-direction.h>
#include <linux/interrupt.h>
#include <linux/io.h>
#include <linux/kref.h>
#include <linux/miscdevice.h>
#include <linux/mutex.h>
#include <linux/pci.h>
#include <linux/ptp_clock_kernel.h>
#include <linux/workqueue.h>
#include <linux/sizes.h>
#include <linux/slab.h>
#include <linux/spinlock.h>
#include <linux/timer.h>
#include <linux/types.h>
#include <linux/wait.h>
#include <linux/nv-p2p.h>

#include "include/uapi/fpga_p2p.h"
#include "fpga_p2p_regs.h"

#define FP_NAME				"fpga_p2p"
#define FP_MAX_DEVICES			16

/* Limits reported by INFO. */
#define FP_MAX_SLOTS			64
#define FP_MAX_SLOT_BYTES		SZ_64M
#define FP_MAX_RING_BYTES		SZ_1G
#define FP_MAX_CHUNKS			256

/* A descriptor with the COMPLETED bit at least this often (credit top-up). */
#define FP_IRQ_EVERY			256
#define FP_STOP_TIMEOUT_MS		500
#define FP_TEARDOWN_TIMEOUT_MS		10000
#define FP_DEFAULT_EVENT_TIMEOUT_MS	1000
#define FP_MAX_EVENT_TIMEOUT_MS		3600000
#define FP_DEFAULT_CHUNK_PERIOD_NS	500000	/* 2 kHz: 16 chunks = 8 ms */

enum fp_dir {
	FP_C2H = FPGA_P2P_DIR_C2H,
	FP_H2C = FPGA_P2P_DIR_H2C,
	FP_DIRS
};

enum fp_slot_state {
	FP_SLOT_FREE,		/* host owns it, not yet given to the engine */
	FP_SLOT_ENGINE,		/* capture: credited to the engine */
	FP_SLOT_READY,		/* capture: frame delivered, application owns it */
	FP_SLOT_TX,		/* transmit: in flight */
};

enum fp_ring_state {
	FP_RING_BUILDING,	/* REGISTER under way */
	FP_RING_IDLE,		/* registered, capture stopped */
	FP_RING_RUNNING,	/* capture streaming / transmit engine running */
	FP_RING_FAULTED,	/* engine error: stopped until STOP/START */
	FP_RING_REVOKED,	/* memory gone (nv-p2p free callback) */
	FP_RING_DEAD,		/* memory released: unregistering or device gone */
};

/* How the nv-p2p free callback came to run. */
enum fp_cb_cause {
	FP_CB_NONE,
	FP_CB_PUT,		/* from our nvidia_p2p_put_pages() */
	FP_CB_INVALIDATE,	/* munmap, madvise, test revocation */
	FP_CB_EXIT,		/* the owning process's mm went away */
};

/* Why the owner releases a ring's memory. */
enum fp_release_why {
	FP_RELEASE_UNREGISTER,
	FP_RELEASE_REMOVE,
};

/* fp_desc_info.flags */
#define FP_DI_IRQ		BIT(0)	/* COMPLETED bit set */
#define FP_DI_CHUNK_END		BIT(1)
#define FP_DI_SLOT_END		BIT(2)	/* last descriptor of a frame: EOP */

/* One descriptor of the capture chain, or one piece of a transmit slot. */
struct fp_desc_info {
	dma_addr_t addr;
	u32 len;
	u16 chunk;
	u8 flags;
};

struct fp_dma_block {
	void *cpu;
	dma_addr_t dma;
};

struct fp_tx {
	u64 end;		/* ring desc_done at which it completes */
	u64 cookie;
	u32 slot;
	u32 bytes;
};

struct fp_counters {
	atomic64_t frames;
	atomic64_t chunks;
	atomic64_t short_frames;
	atomic64_t crc_errors;
	atomic64_t desc_errors;
	atomic64_t irqs;
	atomic64_t revocations;
	atomic64_t tx_submitted;
	atomic64_t tx_completed;
	atomic64_t event_overflows;
	atomic64_t dma_timeouts;
	atomic64_t lost_irqs;
	atomic64_t quarantined;
};

/* PPS times the clock's worker takes from the card per look, at most. */
#define FP_PTP_PPS_MAX			16

/* The card's clock as a PTP hardware clock (fp_ptp.c). */
struct fp_ptp {
	struct ptp_clock_info info;
	struct ptp_clock *clock;	/* NULL: the card has none */
	struct ptp_pin_desc pin;	/* PPS_IN: external time stamp 0 */
	spinlock_t lock;		/* the latch and command registers */
	bool extts_on;			/* the PPS input is enabled */
	u32 pps_lost;			/* PPS_LOST when last read (lock) */
};

struct fp_dev {
	struct kref ref;
	struct pci_dev *pdev;
	struct device *dev;		/* &pdev->dev: the DMA device */
	struct miscdevice misc;		/* /dev/fpga-p2pN */
	char name[16];
	int index;			/* N */
	void __iomem *bar[FP_BARS];
	int irq;
	struct timer_list watchdog;	/* interrupt-loss watchdog */
	u64 wd_irqs;			/* irqs at its last tick */
	unsigned long wd_period;	/* jiffies, set at each START */

	struct mutex lock;		/* files, claim[], dead, building */
	bool dead;
	struct list_head files;
	struct fp_ring *claim[FP_DIRS];
	unsigned int building;		/* REGISTERs under way */
	wait_queue_head_t build_wq;

	struct mutex hw_lock;		/* engine control sequences */
	bool hw_gone;			/* registers unusable (hw_lock) */
	bool streaming;			/* user block ENABLE set (hw_lock) */
	u64 drops_no_slot_base;		/* hw_lock */
	u64 drops_fault_base;		/* hw_lock */

	spinlock_t irq_lock;		/* active[] for the IRQ handler */
	struct fp_ring *active[FP_DIRS];

	/*
	 * Rings whose engine did not stop: their descriptors, mapping and
	 * pinned pages are kept until removal finds the engine quiet.
	 */
	spinlock_t quarantine_lock;
	struct list_head quarantine;

	struct fp_counters cnt;
	struct fp_ptp ptp;

	u32 max_slots;
	u32 hw_id;
	u32 hw_version;
	u32 hw_caps;
	u32 meta_depth;
	u32 tag_depth;
	u32 pb_frames;
	u32 pb_frame_bytes;
	u32 max_frame_bytes;
};

struct fp_file {
	struct fp_dev *fdev;
	struct list_head node;		/* fdev->files */
	struct mutex lock;		/* ring setup, teardown, start, stop */
	spinlock_t rings_lock;		/* ring[] for lookups */
	struct fp_ring *ring[FP_DIRS];
	u32 next_handle;
	u32 event_timeout_ms;

	spinlock_t ev_lock;		/* the event queue */
	struct fpga_p2p_event *ev;
	u32 ev_cap;
	u32 ev_head;
	u32 ev_count;
	u32 ev_lost;			/* dropped since the last EV_OVERFLOW */
	wait_queue_head_t wq;
	struct mutex read_lock;		/* one event consumer at a time */
};

struct fp_ring {
	struct kref ref;
	struct fp_file *fp;
	struct fp_dev *fdev;
	u32 handle;
	enum fp_dir dir;
	u32 nr_slots;
	u64 slot_bytes;
	u32 chunk_bytes;
	u32 chunks;			/* per slot */
	u64 uaddr;
	u64 bytes;
	u32 ev_need;			/* event queue entries it may use */
	bool completion;		/* capture: completion records */

	spinlock_t lock;		/* everything below that changes */
	enum fp_ring_state state;

	struct nvidia_p2p_page_table *pt;
	struct nvidia_p2p_dma_mapping *map;
	enum fp_cb_cause cb_cause;
	bool put_claimed;		/* the owner took over put_pages */
	bool teardown_claimed;
	bool quarantined;		/* engine did not stop: DMA memory kept */
	bool abandoned;			/* a teardown wait gave up: kept for ever */
	bool destroyed;			/* fp_ring_destroy() ran (quarantine_lock) */
	struct list_head qnode;		/* on fdev->quarantine while parked */
	struct completion torn_down;
	struct work_struct unmap_work;	/* unmap after a revocation */

	/*
	 * Descriptor ring: ndesc linked positions (links and, for capture,
	 * writeback addresses written once); handing a slot to the engine
	 * writes that slot's pieces into the next positions.
	 */
	u32 ndesc;
	struct fp_desc_info *info;	/* pieces of all slots, slot order */
	u32 *slot_first;		/* nr_slots + 1 indices into info */
	u32 *pos_piece;			/* capture: piece at each position */
	u32 nblocks;
	struct fp_dma_block *desc_blk;
	struct fp_dma_block *res_blk;	/* capture writeback records */
	u8 *slot_state;

	/* Credits and positions, both directions. */
	u32 head;			/* next position to write */
	u32 desc_pos;			/* next position to complete */
	u64 owed;			/* descriptors the engine may have */
	u64 written;			/* credits written to the engine */
	u64 done;			/* descriptors completed */
	u32 hw_done;			/* completed-count register last read */

	/* Capture: FREE slots in release order, engine slots in fill order. */
	u32 *free_q;
	u32 free_head;
	u32 free_count;
	u32 *eng_q;
	u32 eng_head;
	u32 eng_count;
	bool chunk_events;
	bool meta_wait;			/* end of frame seen, metadata not yet */
	unsigned long meta_wait_since;	/* jiffies */

	/* Transmit. */
	struct fp_tx *txq;
	u32 txq_head;
	u32 txq_count;
};

/**
 * fp_rd() - read a 32-bit register of the card
 * @fdev: the device
 * @bar: FP_BAR_USER or FP_BAR_XDMA
 * @off: byte offset in the BAR
 *
 * Return: the register's value; all ones when the card does not answer.
 */
static inline u32 fp_rd(struct fp_dev *fdev, int bar, u32 off)
{
	return ioread32(fdev->bar[bar] + off);
}

/**
 * fp_wr() - write a 32-bit register of the card
 * @fdev: the device
 * @bar: FP_BAR_USER or FP_BAR_XDMA
 * @off: byte offset in the BAR
 * @val: the value
 */
static inline void fp_wr(struct fp_dev *fdev, int bar, u32 off, u32 val)
{
	iowrite32(val, fdev->bar[bar] + off);
}

/**
 * fp_xrd() - read an XDMA register (BAR1)
 * @fdev: the device
 * @off: byte offset, target << 12 | channel << 8 | register
 *
 * Return: the register's value; all ones when the card does not answer.
 */
static inline u32 fp_xrd(struct fp_dev *fdev, u32 off)
{
	return fp_rd(fdev, FP_BAR_XDMA, off);
}

/**
 * fp_xwr() - write an XDMA register (BAR1)
 * @fdev: the device
 * @off: byte offset, target << 12 | channel << 8 | register
 * @val: the value
 */
static inline void fp_xwr(struct fp_dev *fdev, u32 off, u32 val)
{
	fp_wr(fdev, FP_BAR_XDMA, off, val);
}

/**
 * fp_urd() - read a user block register (BAR0)
 * @fdev: the device
 * @off: byte offset (FP_UB_*)
 *
 * Return: the register's value; all ones when the card does not answer.
 */
static inline u32 fp_urd(struct fp_dev *fdev, u32 off)
{
	return fp_rd(fdev, FP_BAR_USER, off);
}

/**
 * fp_uwr() - write a user block register (BAR0)
 * @fdev: the device
 * @off: byte offset (FP_UB_*)
 * @val: the value
 */
static inline void fp_uwr(struct fp_dev *fdev, u32 off, u32 val)
{
	fp_wr(fdev, FP_BAR_USER, off, val);
}

/**
 * fp_desc() - a descriptor of a ring, for the CPU
 * @ring: the ring
 * @i: its position, below ring->ndesc
 *
 * Return: the descriptor in the ring's coherent descriptor pages.
 */
static inline struct xdma_desc *fp_desc(struct fp_ring *ring, u32 i)
{
	u32 per = PAGE_SIZE / sizeof(struct xdma_desc);

	return (struct xdma_desc *)ring->desc_blk[i / per].cpu + i % per;
}

/**
 * fp_desc_dma() - the bus address of a descriptor of a ring
 * @ring: the ring
 * @i: its position, below ring->ndesc
 *
 * Return: the address the engine fetches it from.
 */
static inline dma_addr_t fp_desc_dma(struct fp_ring *ring, u32 i)
{
	u32 per = PAGE_SIZE / sizeof(struct xdma_desc);

	return ring->desc_blk[i / per].dma + (i % per) * sizeof(struct xdma_desc);
}

/**
 * fp_result() - the writeback record of a capture descriptor, for the CPU
 * @ring: a capture ring
 * @i: the descriptor's position, below ring->ndesc
 *
 * Return: the record in the ring's coherent writeback pages.
 */
static inline struct xdma_c2h_result *fp_result(struct fp_ring *ring, u32 i)
{
	u32 per = PAGE_SIZE / sizeof(struct xdma_c2h_result);

	return (struct xdma_c2h_result *)ring->res_blk[i / per].cpu + i % per;
}

/**
 * fp_result_dma() - the bus address of a capture descriptor's writeback record
 * @ring: a capture ring
 * @i: the descriptor's position, below ring->ndesc
 *
 * Return: the address the engine writes the record to.
 */
static inline dma_addr_t fp_result_dma(struct fp_ring *ring, u32 i)
{
	u32 per = PAGE_SIZE / sizeof(struct xdma_c2h_result);

	return ring->res_blk[i / per].dma +
	       (i % per) * sizeof(struct xdma_c2h_result);
}

/*
 * The layers, bottom first; each file calls only into those below it:
 * fp_event.c (events, wake-ups), fp_ptp.c (the card's clock as a PTP
 * hardware clock), fp_engine.c (the XDMA engine, syncs,
 * counters), fp_ring.c (registration through nv-p2p, descriptors,
 * revocation), fp_fops.c (the character device), fp_main.c (probe, device
 * lifetime, module init).
 */

/**
 * fp_card_gone() - whether the card was surprise-removed
 * @fdev: the device
 *
 * What pci_dev_is_disconnected() says; 5.15, the Jetson's kernel, keeps
 * that in the PCI core's private header.
 *
 * Return: true when the PCI core has given the card up for good.
 */
static inline bool fp_card_gone(struct fp_dev *fdev)
{
	return READ_ONCE(fdev->pdev->error_state) == pci_channel_io_perm_failure;
}

/**
 * fp_ring_dma_dir() - the DMA direction of a ring's memory
 * @ring: the ring
 *
 * Return: DMA_FROM_DEVICE for capture, DMA_TO_DEVICE for transmit.
 */
static inline enum dma_data_direction fp_ring_dma_dir(struct fp_ring *ring)
{
	return ring->dir == FP_C2H ? DMA_FROM_DEVICE : DMA_TO_DEVICE;
}

/**
 * fp_dev_release() - free a device whose last reference went
 * @ref: the device's kref
 *
 * The device outlives its removal while files are open; the last close
 * (or the removal, with none open) frees it.
 */
static inline void fp_dev_release(struct kref *ref)
{
	struct fp_dev *fdev = container_of(ref, struct fp_dev, ref);

	pci_dev_put(fdev->pdev);
	kfree(fdev);
}

/**
 * fp_dev_put() - drop a reference on a device
 * @fdev: the device
 */
static inline void fp_dev_put(struct fp_dev *fdev)
{
	kref_put(&fdev->ref, fp_dev_release);
}

/* fp_event.c */
void fp_event_push(struct fp_file *fp, const struct fpga_p2p_event *ev);
void fp_file_wake(struct fp_file *fp);
void fp_events_purge(struct fp_file *fp, u32 handle);
int fp_evq_reserve(struct fp_file *fp, u32 need);

/* fp_ptp.c */
void fp_ptp_register(struct fp_dev *fdev);
void fp_ptp_unregister(struct fp_dev *fdev);
u64 fp_ptp_host_ns(struct fp_dev *fdev, u64 card_ns);

/* fp_engine.c */
void fp_watchdog_init(struct fp_dev *fdev);
int fp_hw_init(struct fp_dev *fdev);
int fp_hw_shutdown(struct fp_dev *fdev);
irqreturn_t fp_irq(int irq, void *data);
int fp_c2h_start(struct fp_ring *ring, const struct fpga_p2p_start *s);
int fp_c2h_stop(struct fp_ring *ring);
int fp_h2c_start(struct fp_ring *ring);
int fp_engine_stop(struct fp_ring *ring);
int fp_release_slot(struct fp_ring *ring, u32 slot);
int fp_tx_submit(struct fp_ring *ring, const struct fpga_p2p_tx *tx);
void fp_counters_read(struct fp_dev *fdev, struct fpga_p2p_counters *c);

/* fp_ring.c */
int fp_ring_register(struct fp_file *fp, struct fpga_p2p_ring *r);
int fp_ring_unregister(struct fp_file *fp, u32 handle);
void fp_ring_destroy(struct fp_ring *ring);
void fp_ring_release_memory(struct fp_ring *ring, enum fp_release_why why);
struct fp_ring *fp_ring_get(struct fp_file *fp, u32 handle);
void fp_ring_put(struct fp_ring *ring);
void fp_ring_free_buried(void);
int fp_ring_init(void);
void fp_ring_exit(void);
void fp_ring_abandon(struct fp_ring *ring, const char *what);
void fp_ring_reap_quarantine(struct fp_dev *fdev, bool engine_quiet);

/* fp_fops.c */
extern const struct file_operations fp_fops;

#endif /* FPGA_P2P_DRV_H */
