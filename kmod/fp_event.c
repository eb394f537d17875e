// SPDX-License-Identifier: GPL-2.0
/*
 * fpga_p2p: events and wake-ups, the bottom layer. Every open file has a
 * preallocated queue of struct fpga_p2p_event, sized at REGISTER for what the
 * file's rings can queue plus spare entries that only REVOKED and FAULT may
 * take, so those are never lost to a queue full of frame events. The engine,
 * the rings and the file operations above all queue and wake through here;
 * nothing here calls up.
 */
#include <linux/slab.h>
#include <linux/wait.h>

#include "fpga_p2p_drv.h"

/* Spare event queue entries per file, for REVOKED and FAULT only. */
#define FP_EV_SPARE		8

/**
 * fp_file_wake() - wake every waiter of an open file
 * @fp: the open file
 *
 * Readers, pollers and WAIT callers re-check the file's state: a ring that
 * stopped, faulted or was revoked, or a device that went away.
 *
 * Context: any.
 */
void fp_file_wake(struct fp_file *fp)
{
	wake_up_interruptible_all(&fp->wq);
}

/* REVOKED and FAULT: the last word on a ring, never dropped for room. */
static bool fp_ev_vital(const struct fpga_p2p_event *ev)
{
	return ev->type == FPGA_P2P_EV_REVOKED || ev->type == FPGA_P2P_EV_FAULT;
}

/* Entries @ev may fill: all for vital ones, all but the spare for others. */
static u32 fp_ev_room(struct fp_file *fp, const struct fpga_p2p_event *ev)
{
	if (fp_ev_vital(ev) || fp->ev_cap <= FP_EV_SPARE)
		return fp->ev_cap;
	return fp->ev_cap - FP_EV_SPARE;
}

/**
 * fp_event_push() - queue an event on an open file and wake its readers
 * @fp: the open file that owns the event's ring
 * @ev: the event, copied into the file's preallocated queue
 *
 * A full queue counts an overflow (event_overflows); after one, later
 * ordinary events are dropped too until the reader has seen the overflow
 * marker, so that the order of what is queued is kept. REVOKED and FAULT
 * may take the spare entries and are never dropped for room.
 *
 * Context: any (hard IRQ included); takes fp->ev_lock.
 */
void fp_event_push(struct fp_file *fp, const struct fpga_p2p_event *ev)
{
	unsigned long flags;
	bool lost = false;

	spin_lock_irqsave(&fp->ev_lock, flags);
	if (fp->ev_count >= fp_ev_room(fp, ev) ||
	    (fp->ev_lost && !fp_ev_vital(ev))) {
		fp->ev_lost++;
		lost = true;
	} else {
		fp->ev[(fp->ev_head + fp->ev_count) & (fp->ev_cap - 1)] = *ev;
		fp->ev_count++;
	}
	spin_unlock_irqrestore(&fp->ev_lock, flags);
	if (lost)
		atomic64_inc(&fp->fdev->cnt.event_overflows);
	wake_up_interruptible(&fp->wq);
}

/**
 * fp_events_purge() - remove the queued events of a ring that goes away
 * @fp: the open file
 * @handle: the ring's handle
 *
 * Context: any; takes fp->ev_lock.
 */
void fp_events_purge(struct fp_file *fp, u32 handle)
{
	unsigned long flags;
	u32 i, kept = 0, mask;

	spin_lock_irqsave(&fp->ev_lock, flags);
	mask = fp->ev_cap - 1;
	for (i = 0; i < fp->ev_count; i++) {
		struct fpga_p2p_event *ev = &fp->ev[(fp->ev_head + i) & mask];

		if (ev->handle == handle)
			continue;
		if (kept != i)
			fp->ev[(fp->ev_head + kept) & mask] = *ev;
		kept++;
	}
	fp->ev_count = kept;
	spin_unlock_irqrestore(&fp->ev_lock, flags);
}

/**
 * fp_evq_reserve() - grow an open file's event queue
 * @fp: the open file
 * @need: entries its rings may queue at once (the spare comes on top)
 *
 * Queued events are kept, in order. The queue never shrinks.
 *
 * Context: process, may sleep; no spinlock of the driver held.
 * Return: 0, or -ENOMEM.
 */
int fp_evq_reserve(struct fp_file *fp, u32 need)
{
	struct fpga_p2p_event *ev, *old;
	unsigned long flags;
	u32 cap, i;

	cap = roundup_pow_of_two(need + FP_EV_SPARE);
	if (cap <= fp->ev_cap)
		return 0;
	ev = kvmalloc_array(cap, sizeof(*ev), GFP_KERNEL | __GFP_ZERO);
	if (!ev)
		return -ENOMEM;
	spin_lock_irqsave(&fp->ev_lock, flags);
	for (i = 0; i < fp->ev_count; i++)
		ev[i] = fp->ev[(fp->ev_head + i) & (fp->ev_cap - 1)];
	old = fp->ev;
	fp->ev = ev;
	fp->ev_cap = cap;
	fp->ev_head = 0;
	spin_unlock_irqrestore(&fp->ev_lock, flags);
	kvfree(old);
	return 0;
}

