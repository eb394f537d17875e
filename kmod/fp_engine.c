// SPDX-License-Identifier: GPL-2.0
/*
 * fpga_p2p: the XDMA channels and the user block at run time.
 *
 * Both channels run a circular ring of linked descriptors in descriptor
 * credit mode: the engine fetches and consumes only descriptors it holds
 * credits for, in ring order. The links (and the capture writeback
 * addresses) are written once at REGISTER. Handing a slot to the engine
 * writes that slot's precomputed pieces (bus address, length, interrupt
 * bit) into the next ring positions, which the engine cannot have fetched
 * yet, and then grants their credits. Credits are consumed in ring order,
 * but any slot can go into the ring next: FREE capture slots are handed
 * over in the order the application released them, so a slot held for a
 * long time does not hold up the others.
 *
 * Capture: the engine owns only descriptors of slots handed over (FREE ->
 * ENGINE), so it never writes a slot the application owns (READY). Beside
 * that, the user block gets one frame credit per slot handed over and decides
 * at each frame start whether the whole frame can be delivered (credit
 * taken) or is dropped at the source (counted, reported with the next
 * delivered frame): a frame is never torn or overwritten.
 *
 * Transmit: TX_SUBMIT writes the slot's pieces up to the packet length; the
 * packet's destination goes into the user block's tag FIFO before its
 * credits are granted.
 *
 * The interrupt handler runs in hard IRQ context only: spinlocks, register
 * accesses, the preallocated event queue; no sleeping, no allocation.
 *
 * An interrupt can be lost (an MSI-X write that never arrives): while a
 * channel runs, a watchdog timer that sees no interrupt for a few frame
 * periods runs the completion path itself (it reads the completed-descriptor
 * count) and counts what it found in lost_irqs.
 *
 * A register read of all ones means the card did not answer (a completion
 * timeout, a link down, or a card gone). Unless the PCI core says the device
 * is disconnected, the engine may still be running: that is a fault the
 * owner is told about, and the ring's memory is never freed on its account
 * (fp_engine_stop() fails, so the ring is quarantined).
 */
#include <linux/bitfield.h>
#include <linux/delay.h>
#include <linux/dma-mapping.h>
#include <linux/jiffies.h>
#include <linux/pci.h>

#include "fpga_p2p_drv.h"

/* The watchdog looks this often at least (and at most every 4 frames). */
#define FP_WATCHDOG_MIN_MS	20
#define FP_WATCHDOG_MAX_MS	1000
/* An empty metadata FIFO at end of frame becomes a fault after this. */
#define FP_META_WAIT_MS		200

/* The errno of a call on a ring in @state: 0 while it is usable. */
static int fp_ring_errno(enum fp_ring_state state)
{
	switch (state) {
	case FP_RING_IDLE:
	case FP_RING_RUNNING:
		return 0;
	case FP_RING_BUILDING:
		return -ENOENT;
	case FP_RING_FAULTED:
	case FP_RING_REVOKED:
		return -EIO;
	default:
		return -ENODEV;
	}
}

/*
 * Ownership hand-over of the ring's memory between the engine and the CPU.
 * The memory is one scatter-gather mapping, so it is synced as one, over the
 * mapping's own scatterlist with the entry count it was mapped with: a
 * dma_sync_single_*() on a piece of it is not defined by the DMA API (an
 * IOMMU merges segments; swiotlb bounces per segment), and the API has no
 * partial sync of an SG mapping. Where the device is DMA-coherent behind an
 * IOMMU (AGX Orin) this returns at once; elsewhere it costs a walk of the
 * list (and with bounce buffering a copy of the whole ring), so the
 * completion path syncs once per pass over the completed descriptors, not
 * once per chunk.
 */
static void fp_sync(struct fp_ring *ring, bool for_cpu)
{
	struct sg_table *sgt = ring->map->sgt;

	if (for_cpu)
		dma_sync_sg_for_cpu(ring->fdev->dev, sgt->sgl, sgt->orig_nents,
				    fp_ring_dma_dir(ring));
	else
		dma_sync_sg_for_device(ring->fdev->dev, sgt->sgl,
				       sgt->orig_nents, fp_ring_dma_dir(ring));
}

/**
 * fp_counters_read() - read the device's counters
 * @fdev: the device
 * @c: filled in; reserved fields zero
 *
 * The drop counters are the FPGA's, per stream: the totals of the streams
 * that ended plus the running stream's registers.
 *
 * Context: process, may sleep (takes fdev->hw_lock).
 */
void fp_counters_read(struct fp_dev *fdev, struct fpga_p2p_counters *c)
{
	struct fp_counters *k = &fdev->cnt;

	memset(c, 0, sizeof(*c));
	c->frames = atomic64_read(&k->frames);
	c->chunks = atomic64_read(&k->chunks);
	c->short_frames = atomic64_read(&k->short_frames);
	c->crc_errors = atomic64_read(&k->crc_errors);
	c->desc_errors = atomic64_read(&k->desc_errors);
	c->irqs = atomic64_read(&k->irqs);
	c->revocations = atomic64_read(&k->revocations);
	c->tx_submitted = atomic64_read(&k->tx_submitted);
	c->tx_completed = atomic64_read(&k->tx_completed);
	c->event_overflows = atomic64_read(&k->event_overflows);
	c->dma_timeouts = atomic64_read(&k->dma_timeouts);
	c->lost_irqs = atomic64_read(&k->lost_irqs);
	c->quarantined = atomic64_read(&k->quarantined);

	/* Drops are counted by the FPGA, per stream: add the running one. */
	mutex_lock(&fdev->hw_lock);
	c->drops_no_slot = fdev->drops_no_slot_base;
	c->drops_fault = fdev->drops_fault_base;
	if (fdev->streaming && !fdev->hw_gone) {
		c->drops_no_slot += fp_urd(fdev, FP_UB_DROPS_NO_SLOT);
		c->drops_fault += fp_urd(fdev, FP_UB_DROPS_FAULT);
	}
	mutex_unlock(&fdev->hw_lock);
}

/* Channel interrupt sources the driver enables. */
#define FP_CH_IRQS	(XDMA_ST_DESC_COMPLETED | XDMA_ST_DESC_STOPPED | \
			 XDMA_ST_ERRORS)

static u32 fp_chan(enum fp_dir dir)
{
	return dir == FP_C2H ? XDMA_TGT_C2H : XDMA_TGT_H2C;
}

static u32 fp_chan_sg(enum fp_dir dir)
{
	return dir == FP_C2H ? XDMA_TGT_C2H_SGDMA : XDMA_TGT_H2C_SGDMA;
}

static u32 fp_chan_irq(enum fp_dir dir)
{
	return dir == FP_C2H ? FP_IRQ_C2H0 : FP_IRQ_H2C0;
}

static bool fp_id_ok(u32 id, u32 target, bool stream)
{
	return FIELD_GET(XDMA_ID_SUBSYS, id) == XDMA_ID_SUBSYS_VALUE &&
	       FIELD_GET(XDMA_ID_TARGET, id) == target &&
	       FIELD_GET(XDMA_ID_CHANNEL, id) == 0 &&
	       (!stream || (id & XDMA_ID_STREAM));
}

/*
 * Clear Run and wait (bounded) until the channel is no longer busy, i.e.
 * until it will not touch host memory any more. hw_lock held.
 */
static int fp_chan_stop(struct fp_dev *fdev, enum fp_dir dir)
{
	unsigned long deadline = jiffies + msecs_to_jiffies(FP_STOP_TIMEOUT_MS);
	u32 ch = fp_chan(dir);
	u32 st;

	fp_xwr(fdev, ch + XDMA_CH_CONTROL, 0);
	for (;;) {
		st = fp_xrd(fdev, ch + XDMA_CH_STATUS);
		if (st == ~0U) {
			/* Gone for sure: it masters nothing any more. */
			if (fp_card_gone(fdev))
				return 0;
			dev_err(fdev->dev, "%s channel status reads all ones: the card does not answer\n",
				dir == FP_C2H ? "C2H" : "H2C");
			return -EIO;
		}
		if (!(st & XDMA_ST_BUSY))
			break;
		if (time_after(jiffies, deadline)) {
			atomic64_inc(&fdev->cnt.dma_timeouts);
			dev_err(fdev->dev, "%s channel did not stop (status 0x%08x)\n",
				dir == FP_C2H ? "C2H" : "H2C", st);
			return -ETIMEDOUT;
		}
		usleep_range(50, 200);
	}
	fp_xrd(fdev, ch + XDMA_CH_STATUS_RC);
	return 0;
}

/* The source stopped: fold its drop counters into the totals. hw_lock held. */
static void fp_stream_off(struct fp_dev *fdev)
{
	fp_uwr(fdev, FP_UB_CTRL, 0);
	if (!fdev->streaming)
		return;
	fdev->drops_no_slot_base += fp_urd(fdev, FP_UB_DROPS_NO_SLOT);
	fdev->drops_fault_base += fp_urd(fdev, FP_UB_DROPS_FAULT);
	fdev->streaming = false;
}

/*
 * Source off, both channels stopped, their interrupts off. Returns 0 when
 * both channels were seen idle. hw_lock held.
 */
static int fp_quiesce(struct fp_dev *fdev)
{
	int c2h, h2c;

	fp_stream_off(fdev);
	c2h = fp_chan_stop(fdev, FP_C2H);
	h2c = fp_chan_stop(fdev, FP_H2C);
	fp_xwr(fdev, FP_IRQ(XDMA_IRQ_CHAN_EN_W1C), FP_IRQ_H2C0 | FP_IRQ_C2H0);
	return c2h ? c2h : h2c;
}

/**
 * fp_hw_init() - check a card, read its limits and quiesce it
 * @fdev: the device, its BARs mapped, bus mastering still off
 *
 * Checks the user block's ID and major version and the identifiers of the
 * XDMA blocks, reads the capabilities, FIFO depths and playback limits
 * (and so the slots a ring may have), then stops the source and both
 * channels: an engine that a previous driver or boot left running must be
 * seen idle before the caller lets the card master the bus. Routes every
 * channel interrupt to vector 0 and turns descriptor credit mode on.
 *
 * Context: process, may sleep (takes fdev->hw_lock).
 * Return: 0; -ENODEV when the card is not ours (ID, version, XDMA
 * identifiers) or its FIFOs are too small; -EIO when the DMA engine does
 * not stop.
 */
int fp_hw_init(struct fp_dev *fdev)
{
	static const struct {
		u32 off;
		u32 target;
		bool stream;
	} ids[] = {
		{ XDMA_TGT_H2C, 0, true },
		{ XDMA_TGT_C2H, 1, true },
		{ XDMA_TGT_IRQ, 2, false },
		{ XDMA_TGT_CONFIG, 3, false },
		{ XDMA_TGT_H2C_SGDMA, 4, false },
		{ XDMA_TGT_C2H_SGDMA, 5, false },
		{ XDMA_TGT_SGDMA_COMMON, 6, false },
	};
	unsigned int i;
	int ret;
	u32 v;

	v = fp_urd(fdev, FP_UB_ID);
	if (v != FP_UB_ID_VALUE) {
		dev_err(fdev->dev, "user block ID 0x%08x is not ours\n", v);
		return -ENODEV;
	}
	fdev->hw_id = v;
	fdev->hw_version = fp_urd(fdev, FP_UB_VERSION);
	if (fdev->hw_version >> 16 != FP_UB_VERSION_VALUE >> 16) {
		dev_err(fdev->dev, "user block version 0x%08x not supported\n",
			fdev->hw_version);
		return -ENODEV;
	}
	for (i = 0; i < ARRAY_SIZE(ids); i++) {
		v = fp_xrd(fdev, ids[i].off + XDMA_CH_ID);
		if (!fp_id_ok(v, ids[i].target, ids[i].stream)) {
			dev_err(fdev->dev, "XDMA block 0x%04x: identifier 0x%08x\n",
				ids[i].off, v);
			return -ENODEV;
		}
	}
	fdev->hw_caps = fp_urd(fdev, FP_UB_CAPS);
	fdev->meta_depth = fp_urd(fdev, FP_UB_META_DEPTH);
	fdev->tag_depth = fp_urd(fdev, FP_UB_TAG_DEPTH);
	fdev->pb_frames = fp_urd(fdev, FP_UB_PLAYBACK_FRAMES);
	fdev->pb_frame_bytes = fp_urd(fdev, FP_UB_PLAYBACK_FRAME_BYTES);
	fdev->max_frame_bytes = fp_urd(fdev, FP_UB_MAX_FRAME_BYTES);
	/* Every slot's frame needs a metadata entry, every tx a tag. */
	fdev->max_slots = min3((u32)FP_MAX_SLOTS, fdev->meta_depth,
			       fdev->tag_depth);
	if (fdev->max_slots < 2 || !fdev->max_frame_bytes) {
		dev_err(fdev->dev, "FIFO depths %u/%u too small\n",
			fdev->meta_depth, fdev->tag_depth);
		return -ENODEV;
	}

	/*
	 * Bus mastering is still off: an engine that a previous driver or
	 * boot left running must be seen idle before probe turns it on, or it
	 * would write to addresses nobody maps any more.
	 */
	mutex_lock(&fdev->hw_lock);
	ret = fp_quiesce(fdev);
	mutex_unlock(&fdev->hw_lock);
	if (ret) {
		dev_err(fdev->dev, "the DMA engine does not stop: not enabling it\n");
		return -EIO;
	}
	fp_xwr(fdev, FP_IRQ(XDMA_IRQ_USER_EN), 0);
	fp_xwr(fdev, FP_IRQ(XDMA_IRQ_CHAN_VEC(0)), 0);	/* all on vector 0 */
	fp_xwr(fdev, FP_SGC(XDMA_SGC_CREDIT_MODE_W1S),
	       XDMA_SGC_CREDIT_H2C(0) | XDMA_SGC_CREDIT_C2H(0));
	return 0;
}

/**
 * fp_hw_shutdown() - quiesce the card for good
 * @fdev: the device
 *
 * Stops the source and both channels and masks their interrupts, then
 * marks the registers unusable (hw_gone: nothing touches them again) and
 * stops the interrupt-loss watchdog. Used at removal, at system shutdown
 * and when probe fails after fp_hw_init().
 *
 * Context: process, may sleep (takes fdev->hw_lock).
 * Return: 0 when both channels were seen idle (or an earlier call did
 * this already); -ETIMEDOUT when a channel did not stop in time, -EIO when
 * its status read all ones while the card is not known to be gone: the
 * engine may still write to memory.
 */
int fp_hw_shutdown(struct fp_dev *fdev)
{
	int ret = 0;

	mutex_lock(&fdev->hw_lock);
	if (!fdev->hw_gone) {
		ret = fp_quiesce(fdev);
		WRITE_ONCE(fdev->hw_gone, true);
	}
	mutex_unlock(&fdev->hw_lock);
	/* It re-arms only while !hw_gone. */
	del_timer_sync(&fdev->watchdog);
	return ret;
}

static void fp_attach(struct fp_ring *ring)
{
	struct fp_dev *fdev = ring->fdev;
	unsigned long flags;

	spin_lock_irqsave(&fdev->irq_lock, flags);
	fdev->active[ring->dir] = ring;
	spin_unlock_irqrestore(&fdev->irq_lock, flags);
}

/*
 * Point the ring's channel at its first descriptor, unmask its interrupts,
 * make the ring the channel's active one and set Run. hw_lock held.
 */
static void fp_chan_run(struct fp_ring *ring, dma_addr_t first)
{
	struct fp_dev *fdev = ring->fdev;
	u32 sg = fp_chan_sg(ring->dir);
	u32 ch = fp_chan(ring->dir);

	fp_xwr(fdev, sg + XDMA_SG_DESC_LO, lower_32_bits(first));
	fp_xwr(fdev, sg + XDMA_SG_DESC_HI, upper_32_bits(first));
	fp_xwr(fdev, sg + XDMA_SG_DESC_ADJ, 0);
	fp_xwr(fdev, ch + XDMA_CH_INT_MASK, FP_CH_IRQS);
	fp_xwr(fdev, FP_IRQ(XDMA_IRQ_CHAN_EN_W1S), fp_chan_irq(ring->dir));
	fp_attach(ring);
	/* Descriptors and writeback records in place before Run. */
	dma_wmb();
	fp_xwr(fdev, ch + XDMA_CH_CONTROL, XDMA_CTRL_RUN | FP_CH_IRQS);
	if (!timer_pending(&fdev->watchdog))
		mod_timer(&fdev->watchdog, jiffies + fdev->wd_period);
}

static void fp_detach(struct fp_ring *ring)
{
	struct fp_dev *fdev = ring->fdev;
	unsigned long flags;

	spin_lock_irqsave(&fdev->irq_lock, flags);
	if (fdev->active[ring->dir] == ring)
		fdev->active[ring->dir] = NULL;
	spin_unlock_irqrestore(&fdev->irq_lock, flags);
}

/*
 * Stop the ring's channel and wait until it no longer touches memory. After
 * this, the interrupt handler no longer sees the ring. The ring's state must
 * already forbid new credits (not RUNNING).
 */
static int fp_engine_stop_locked(struct fp_ring *ring)
{
	struct fp_dev *fdev = ring->fdev;
	int ret;

	fp_detach(ring);
	if (fdev->hw_gone)
		return 0;
	if (ring->dir == FP_C2H)
		fp_stream_off(fdev);
	ret = fp_chan_stop(fdev, ring->dir);
	fp_xwr(fdev, FP_IRQ(XDMA_IRQ_CHAN_EN_W1C), fp_chan_irq(ring->dir));
	return ret;
}

/**
 * fp_engine_stop() - stop a ring's channel and wait until it is idle
 * @ring: the ring; its state must already forbid new credits (not RUNNING)
 *
 * Detaches the ring from the interrupt handler, turns the source off (a
 * capture ring), clears Run and waits at most FP_STOP_TIMEOUT_MS until the
 * channel no longer touches memory.
 *
 * Context: process, may sleep (takes fdev->hw_lock).
 * Return: 0 when the channel is idle or the card is gone; -ETIMEDOUT when
 * it did not stop in time (counted in dma_timeouts), -EIO when its status
 * read all ones while the card is not known to be gone. On either error
 * the engine may still use the ring's memory.
 */
int fp_engine_stop(struct fp_ring *ring)
{
	struct fp_dev *fdev = ring->fdev;
	int ret;

	mutex_lock(&fdev->hw_lock);
	ret = fp_engine_stop_locked(ring);
	mutex_unlock(&fdev->hw_lock);
	return ret;
}

/* Grant credits up to what the engine may own, at most 1023 outstanding. */
static void fp_topup(struct fp_ring *ring)
{
	u64 inflight = ring->written - ring->done;
	u64 want = ring->owed - ring->written;
	u32 add;

	if (!want || inflight >= XDMA_SG_CREDITS_MAX)
		return;
	add = min_t(u64, want, XDMA_SG_CREDITS_MAX - inflight);
	/* Descriptors written before the engine may fetch them. */
	dma_wmb();
	fp_xwr(ring->fdev, fp_chan_sg(ring->dir) + XDMA_SG_CREDITS, add);
	ring->written += add;
}

/* Write @count pieces from info[@first] into the next ring positions. */
static void fp_ring_fill(struct fp_ring *ring, u32 first, u32 count,
			 u32 bytes)
{
	u32 p, k = 0;

	for (p = first; p < first + count; p++) {
		struct fp_desc_info *di = &ring->info[p];
		struct xdma_desc *d = fp_desc(ring, ring->head);
		u32 len = min(di->len, bytes);
		u32 ctl;

		bytes -= len;
		k++;
		if (ring->dir == FP_C2H) {
			/* An interrupt per frame, per chunk for chunk events. */
			ctl = di->flags & FP_DI_IRQ ||
			      (ring->chunk_events && di->flags & FP_DI_CHUNK_END) ?
			      XDMA_DESC_COMPLETED : 0;
			d->dst_lo = cpu_to_le32(lower_32_bits(di->addr));
			d->dst_hi = cpu_to_le32(upper_32_bits(di->addr));
			ring->pos_piece[ring->head] = p;
		} else {
			if (!bytes)
				ctl = XDMA_DESC_EOP | XDMA_DESC_COMPLETED;
			else
				ctl = k % FP_IRQ_EVERY ? 0 : XDMA_DESC_COMPLETED;
			d->src_lo = cpu_to_le32(lower_32_bits(di->addr));
			d->src_hi = cpu_to_le32(upper_32_bits(di->addr));
		}
		d->bytes = cpu_to_le32(len);
		d->control = cpu_to_le32(XDMA_DESC_CONTROL(ctl));
		ring->head = ring->head + 1 == ring->ndesc ? 0 : ring->head + 1;
	}
	ring->owed += count;
}

/* Hand FREE slots to the engine, in release order. ring->lock held, RUNNING. */
static void fp_c2h_credit(struct fp_ring *ring)
{
	u32 frames = 0;
	u32 s, n;

	while (ring->free_count) {
		s = ring->free_q[ring->free_head];
		ring->free_head = (ring->free_head + 1) % ring->nr_slots;
		ring->free_count--;
		n = ring->slot_first[s + 1] - ring->slot_first[s];
		fp_ring_fill(ring, ring->slot_first[s], n, U32_MAX);
		ring->slot_state[s] = FP_SLOT_ENGINE;
		ring->eng_q[(ring->eng_head + ring->eng_count) % ring->nr_slots] = s;
		ring->eng_count++;
		frames++;
	}
	/* Descriptor credits first: the source starts a frame on its credit. */
	fp_topup(ring);
	if (frames)
		fp_uwr(ring->fdev, FP_UB_FRAME_CREDIT_ADD, frames);
}

/*
 * Engine or stream error on the ring's channel (code, detail: the cause):
 * stop the channel, mark the ring faulted and tell its owner.
 * irq_lock and ring->lock held.
 */
static void fp_ring_fault(struct fp_ring *ring, u32 code, u32 detail)
{
	struct fp_dev *fdev = ring->fdev;
	struct fpga_p2p_event ev = {
		.type = FPGA_P2P_EV_FAULT,
		.handle = ring->handle,
		.slot = FPGA_P2P_NO_SLOT,
		.chunk = code,
		.bytes = detail,
	};

	fp_xwr(fdev, fp_chan(ring->dir) + XDMA_CH_CONTROL, 0);
	fdev->active[ring->dir] = NULL;
	atomic64_inc(&fdev->cnt.desc_errors);
	dev_err_ratelimited(fdev->dev, "%s fault %u (0x%08x)\n",
			    ring->dir == FP_C2H ? "capture" : "transmit",
			    code, detail);
	/* The event first: a reader that sees FAULTED finds it queued. */
	fp_event_push(ring->fp, &ev);
	smp_wmb();	/* pairs with smp_rmb() in fp_events_get() */
	WRITE_ONCE(ring->state, FP_RING_FAULTED);
}

/* Capture error: the source stops first. irq_lock and ring->lock held. */
static void fp_c2h_fault(struct fp_ring *ring, u32 code, u32 detail)
{
	fp_uwr(ring->fdev, FP_UB_CTRL, 0);
	fp_ring_fault(ring, code, detail);
}

/* The frame in the oldest engine slot is complete: hand it over. */
static bool fp_c2h_frame(struct fp_ring *ring)
{
	struct fp_dev *fdev = ring->fdev;
	u32 slot = ring->eng_q[ring->eng_head];
	struct fpga_p2p_event ev = {
		.type = FPGA_P2P_EV_FRAME,
		.handle = ring->handle,
		.slot = slot,
	};

	if (!ring->eng_count || ring->slot_state[slot] != FP_SLOT_ENGINE) {
		fp_c2h_fault(ring, FPGA_P2P_FAULT_STREAM, slot);
		return false;
	}
	ev.sequence = fp_urd(fdev, FP_UB_META_SEQ_LO);
	ev.sequence |= (u64)fp_urd(fdev, FP_UB_META_SEQ_HI) << 32;
	ev.timestamp_ns = fp_urd(fdev, FP_UB_META_TS_LO);
	ev.timestamp_ns |= (u64)fp_urd(fdev, FP_UB_META_TS_HI) << 32;
	ev.host_ns = fp_ptp_host_ns(fdev, ev.timestamp_ns);
	ev.bytes = fp_urd(fdev, FP_UB_META_BYTES);
	ev.crc32 = fp_urd(fdev, FP_UB_META_CRC);
	ev.flags = fp_urd(fdev, FP_UB_META_FLAGS);
	ev.dropped = fp_urd(fdev, FP_UB_META_DROPPED);
	fp_uwr(fdev, FP_UB_META_POP, 1);
	if (ev.bytes > ring->slot_bytes || (ev.flags & ~FP_META_FLAGS_MASK)) {
		fp_c2h_fault(ring, FPGA_P2P_FAULT_STREAM, slot);
		return false;
	}

	ring->slot_state[slot] = FP_SLOT_READY;
	ring->eng_head = (ring->eng_head + 1) % ring->nr_slots;
	ring->eng_count--;
	atomic64_inc(&fdev->cnt.frames);
	if (ev.flags & FP_META_SHORT)
		atomic64_inc(&fdev->cnt.short_frames);
	if (ev.flags & FP_META_CRC_MISMATCH)
		atomic64_inc(&fdev->cnt.crc_errors);
	fp_event_push(ring->fp, &ev);
	return true;
}

/* Consume completed descriptors. irq_lock and ring->lock held, RUNNING. */
static void fp_c2h_complete(struct fp_ring *ring, u32 status)
{
	struct fp_dev *fdev = ring->fdev;
	u32 hw = fp_xrd(fdev, FP_C2H(XDMA_CH_COMPLETED));
	u32 n = hw - ring->hw_done;

	/* The count register first, then the writeback records it covers. */
	dma_rmb();
	if (n > ring->written - ring->done) {
		fp_c2h_fault(ring, FPGA_P2P_FAULT_STREAM, hw);
		return;
	}
	/*
	 * Every descriptor the loop below consumes is complete by now: one
	 * sync hands all of their chunks to the CPU. A sync is over the whole
	 * mapping (see fp_sync), so one per chunk would cost a walk (with
	 * bounce buffering a copy) of the whole ring per chunk.
	 */
	if (n)
		fp_sync(ring, true);
	while (n--) {
		u32 i = ring->desc_pos;
		u32 p = ring->pos_piece[i];
		struct fp_desc_info *di = &ring->info[p];
		struct xdma_c2h_result *res = fp_result(ring, i);
		u32 st = le32_to_cpu(READ_ONCE(res->status));
		u32 len = le32_to_cpu(READ_ONCE(res->length));
		bool eop = di->flags & FP_DI_SLOT_END;
		u32 slot = ring->eng_q[ring->eng_head];

		if (st >> XDMA_RESULT_MAGIC_SHIFT != XDMA_RESULT_MAGIC ||
		    len != di->len || !!(st & XDMA_RESULT_EOP) != eop ||
		    !ring->eng_count || p < ring->slot_first[slot] ||
		    p >= ring->slot_first[slot + 1]) {
			fp_c2h_fault(ring, FPGA_P2P_FAULT_STREAM, i);
			return;
		}
		/*
		 * The frame's metadata should be queued before its last
		 * descriptor completes; if it is not there yet, leave the
		 * descriptor for the next interrupt (or the watchdog), and
		 * fault only when it never comes.
		 */
		if (eop && !fp_urd(fdev, FP_UB_META_LEVEL)) {
			if (!ring->meta_wait) {
				ring->meta_wait = true;
				ring->meta_wait_since = jiffies;
			} else if (time_after(jiffies, ring->meta_wait_since +
					      msecs_to_jiffies(FP_META_WAIT_MS))) {
				fp_c2h_fault(ring, FPGA_P2P_FAULT_STREAM, slot);
				return;
			}
			break;
		}
		ring->meta_wait = false;
		WRITE_ONCE(res->status, 0);
		ring->done++;
		ring->hw_done++;
		ring->desc_pos = i + 1 == ring->ndesc ? 0 : i + 1;
		if (di->flags & FP_DI_CHUNK_END) {
			/* Synced above: the chunk is the CPU's to read. */
			atomic64_inc(&fdev->cnt.chunks);
			if (ring->chunk_events) {
				struct fpga_p2p_event ev = {
					.type = FPGA_P2P_EV_CHUNK,
					.handle = ring->handle,
					.slot = slot,
					.chunk = di->chunk,
					.bytes = ring->chunk_bytes,
				};

				fp_event_push(ring->fp, &ev);
			}
		}
		if (eop && !fp_c2h_frame(ring))
			return;
	}
	if (status & XDMA_ST_ERRORS) {
		fp_c2h_fault(ring, FPGA_P2P_FAULT_ENGINE, status);
		return;
	}
	fp_topup(ring);
}

static void fp_tx_done(struct fp_ring *ring, struct fp_tx *tx, u32 flags)
{
	struct fpga_p2p_event ev = {
		.type = FPGA_P2P_EV_TX_DONE,
		.handle = ring->handle,
		.slot = tx->slot,
		.flags = flags,
		.bytes = tx->bytes,
		.cookie = tx->cookie,
	};

	fp_sync(ring, true);
	ring->slot_state[tx->slot] = FP_SLOT_FREE;
	if (!flags)
		atomic64_inc(&ring->fdev->cnt.tx_completed);
	fp_event_push(ring->fp, &ev);
}

/* Transmit error: stop, fail what is in flight. irq_lock, ring->lock held. */
static void fp_h2c_fault(struct fp_ring *ring, u32 code, u32 detail)
{
	fp_ring_fault(ring, code, detail);
	while (ring->txq_count) {
		fp_tx_done(ring, &ring->txq[ring->txq_head],
			   FPGA_P2P_EVF_TX_ERROR);
		ring->txq_head = (ring->txq_head + 1) % ring->nr_slots;
		ring->txq_count--;
	}
}

static void fp_h2c_complete(struct fp_ring *ring, u32 status)
{
	struct fp_dev *fdev = ring->fdev;
	u32 hw = fp_xrd(fdev, FP_H2C(XDMA_CH_COMPLETED));
	u32 n = hw - ring->hw_done;

	if (n > ring->written - ring->done) {
		fp_h2c_fault(ring, FPGA_P2P_FAULT_STREAM, hw);
		return;
	}
	ring->done += n;
	ring->hw_done = hw;
	while (ring->txq_count && ring->txq[ring->txq_head].end <= ring->done) {
		fp_tx_done(ring, &ring->txq[ring->txq_head], 0);
		ring->txq_head = (ring->txq_head + 1) % ring->nr_slots;
		ring->txq_count--;
	}
	if (status & XDMA_ST_ERRORS) {
		fp_h2c_fault(ring, FPGA_P2P_FAULT_ENGINE, status);
		return;
	}
	fp_topup(ring);
}

/* Run a channel's completion path. irq_lock held. */
static void fp_service(struct fp_dev *fdev, enum fp_dir dir)
{
	u32 status = fp_xrd(fdev, fp_chan(dir) + XDMA_CH_STATUS_RC);
	struct fp_ring *ring = fdev->active[dir];

	if (!ring)
		return;
	spin_lock(&ring->lock);
	if (ring->state == FP_RING_RUNNING) {
		if (dir == FP_C2H)
			fp_c2h_complete(ring, status);
		else
			fp_h2c_complete(ring, status);
	}
	spin_unlock(&ring->lock);
}

/*
 * The card answers all ones and is not known to be gone: every running ring
 * faults (its owner is told); the engine may still run, so nothing is freed
 * on this account. irq_lock held.
 */
static void fp_not_answering(struct fp_dev *fdev)
{
	int d;

	for (d = 0; d < FP_DIRS; d++) {
		struct fp_ring *ring = fdev->active[d];

		if (!ring)
			continue;
		spin_lock(&ring->lock);
		if (ring->state == FP_RING_RUNNING)
			fp_ring_fault(ring, FPGA_P2P_FAULT_ENGINE, ~0U);
		spin_unlock(&ring->lock);
	}
}

/* Service the channels that request an interrupt. irq_lock held. */
static bool fp_service_requests(struct fp_dev *fdev)
{
	bool handled = false;
	int round;
	u32 req;

	/* Re-read the request: a channel may have raised it meanwhile. */
	for (round = 0; round < 4; round++) {
		req = fp_xrd(fdev, FP_IRQ(XDMA_IRQ_CHAN_REQ));
		if (req == ~0U) {
			if (!fp_card_gone(fdev))
				fp_not_answering(fdev);
			break;
		}
		req &= FP_IRQ_H2C0 | FP_IRQ_C2H0;
		if (!req)
			break;
		handled = true;
		if (req & FP_IRQ_C2H0)
			fp_service(fdev, FP_C2H);
		if (req & FP_IRQ_H2C0)
			fp_service(fdev, FP_H2C);
	}
	return handled;
}

/**
 * fp_irq() - the card's interrupt handler
 * @irq: the interrupt number
 * @data: the device (struct fp_dev)
 *
 * Services the channels that request it: completed descriptors, frames and
 * chunks handed to their files as events, credits topped up, transmit
 * completions, engine errors. No sleeping, no allocation.
 *
 * Context: hard IRQ; takes fdev->irq_lock and the active rings' locks.
 * Return: IRQ_HANDLED when a channel requested service, IRQ_NONE otherwise
 * (the INTx line may be shared).
 */
irqreturn_t fp_irq(int irq, void *data)
{
	struct fp_dev *fdev = data;
	bool handled;

	spin_lock(&fdev->irq_lock);
	handled = fp_service_requests(fdev);
	spin_unlock(&fdev->irq_lock);
	if (!handled)
		return IRQ_NONE;
	atomic64_inc(&fdev->cnt.irqs);
	return IRQ_HANDLED;
}

/* Descriptors the running rings have completed so far. irq_lock held. */
static u64 fp_done_total(struct fp_dev *fdev, bool *meta_wait)
{
	u64 done = 0;
	int d;

	for (d = 0; d < FP_DIRS; d++) {
		struct fp_ring *ring = fdev->active[d];

		if (!ring)
			continue;
		spin_lock(&ring->lock);
		done += ring->done;
		*meta_wait |= ring->meta_wait;
		spin_unlock(&ring->lock);
	}
	return done;
}

/*
 * The interrupt-loss watchdog: when no interrupt came since the last tick
 * while a ring runs, do what the handler would have done. Completions it
 * finds mean an interrupt was lost (or came late): counted in lost_irqs,
 * except a frame that only waited for its metadata.
 */
static void fp_watchdog(struct timer_list *t)
{
	struct fp_dev *fdev = from_timer(fdev, t, watchdog);
	u64 irqs = atomic64_read(&fdev->cnt.irqs);
	bool running, meta_wait = false;
	unsigned long flags;
	u64 before;

	if (READ_ONCE(fdev->hw_gone))
		return;
	spin_lock_irqsave(&fdev->irq_lock, flags);
	running = fdev->active[FP_C2H] || fdev->active[FP_H2C];
	if (running && irqs == fdev->wd_irqs) {
		before = fp_done_total(fdev, &meta_wait);
		/* Every channel: a lost interrupt leaves no request behind. */
		fp_service(fdev, FP_C2H);
		fp_service(fdev, FP_H2C);
		if (fp_xrd(fdev, FP_IRQ(XDMA_IRQ_CHAN_REQ)) == ~0U &&
		    !fp_card_gone(fdev))
			fp_not_answering(fdev);
		if (fp_done_total(fdev, &meta_wait) != before && !meta_wait)
			atomic64_inc(&fdev->cnt.lost_irqs);
	}
	spin_unlock_irqrestore(&fdev->irq_lock, flags);
	fdev->wd_irqs = atomic64_read(&fdev->cnt.irqs);
	if (running && !READ_ONCE(fdev->hw_gone))
		mod_timer(&fdev->watchdog, jiffies + fdev->wd_period);
}

/**
 * fp_watchdog_init() - set up the interrupt-loss watchdog of a device
 * @fdev: the device
 *
 * The timer is armed when a channel starts running and re-arms itself
 * while one runs; a tick that sees no interrupt since the last one runs the
 * completion path and counts what it found in lost_irqs.
 *
 * Context: process.
 */
void fp_watchdog_init(struct fp_dev *fdev)
{
	timer_setup(&fdev->watchdog, fp_watchdog, 0);
	fdev->wd_period = msecs_to_jiffies(FP_WATCHDOG_MIN_MS);
}

/* Four frame periods of the stream about to start, within limits. */
static void fp_watchdog_period(struct fp_dev *fdev, u32 period_ns, u32 chunks)
{
	u64 ms = div_u64((u64)period_ns * chunks * 4, NSEC_PER_MSEC);

	ms = clamp_t(u64, ms, FP_WATCHDOG_MIN_MS, FP_WATCHDOG_MAX_MS);
	fdev->wd_period = msecs_to_jiffies(ms);
}

/**
 * fp_c2h_start() - start (or restart after a fault or STOP) capture
 * @ring: a capture ring
 * @s: START's arguments, already checked against the card's capabilities
 *
 * Stops the channel for sure, clears the writeback records, programs the
 * geometry, the chunk period and the source, points the channel at the
 * ring's first descriptor and sets Run, hands every slot the application
 * does not hold to the engine (descriptor credits, then frame credits) and
 * enables the source. Frames in flight at an earlier stop are lost; held
 * slots stay held.
 *
 * Context: process, may sleep; the caller holds the file's lock and a
 * reference on @ring; takes fdev->hw_lock.
 * Return: 0; -EALREADY when it runs already; -ENODEV when the device is
 * gone; -EIO when the ring was revoked (also during the start), -ENOENT
 * while it is being registered; fp_engine_stop()'s errors when the channel
 * does not stop first.
 */
int fp_c2h_start(struct fp_ring *ring, const struct fpga_p2p_start *s)
{
	struct fp_dev *fdev = ring->fdev;
	u32 period = s->chunk_period_ns ? s->chunk_period_ns :
		     FP_DEFAULT_CHUNK_PERIOD_NS;
	unsigned long flags;
	dma_addr_t first;
	int ret = 0;
	u32 i, ctrl;

	mutex_lock(&fdev->hw_lock);
	if (fdev->hw_gone) {
		ret = -ENODEV;
		goto out;
	}
	spin_lock_irqsave(&ring->lock, flags);
	if (ring->state == FP_RING_RUNNING)
		ret = -EALREADY;
	else if (ring->state != FP_RING_IDLE && ring->state != FP_RING_FAULTED)
		ret = fp_ring_errno(ring->state);
	spin_unlock_irqrestore(&ring->lock, flags);
	if (ret)
		goto out;

	/* The engine may still be busy after a fault: stop it for sure. */
	ret = fp_engine_stop_locked(ring);
	if (ret)
		goto out;
	for (i = 0; i < ring->nblocks; i++)
		memset(ring->res_blk[i].cpu, 0, PAGE_SIZE);

	spin_lock_irqsave(&ring->lock, flags);
	if (ring->state != FP_RING_IDLE && ring->state != FP_RING_FAULTED) {
		ret = fp_ring_errno(ring->state);
		spin_unlock_irqrestore(&ring->lock, flags);
		goto out;
	}
	ring->state = FP_RING_IDLE;
	/* Frames in flight were lost with the stop; held slots stay held. */
	ring->free_head = 0;
	ring->free_count = 0;
	ring->eng_head = 0;
	ring->eng_count = 0;
	for (i = 0; i < ring->nr_slots; i++) {
		if (ring->slot_state[i] == FP_SLOT_ENGINE)
			ring->slot_state[i] = FP_SLOT_FREE;
		if (ring->slot_state[i] == FP_SLOT_FREE)
			ring->free_q[ring->free_count++] = i;
	}
	ring->head = 0;
	ring->desc_pos = 0;
	ring->owed = 0;
	ring->written = 0;
	ring->done = 0;
	ring->hw_done = 0;
	ring->chunk_events = s->flags & FPGA_P2P_START_CHUNK_EVENTS;
	ring->meta_wait = false;
	first = fp_desc_dma(ring, 0);
	spin_unlock_irqrestore(&ring->lock, flags);

	fp_uwr(fdev, FP_UB_FRAME_BYTES, ring->slot_bytes);
	fp_uwr(fdev, FP_UB_CHUNK_BYTES, ring->chunk_bytes);
	fp_uwr(fdev, FP_UB_CHUNK_PERIOD_NS, period);
	fp_watchdog_period(fdev, period, ring->chunks);
	fp_uwr(fdev, FP_UB_PLAYBACK_COUNT, s->playback_frames);
	ctrl = FIELD_PREP(FP_UB_CTRL_SOURCE, s->source) |
	       (ring->completion ? FP_UB_CTRL_COMPLETION : 0);
	fp_uwr(fdev, FP_UB_CTRL, ctrl);
	fp_chan_run(ring, first);

	spin_lock_irqsave(&ring->lock, flags);
	if (ring->state == FP_RING_IDLE) {
		ring->state = FP_RING_RUNNING;
		fp_c2h_credit(ring);
	} else {
		/* Revoked meanwhile: the teardown waits for hw_lock. */
		ret = fp_ring_errno(ring->state);
	}
	spin_unlock_irqrestore(&ring->lock, flags);
	if (ret) {
		fp_engine_stop_locked(ring);
		goto out;
	}
	fp_uwr(fdev, FP_UB_CTRL, FP_UB_CTRL_ENABLE | ctrl);
	fdev->streaming = true;
out:
	mutex_unlock(&fdev->hw_lock);
	return ret;
}

/**
 * fp_c2h_stop() - stop capture
 * @ring: a capture ring, running or faulted
 *
 * Slots the engine held become FREE again; slots the application holds
 * stay held. Waiters of the file wake up.
 *
 * Context: process, may sleep; the caller holds the file's lock and a
 * reference on @ring.
 * Return: 0 (also when the card does not answer: the ring is idle for the
 * caller); -EALREADY when it was stopped; -EIO when the ring was revoked,
 * -ENODEV when the device is gone, -ENOENT while it is being registered;
 * -ETIMEDOUT when the channel did not stop within FP_STOP_TIMEOUT_MS.
 */
int fp_c2h_stop(struct fp_ring *ring)
{
	unsigned long flags;
	int ret = 0;
	u32 i;

	spin_lock_irqsave(&ring->lock, flags);
	if (ring->state == FP_RING_RUNNING || ring->state == FP_RING_FAULTED) {
		ring->state = FP_RING_IDLE;
		for (i = 0; i < ring->nr_slots; i++)
			if (ring->slot_state[i] == FP_SLOT_ENGINE)
				ring->slot_state[i] = FP_SLOT_FREE;
	} else if (ring->state == FP_RING_IDLE) {
		ret = -EALREADY;
	} else {
		ret = fp_ring_errno(ring->state);
	}
	spin_unlock_irqrestore(&ring->lock, flags);
	if (ret)
		return ret;
	ret = fp_engine_stop(ring);
	fp_file_wake(ring->fp);
	return ret == -ETIMEDOUT ? ret : 0;
}

/**
 * fp_h2c_start() - start the transmit channel on a ring's descriptors
 * @ring: a transmit ring whose descriptor ring is built
 *
 * Transmit runs from registration to unregistration; TX_SUBMIT grants the
 * credits of each packet.
 *
 * Context: process, may sleep (takes fdev->hw_lock); the caller holds
 * fdev->lock, so that removal cannot pass in between.
 * Return: 0; -ENODEV when the device is gone; -ETIMEDOUT or -EIO when the
 * channel, stopped first, does not stop (see fp_engine_stop()).
 */
int fp_h2c_start(struct fp_ring *ring)
{
	struct fp_dev *fdev = ring->fdev;
	dma_addr_t first = fp_desc_dma(ring, 0);
	int ret;

	mutex_lock(&fdev->hw_lock);
	if (fdev->hw_gone) {
		ret = -ENODEV;
		goto out;
	}
	ret = fp_chan_stop(fdev, FP_H2C);
	if (ret)
		goto out;
	fp_chan_run(ring, first);
out:
	mutex_unlock(&fdev->hw_lock);
	return ret;
}

/**
 * fp_release_slot() - give a delivered capture slot back to the engine
 * @ring: a capture ring
 * @slot: a slot the application owns (READY)
 *
 * The ring's memory is synced for the device and the slot goes to the end
 * of the free queue; while capture runs it is handed to the engine at once.
 *
 * Context: process; takes @ring's lock with interrupts off.
 * Return: 0; -EINVAL for a transmit ring or a slot the application does
 * not own; -ERANGE when @slot >= nr_slots; -EIO when the ring was revoked,
 * -ENODEV when the device is gone, -ENOENT while it is being registered.
 */
int fp_release_slot(struct fp_ring *ring, u32 slot)
{
	unsigned long flags;
	int ret = 0;

	if (ring->dir != FP_C2H)
		return -EINVAL;
	if (slot >= ring->nr_slots)
		return -ERANGE;

	spin_lock_irqsave(&ring->lock, flags);
	switch (ring->state) {
	case FP_RING_IDLE:
	case FP_RING_RUNNING:
	case FP_RING_FAULTED:
		break;
	default:
		ret = fp_ring_errno(ring->state);
		goto out;
	}
	if (ring->slot_state[slot] != FP_SLOT_READY) {
		ret = -EINVAL;
		goto out;
	}
	/* The device's from here on. */
	fp_sync(ring, false);
	ring->slot_state[slot] = FP_SLOT_FREE;
	ring->free_q[(ring->free_head + ring->free_count) % ring->nr_slots] = slot;
	ring->free_count++;
	if (ring->state == FP_RING_RUNNING)
		fp_c2h_credit(ring);
out:
	spin_unlock_irqrestore(&ring->lock, flags);
	return ret;
}

/**
 * fp_tx_submit() - send a transmit slot's first bytes to the card
 * @ring: a transmit ring
 * @tx: TX_SUBMIT's arguments (reserved field and target already checked)
 *
 * Writes the slot's pieces up to the packet length into the descriptor
 * ring, syncs the memory for the device, pushes the packet's tag (target,
 * playback index, length) into the user block's tag FIFO and only then
 * grants the credits. Completion (EV_TX_DONE) is in submission order.
 *
 * Context: process; takes @ring's lock with interrupts off.
 * Return: 0; -EINVAL for a capture ring, a length of 0 or beyond the
 * slot, a playback index or length beyond the playback memory, or an index
 * for another target; -ERANGE when the slot is >= nr_slots; -EBUSY when
 * the slot is in flight; -EIO when the ring faulted or was revoked,
 * -ENODEV when the device is gone.
 */
int fp_tx_submit(struct fp_ring *ring, const struct fpga_p2p_tx *tx)
{
	struct fp_dev *fdev = ring->fdev;
	u32 left = tx->bytes, p, k = 0;
	unsigned long flags;
	struct fp_tx *q;
	int ret = 0;

	if (ring->dir != FP_H2C)
		return -EINVAL;
	if (tx->slot >= ring->nr_slots)
		return -ERANGE;
	if (!tx->bytes || tx->bytes > ring->slot_bytes)
		return -EINVAL;
	if (tx->target == FPGA_P2P_TX_PLAYBACK) {
		if (tx->index >= fdev->pb_frames ||
		    tx->bytes > fdev->pb_frame_bytes)
			return -EINVAL;
	} else if (tx->index) {
		return -EINVAL;
	}

	spin_lock_irqsave(&ring->lock, flags);
	if (ring->state != FP_RING_RUNNING) {
		ret = fp_ring_errno(ring->state);
		goto out;
	}
	if (ring->slot_state[tx->slot] != FP_SLOT_FREE) {
		ret = -EBUSY;
		goto out;
	}
	for (p = ring->slot_first[tx->slot]; left; p++) {
		left -= min(ring->info[p].len, left);
		k++;
	}
	fp_ring_fill(ring, ring->slot_first[tx->slot], k, tx->bytes);
	fp_sync(ring, false);
	/* Where the packet goes, before the engine can send it. */
	fp_uwr(fdev, FP_UB_TAG_BYTES, tx->bytes);
	fp_uwr(fdev, FP_UB_TAG_PUSH, FIELD_PREP(FP_TAG_TARGET, tx->target) |
				     FIELD_PREP(FP_TAG_INDEX, tx->index));
	q = &ring->txq[(ring->txq_head + ring->txq_count) % ring->nr_slots];
	q->end = ring->owed;
	q->cookie = tx->cookie;
	q->slot = tx->slot;
	q->bytes = tx->bytes;
	ring->txq_count++;
	ring->slot_state[tx->slot] = FP_SLOT_TX;
	atomic64_inc(&fdev->cnt.tx_submitted);
	fp_topup(ring);
out:
	spin_unlock_irqrestore(&ring->lock, flags);
	return ret;
}
