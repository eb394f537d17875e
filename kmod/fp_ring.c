// SPDX-License-Identifier: GPL-2.0
/*
 * fpga_p2p: rings of slots in user memory, registered through the Tegra
 * nv-p2p interface and mapped once. At registration the slots are cut into
 * pieces (contiguous bus ranges, split at chunk ends) and the linked
 * descriptor ring is built; nothing is pinned, mapped or allocated per frame.
 *
 * Lifetime of a ring's memory. nvidia_p2p_get_pages() gives a page table
 * and arranges for fp_ring_free_callback() to run when the memory goes away
 * or when we call nvidia_p2p_put_pages(). Exactly one party tears the ring's
 * DMA down (stop the engine, free the descriptors, free the mapping and the
 * page table):
 *  - the callback, when the memory is revoked (munmap, exit, test revoke);
 *    it then queues EV_REVOKED and leaves the unmap and unpin to
 *    fp_ring_unmap_work() (never into nv-p2p from inside its callback);
 *  - the owner (UNREGISTER, close, device removal, a failed REGISTER) after
 *    its own nvidia_p2p_put_pages(), whose callback only records the cause.
 * The page-table struct itself is freed only when the ring is destroyed
 * (UNREGISTER or close), after which no callback can run. On a Tegra
 * nvidia-p2p module, put_pages must not be called again after a callback from
 * an invalidation (it would drop the mm reference twice) but must be called
 * after one from process exit (to drop it at all); fp_ring_release_memory()
 * does exactly that.
 */
#include <linux/dma-map-ops.h>
#include <linux/dma-mapping.h>
#include <linux/kmemleak.h>
#include <linux/mm.h>
#include <linux/mmu_notifier.h>
#include <linux/pci.h>
#include <linux/sched/mm.h>
#include <linux/slab.h>

#include "fpga_p2p_drv.h"

static void fp_ring_free_dma(struct fp_ring *ring)
{
	u32 i;

	/*
	 * The device is read only while blocks are left: the last reference
	 * may be dropped by the unmap work after the device is gone.
	 */
	for (i = 0; i < ring->nblocks; i++) {
		struct device *dev = ring->fdev->dev;

		if (ring->desc_blk && ring->desc_blk[i].cpu)
			dma_free_coherent(dev, PAGE_SIZE, ring->desc_blk[i].cpu,
					  ring->desc_blk[i].dma);
		if (ring->res_blk && ring->res_blk[i].cpu)
			dma_free_coherent(dev, PAGE_SIZE, ring->res_blk[i].cpu,
					  ring->res_blk[i].dma);
	}
	kfree(ring->desc_blk);
	kfree(ring->res_blk);
	ring->desc_blk = NULL;
	ring->res_blk = NULL;
	ring->nblocks = 0;
}

static void fp_ring_release(struct kref *ref)
{
	struct fp_ring *ring = container_of(ref, struct fp_ring, ref);

	/* The engine of a quarantined ring may still read its descriptors. */
	if (!ring->quarantined)
		fp_ring_free_dma(ring);
	kvfree(ring->info);
	kvfree(ring->pos_piece);
	kfree(ring->free_q);
	kfree(ring->eng_q);
	kfree(ring->slot_first);
	kfree(ring->slot_state);
	kfree(ring->txq);
	kfree(ring);
}

/**
 * fp_ring_put() - drop a reference on a ring
 * @ring: the ring
 *
 * The last reference frees the ring's bookkeeping and, unless the ring is
 * quarantined (its engine may still read them), its descriptor memory. The
 * mapping and the page table are released before, by the ring's teardown.
 *
 * Context: any that may free coherent DMA memory: process, not atomic.
 */
void fp_ring_put(struct fp_ring *ring)
{
	kref_put(&ring->ref, fp_ring_release);
}

/**
 * fp_ring_get() - look up a ring of an open file by its handle
 * @fp: the open file
 * @handle: the handle REGISTER returned
 *
 * Context: process; takes fp->rings_lock.
 * Return: the ring with a reference the caller drops with fp_ring_put(),
 * or NULL when @handle names no ring of @fp (0 never does).
 */
struct fp_ring *fp_ring_get(struct fp_file *fp, u32 handle)
{
	struct fp_ring *ring = NULL;
	int d;

	if (!handle)
		return NULL;
	spin_lock(&fp->rings_lock);
	for (d = 0; d < FP_DIRS; d++) {
		if (fp->ring[d] && fp->ring[d]->handle == handle) {
			ring = fp->ring[d];
			kref_get(&ring->ref);
			break;
		}
	}
	spin_unlock(&fp->rings_lock);
	return ring;
}

/*
 * Unmap and unpin deferred from a free callback. NVIDIA's module takes its
 * page-table mutex in nvidia_p2p_dma_unmap_pages() and
 * nvidia_p2p_free_page_table(), and allocates under that mutex in
 * nvidia_p2p_dma_map_pages(); memory reclaim may invalidate, so the free
 * callback (inside mmu_notifier_invalidate_range_start) must not take it:
 * lockdep calls that a circular dependency, and under memory pressure it is
 * a deadlock. The engine is stopped before the work is queued and the pages
 * stay pinned until it runs, so nothing is freed under the card meanwhile.
 * The ring's torn_down completes here, so the owner's UNREGISTER, close or
 * removal waits for it before it frees the page-table struct.
 */
static struct workqueue_struct *fp_unmap_wq;

/**
 * fp_ring_init() - module load: create the workqueue of deferred unmaps
 *
 * Context: process.
 * Return: 0, or -ENOMEM.
 */
int fp_ring_init(void)
{
	fp_unmap_wq = alloc_workqueue("fpga_p2p_unmap", WQ_UNBOUND, 0);
	return fp_unmap_wq ? 0 : -ENOMEM;
}

/**
 * fp_ring_exit() - module unload: every queued unmap runs before the code goes
 *
 * Context: process, may sleep; after the PCI driver is unregistered.
 */
void fp_ring_exit(void)
{
	destroy_workqueue(fp_unmap_wq);
}

static void fp_ring_free_p2p(struct fp_ring *ring)
{
	if (ring->map) {
		nvidia_p2p_free_dma_mapping(ring->map);
		ring->map = NULL;
	}
	if (ring->pt)
		nvidia_p2p_free_page_table(ring->pt);
}

static void fp_ring_unmap_work(struct work_struct *work)
{
	struct fp_ring *ring = container_of(work, struct fp_ring, unmap_work);

	fp_ring_free_p2p(ring);
	complete_all(&ring->torn_down);
	fp_ring_put(ring);
}

/*
 * Stop the engine and release the ring's DMA resources: descriptors, the
 * nv-p2p mapping and the pinned pages. Runs once per ring. @final is the
 * state the ring is left in; @fault, when not 0, is queued as EV_FAULT.
 * From a free callback (@in_callback) the mapping and the pages are given
 * back by fp_ring_unmap_work(), which then completes torn_down.
 */
static void fp_ring_teardown(struct fp_ring *ring, enum fp_ring_state final,
			     u32 fault, bool in_callback)
{
	bool deferred = false;
	struct fp_dev *fdev = ring->fdev;
	enum fp_ring_state old;
	unsigned long flags;

	spin_lock_irqsave(&ring->lock, flags);
	old = ring->state;
	ring->state = final;
	spin_unlock_irqrestore(&ring->lock, flags);

	/*
	 * From here the engine gets no credits. If it does not stop in time it
	 * may still write: then the descriptors, the mapping and the pinned
	 * pages are kept for ever (quarantined) rather than freed under a
	 * running DMA, which would corrupt whatever reuses that memory.
	 */
	if (READ_ONCE(ring->abandoned)) {
		/* Removal gave up on us: the device may be gone; keep all. */
		if (!fault)
			fault = FPGA_P2P_FAULT_DEVICE_GONE;
	} else if (fp_engine_stop(ring)) {
		/*
		 * Not stopped in time, or its status read all ones while the
		 * PCI core does not call it gone: it may still write. Parked
		 * until removal sees the engine quiet.
		 */
		ring->quarantined = true;
		atomic64_inc(&fdev->cnt.quarantined);
		kref_get(&ring->ref);
		spin_lock_irqsave(&fdev->quarantine_lock, flags);
		list_add_tail(&ring->qnode, &fdev->quarantine);
		spin_unlock_irqrestore(&fdev->quarantine_lock, flags);
		dev_crit(fdev->dev,
			 "DMA engine did not stop: ring %u memory quarantined (pinned for ever)\n",
			 ring->handle);
		if (!fault)
			fault = FPGA_P2P_FAULT_DMA_TIMEOUT;
	} else {
		fp_ring_free_dma(ring);
		if (in_callback && (ring->map || ring->pt)) {
			kref_get(&ring->ref);
			queue_work(fp_unmap_wq, &ring->unmap_work);
			deferred = true;
		} else {
			fp_ring_free_p2p(ring);
		}
	}

	if (old != FP_RING_BUILDING) {
		struct fpga_p2p_event ev = {
			.handle = ring->handle,
			.slot = FPGA_P2P_NO_SLOT,
		};

		if (final == FP_RING_REVOKED) {
			atomic64_inc(&fdev->cnt.revocations);
			ev.type = FPGA_P2P_EV_REVOKED;
			fp_event_push(ring->fp, &ev);
		} else if (fault) {
			ev.type = FPGA_P2P_EV_FAULT;
			ev.chunk = fault;
			fp_event_push(ring->fp, &ev);
		}
	}
	fp_file_wake(ring->fp);
	if (!deferred)
		complete_all(&ring->torn_down);
}

/*
 * The nv-p2p free callback: the memory is going away (or we asked for it
 * with put_pages). May run with the mm's mmap_lock held, from any process,
 * concurrently with anything except itself for this ring (and, on broken
 * implementations, even twice).
 */
static void fp_ring_free_callback(void *data)
{
	struct fp_ring *ring = data;
	struct mm_struct *mm = ring->pt ? ring->pt->mm : NULL;
	enum fp_cb_cause cause;
	unsigned long flags;
	bool mine = false, wait = false;

	spin_lock_irqsave(&ring->lock, flags);
	if (ring->cb_cause == FP_CB_NONE) {
		if (ring->put_claimed)
			cause = FP_CB_PUT;
		else if (mm && !atomic_read(&mm->mm_users))
			cause = FP_CB_EXIT;
		else
			cause = FP_CB_INVALIDATE;
		ring->cb_cause = cause;
		/* A ring still being built is torn down by REGISTER itself. */
		if (cause != FP_CB_PUT && ring->state != FP_RING_BUILDING &&
		    !ring->teardown_claimed) {
			ring->teardown_claimed = true;
			mine = true;
		}
	} else if (ring->teardown_claimed) {
		wait = true;
	}
	spin_unlock_irqrestore(&ring->lock, flags);

	if (mine)
		fp_ring_teardown(ring, FP_RING_REVOKED, 0, true);
	else if (wait)
		wait_for_completion_timeout(&ring->torn_down,
					    msecs_to_jiffies(FP_TEARDOWN_TIMEOUT_MS));
}

/**
 * fp_ring_abandon() - keep a ring and its memory for ever
 * @ring: the ring
 * @what: what was not waited for, for the log ("teardown", "revocation",
 *	"registration")
 *
 * We gave up waiting for a teardown that another context runs (a
 * revocation callback, the owner's side, a registration under way). It may
 * still be using the ring, its page table and its DMA memory: all of them
 * are kept (quarantined, counted once) rather than freed under it. The
 * extra reference taken here is never dropped.
 *
 * Context: any; takes @ring's lock with interrupts off.
 */
void fp_ring_abandon(struct fp_ring *ring, const char *what)
{
	unsigned long flags;

	spin_lock_irqsave(&ring->lock, flags);
	if (!ring->abandoned) {
		if (!ring->quarantined)
			atomic64_inc(&ring->fdev->cnt.quarantined);
		ring->abandoned = true;
		ring->quarantined = true;
		kref_get(&ring->ref);
		kmemleak_not_leak(ring);
	}
	spin_unlock_irqrestore(&ring->lock, flags);
	dev_crit(ring->fdev->dev,
		 "ring %u: gave up waiting for its %s: ring quarantined (memory kept for ever)\n",
		 ring->handle, what);
}

/**
 * fp_ring_release_memory() - the owner gives a ring's memory back
 * @ring: the ring
 * @why: FP_RELEASE_UNREGISTER (UNREGISTER, close, a failed REGISTER) or
 *	FP_RELEASE_REMOVE (device removal: waiters see DEVICE_GONE)
 *
 * Calls nvidia_p2p_put_pages() as the nv-p2p contract wants it (not after
 * a revocation by invalidation), tears the ring's DMA down unless a
 * revocation already does, and waits (at most FP_TEARDOWN_TIMEOUT_MS)
 * until the teardown is complete; a teardown that does not complete in
 * time abandons the ring (fp_ring_abandon()). Idempotent.
 *
 * Context: process, may sleep; not from the nv-p2p free callback.
 */
void fp_ring_release_memory(struct fp_ring *ring, enum fp_release_why why)
{
	unsigned long timeout = msecs_to_jiffies(FP_TEARDOWN_TIMEOUT_MS);
	enum fp_cb_cause cause;
	unsigned long flags;
	bool mine;

	spin_lock_irqsave(&ring->lock, flags);
	if (ring->put_claimed) {
		spin_unlock_irqrestore(&ring->lock, flags);
		if (!wait_for_completion_timeout(&ring->torn_down, timeout))
			fp_ring_abandon(ring, "teardown");
		return;
	}
	ring->put_claimed = true;
	cause = ring->cb_cause;
	spin_unlock_irqrestore(&ring->lock, flags);

	/*
	 * Not revoked yet: put_pages runs the callback (which sees
	 * put_claimed and leaves the teardown to us). Revoked by process exit:
	 * put_pages only drops the notifier's reference on the mm. Revoked by
	 * an invalidation: the notifier is gone already, no put_pages.
	 */
	if (ring->pt && (cause == FP_CB_NONE || cause == FP_CB_EXIT))
		nvidia_p2p_put_pages(ring->pt);

	spin_lock_irqsave(&ring->lock, flags);
	mine = !ring->teardown_claimed;
	ring->teardown_claimed = true;
	spin_unlock_irqrestore(&ring->lock, flags);

	if (mine)
		fp_ring_teardown(ring, FP_RING_DEAD,
				 why == FP_RELEASE_REMOVE ?
				 FPGA_P2P_FAULT_DEVICE_GONE : 0, false);
	else if (!wait_for_completion_timeout(&ring->torn_down, timeout))
		fp_ring_abandon(ring, "revocation");
}

/*
 * Page tables of invalidated registrations, freed at module unload. After an
 * invalidation NVIDIA's module has queued the deferred free of the notifier
 * embedded in the page table (mmu_notifier_put: call_srcu on the notifier
 * core's private SRCU); nothing exported waits for that callback to have
 * run, so the struct is kept until the module goes, when
 * mmu_notifier_synchronize() has let every earlier deferred free through.
 * A struct for which no list entry can be allocated is kept for ever.
 */
struct fp_pt_grave {
	struct list_head node;
	struct nvidia_p2p_page_table *pt;
};

static LIST_HEAD(fp_pt_graves);
static DEFINE_SPINLOCK(fp_pt_graves_lock);

static void fp_pt_bury(struct nvidia_p2p_page_table *pt)
{
	struct fp_pt_grave *g = kmalloc(sizeof(*g), GFP_KERNEL);

	if (!g) {
		kmemleak_not_leak(pt);
		return;
	}
	g->pt = pt;
	spin_lock(&fp_pt_graves_lock);
	list_add_tail(&g->node, &fp_pt_graves);
	spin_unlock(&fp_pt_graves_lock);
}

/* The page-table struct of a ring whose pages are given back. */
static void fp_pt_free(struct nvidia_p2p_page_table *pt, enum fp_cb_cause cause)
{
	if (cause == FP_CB_INVALIDATE) {
		/*
		 * NVIDIA's module calls mmu_notifier_put() on an invalidation:
		 * the notifier core frees the embedded notifier later
		 * (call_srcu), reading the struct.
		 */
		fp_pt_bury(pt);
		return;
	}
	/*
	 * put_pages (mmu_notifier_unregister) or process exit (the notifier
	 * unhooked in exit_mmap): the core may still walk its list through
	 * the embedded notifier.
	 */
	if (cause == FP_CB_EXIT)
		mmu_notifier_synchronize();
	kfree(pt);
}

/**
 * fp_ring_reap_quarantine() - free the quarantined rings of a removed device
 * @fdev: the device, after its final quiesce
 * @engine_quiet: the final quiesce saw both channels idle
 *
 * When no engine touches the parked rings' memory any more, the rings
 * that their owners destroyed give back their descriptors, mapping and
 * pages. Otherwise (and for a ring whose file is still open, or one that
 * was abandoned) they stay for ever.
 *
 * Context: process, may sleep.
 */
void fp_ring_reap_quarantine(struct fp_dev *fdev, bool engine_quiet)
{
	struct fp_ring *ring, *tmp;
	unsigned long flags;
	LIST_HEAD(reap);
	u32 kept = 0;

	spin_lock_irqsave(&fdev->quarantine_lock, flags);
	list_for_each_entry_safe(ring, tmp, &fdev->quarantine, qnode) {
		if (engine_quiet && ring->destroyed && !ring->abandoned) {
			list_move_tail(&ring->qnode, &reap);
		} else {
			/* Outlives the device that listed it. */
			kmemleak_not_leak(ring);
			kept++;
		}
	}
	spin_unlock_irqrestore(&fdev->quarantine_lock, flags);

	list_for_each_entry_safe(ring, tmp, &reap, qnode) {
		list_del(&ring->qnode);
		dev_info(fdev->dev, "ring %u: the engine is quiet: quarantined memory freed\n",
			 ring->handle);
		ring->quarantined = false;
		fp_ring_free_dma(ring);
		if (ring->map) {
			nvidia_p2p_free_dma_mapping(ring->map);
			ring->map = NULL;
		}
		if (ring->pt) {
			nvidia_p2p_free_page_table(ring->pt);
			fp_pt_free(ring->pt, ring->cb_cause);
			ring->pt = NULL;
		}
		fp_ring_put(ring);
	}
	if (kept)
		dev_crit(fdev->dev, "%u quarantined ring(s) kept for ever\n", kept);
}

/**
 * fp_ring_free_buried() - module unload: free the buried page-table structs
 *
 * Context: process, may sleep: waits for the notifier core's deferred frees
 * (mmu_notifier_synchronize()) first. No ring is left by then, so no
 * callback can bury another.
 */
void fp_ring_free_buried(void)
{
	struct fp_pt_grave *g, *tmp;
	LIST_HEAD(graves);

	spin_lock(&fp_pt_graves_lock);
	list_splice_init(&fp_pt_graves, &graves);
	spin_unlock(&fp_pt_graves_lock);
	if (list_empty(&graves))
		return;
	mmu_notifier_synchronize();
	list_for_each_entry_safe(g, tmp, &graves, node) {
		kfree(g->pt);
		kfree(g);
	}
}

/**
 * fp_ring_destroy() - destroy a ring no longer reachable through its file
 * @ring: the ring (one that never was reachable too: a failed REGISTER);
 *	the caller's reference is dropped
 *
 * Releases its memory (fp_ring_release_memory()), frees the page-table
 * struct (or keeps it with a quarantined ring), drops its queued events and
 * gives the device's direction back.
 *
 * Context: process, may sleep; the caller holds the file's lock.
 */
void fp_ring_destroy(struct fp_ring *ring)
{
	struct fp_dev *fdev = ring->fdev;
	enum fp_cb_cause cause;
	unsigned long flags;

	fp_ring_release_memory(ring, FP_RELEASE_UNREGISTER);

	spin_lock_irqsave(&ring->lock, flags);
	cause = ring->cb_cause;
	spin_unlock_irqrestore(&ring->lock, flags);
	spin_lock_irqsave(&fdev->quarantine_lock, flags);
	ring->destroyed = true;
	spin_unlock_irqrestore(&fdev->quarantine_lock, flags);
	if (ring->pt) {
		if (ring->quarantined) {
			/* It still holds the pinned pages (reaped or kept). */
			kmemleak_not_leak(ring->pt);
		} else {
			fp_pt_free(ring->pt, cause);
			ring->pt = NULL;
		}
	}
	if (ring->handle)
		fp_events_purge(ring->fp, ring->handle);

	mutex_lock(&fdev->lock);
	if (fdev->claim[ring->dir] == ring)
		fdev->claim[ring->dir] = NULL;
	mutex_unlock(&fdev->lock);
	fp_ring_put(ring);
}

/*
 * The bus address of @len bytes at @off of the ring's mapping, in *@bus;
 * false when they do not lie in one contiguous range.
 */
static bool fp_ring_bus(struct fp_ring *ring, u64 off, u32 len,
			dma_addr_t *bus)
{
	struct nvidia_p2p_dma_mapping *map = ring->map;
	u32 seg;

	for (seg = 0; seg < map->entries; seg++) {
		if (off < map->hw_len[seg]) {
			*bus = map->hw_address[seg] + off;
			return off + len <= map->hw_len[seg];
		}
		off -= map->hw_len[seg];
	}
	return false;
}

/*
 * Walk the ring's bus ranges in slot order. Capture: one piece per
 * contiguous range of a chunk and, with completion records, after each
 * chunk's pieces one piece of FP_COMPLETION_BYTES for the slot's record in
 * the status page (the chunk's end, and on the last chunk the frame's, is
 * that piece). Transmit: one piece per contiguous range of a slot. With
 * @fill false only count; returns the count or -EIO.
 */
static long fp_ring_walk(struct fp_ring *ring, bool fill)
{
	struct nvidia_p2p_dma_mapping *map = ring->map;
	u32 chunks = ring->dir == FP_C2H ? ring->chunks : 1;
	u64 chunk_bytes = ring->slot_bytes / chunks;
	u64 status = ring->slot_bytes * ring->nr_slots;
	u32 seg = 0, s, c, k;
	u64 seg_off = 0;
	long n = 0;

	for (s = 0; s < ring->nr_slots; s++) {
		dma_addr_t rec = 0;

		if (ring->completion &&
		    !fp_ring_bus(ring, status + s * FP_COMPLETION_BYTES,
				 FP_COMPLETION_BYTES, &rec))
			return -EIO;
		k = 0;
		if (fill)
			ring->slot_first[s] = n;
		for (c = 0; c < chunks; c++) {
			u64 left = chunk_bytes;

			for (; left; n++) {
				u64 len;

				while (seg < map->entries &&
				       seg_off == map->hw_len[seg]) {
					seg++;
					seg_off = 0;
				}
				if (seg == map->entries)
					return -EIO;
				len = min3(left, map->hw_len[seg] - seg_off,
					   (u64)XDMA_DESC_LEN_MAX);
				if (fill) {
					struct fp_desc_info *di = &ring->info[n];

					di->addr = map->hw_address[seg] + seg_off;
					di->len = len;
					di->chunk = c;
					di->flags = ++k % FP_IRQ_EVERY ? 0 : FP_DI_IRQ;
				}
				left -= len;
				seg_off += len;
			}
			if (ring->completion) {
				if (fill) {
					struct fp_desc_info *di = &ring->info[n];

					di->addr = rec;
					di->len = FP_COMPLETION_BYTES;
					di->chunk = c;
					di->flags = ++k % FP_IRQ_EVERY ? 0 : FP_DI_IRQ;
				}
				n++;
			}
			if (fill)
				ring->info[n - 1].flags |= FP_DI_CHUNK_END;
		}
		if (fill)
			ring->info[n - 1].flags |= FP_DI_SLOT_END | FP_DI_IRQ;
	}
	if (fill)
		ring->slot_first[ring->nr_slots] = n;
	return n;
}

/* Cut the slots into pieces and build the descriptor ring, once. */
static int fp_ring_build(struct fp_ring *ring)
{
	struct device *dev = ring->fdev->dev;
	u32 per = PAGE_SIZE / sizeof(struct xdma_desc);
	long n;
	u32 i;

	if (!ring->map->entries)
		return -EIO;
	n = fp_ring_walk(ring, false);
	if (n <= 0)
		return -EIO;
	if (n > (1L << 22))
		return -ENOMEM;

	ring->ndesc = n;
	ring->info = kvmalloc_array(n, sizeof(*ring->info), GFP_KERNEL);
	ring->slot_first = kcalloc(ring->nr_slots + 1, sizeof(u32), GFP_KERNEL);
	ring->slot_state = kcalloc(ring->nr_slots, 1, GFP_KERNEL);
	ring->nblocks = DIV_ROUND_UP(n, per);
	ring->desc_blk = kcalloc(ring->nblocks, sizeof(*ring->desc_blk),
				 GFP_KERNEL);
	if (ring->dir == FP_C2H) {
		ring->res_blk = kcalloc(ring->nblocks, sizeof(*ring->res_blk),
					GFP_KERNEL);
		ring->pos_piece = kvmalloc_array(n, sizeof(u32), GFP_KERNEL);
		ring->free_q = kcalloc(ring->nr_slots, sizeof(u32), GFP_KERNEL);
		ring->eng_q = kcalloc(ring->nr_slots, sizeof(u32), GFP_KERNEL);
		if (!ring->res_blk || !ring->pos_piece || !ring->free_q ||
		    !ring->eng_q)
			return -ENOMEM;
	} else {
		ring->txq = kcalloc(ring->nr_slots, sizeof(*ring->txq),
				    GFP_KERNEL);
		if (!ring->txq)
			return -ENOMEM;
	}
	if (!ring->info || !ring->slot_first || !ring->slot_state ||
	    !ring->desc_blk)
		return -ENOMEM;
	for (i = 0; i < ring->nblocks; i++) {
		ring->desc_blk[i].cpu = dma_alloc_coherent(dev, PAGE_SIZE,
							   &ring->desc_blk[i].dma,
							   GFP_KERNEL);
		if (!ring->desc_blk[i].cpu)
			return -ENOMEM;
		if (ring->res_blk) {
			ring->res_blk[i].cpu =
				dma_alloc_coherent(dev, PAGE_SIZE,
						   &ring->res_blk[i].dma,
						   GFP_KERNEL);
			if (!ring->res_blk[i].cpu)
				return -ENOMEM;
		}
	}
	if (fp_ring_walk(ring, true) != n)
		return -EIO;

	/* Links and writeback addresses; the rest is written per slot. */
	for (i = 0; i < ring->ndesc; i++) {
		struct xdma_desc *d = fp_desc(ring, i);
		dma_addr_t next = fp_desc_dma(ring, i + 1 == n ? 0 : i + 1);

		memset(d, 0, sizeof(*d));
		d->next_lo = cpu_to_le32(lower_32_bits(next));
		d->next_hi = cpu_to_le32(upper_32_bits(next));
		if (ring->dir == FP_C2H) {
			d->src_lo = cpu_to_le32(lower_32_bits(fp_result_dma(ring, i)));
			d->src_hi = cpu_to_le32(upper_32_bits(fp_result_dma(ring, i)));
		}
	}
	return 0;
}

/* Bytes a registration pins and maps: the slots and any status page. */
static u64 fp_ring_span(const struct fpga_p2p_ring *r)
{
	u64 bytes = r->slot_bytes * r->nr_slots;

	if (r->flags & FPGA_P2P_RING_COMPLETION)
		bytes += FPGA_P2P_STATUS_BYTES;
	return bytes;
}

/*
 * Completion records need a DMA path without syncs: the consumer resets a
 * record in place, which a bounce buffer's copy or a cache invalidation of
 * the next sync for the CPU would undo, and a GPU polling the page sees no
 * sync at all. Records are refused where the device does not snoop the
 * CPU's caches, where a direct mapping bounces the status page (swiotlb),
 * and for an untrusted device (dma-iommu bounces its unaligned pieces).
 * dma_need_sync() alone cannot say it: behind an IOMMU it answers true
 * for every device on these kernels, coherent or not.
 */
static int fp_ring_check_status(struct fp_ring *ring)
{
	struct device *dev = ring->fdev->dev;
	dma_addr_t bus;

	if (!ring->completion)
		return 0;
	if (!fp_ring_bus(ring, ring->slot_bytes * ring->nr_slots,
			 FP_COMPLETION_BYTES, &bus))
		return -EIO;
	if (!dev_is_dma_coherent(dev) || to_pci_dev(dev)->untrusted)
		return -EOPNOTSUPP;
	if (!get_dma_ops(dev) && dma_need_sync(dev, bus))
		return -EOPNOTSUPP;
	return 0;
}

static int fp_ring_check(struct fp_dev *fdev, const struct fpga_p2p_ring *r,
			 u32 *chunk_bytes)
{
	u64 bytes;

	if (r->reserved0 || r->reserved[0] ||
	    r->flags & ~FPGA_P2P_RING_COMPLETION)
		return -EINVAL;
	/* Completion records: capture only, and the card must write them. */
	if (r->flags & FPGA_P2P_RING_COMPLETION) {
		if (r->direction != FPGA_P2P_DIR_C2H)
			return -EINVAL;
		if (!(fdev->hw_caps & FP_UB_CAP_COMPLETION))
			return -EINVAL;
	}
	if (r->direction != FPGA_P2P_DIR_C2H && r->direction != FPGA_P2P_DIR_H2C)
		return -EINVAL;
	if (!r->addr || r->addr % FPGA_P2P_SLOT_ALIGN ||
	    !r->slot_bytes || r->slot_bytes % FPGA_P2P_SLOT_ALIGN ||
	    r->slot_bytes > FP_MAX_SLOT_BYTES)
		return -EINVAL;
	if (r->nr_slots < (r->direction == FPGA_P2P_DIR_C2H ? 2 : 1) ||
	    r->nr_slots > fdev->max_slots)
		return -EINVAL;
	bytes = fp_ring_span(r);
	if (bytes > FP_MAX_RING_BYTES || r->addr + bytes < r->addr)
		return -EINVAL;
	if (r->direction == FPGA_P2P_DIR_H2C) {
		if (r->chunk_bytes)
			return -EINVAL;
		*chunk_bytes = 0;
		return 0;
	}
	if (r->slot_bytes > fdev->max_frame_bytes)
		return -EINVAL;
	*chunk_bytes = r->chunk_bytes ? r->chunk_bytes : r->slot_bytes;
	if (*chunk_bytes % FPGA_P2P_SLOT_ALIGN || r->slot_bytes % *chunk_bytes ||
	    r->slot_bytes / *chunk_bytes > FP_MAX_CHUNKS)
		return -EINVAL;
	return 0;
}

/**
 * fp_ring_register() - register a ring of slots in the caller's memory
 * @fp: the open file that will own the ring
 * @r: REGISTER's arguments; @r->handle is set on success
 *
 * Checks the arguments against the header's rules and the card's limits,
 * claims the device's direction, pins and maps the memory through nv-p2p
 * (in the calling process's context, as nv-p2p requires), builds the
 * descriptor ring, sizes the file's event queue and, for transmit, starts
 * the channel. A revocation or a removal during all this undoes it.
 *
 * Context: process, may sleep; takes the file's lock.
 * Return: 0; -EINVAL for arguments the header forbids (including overlap
 * with the file's other ring); -EBUSY when the file or the device already
 * has a ring of that direction; -ENOMEM; -EFAULT when the memory was
 * revoked meanwhile; nv-p2p's errno when pinning fails (-EFAULT for memory
 * not mapped writable); -EIO for an nv-p2p page table or mapping this
 * driver cannot use; -EOPNOTSUPP for completion records on a DMA path
 * that needs syncs (fp_ring_check_status()); -ENODEV when the device is gone; a transmit channel
 * that does not start: fp_h2c_start()'s errors.
 */
int fp_ring_register(struct fp_file *fp, struct fpga_p2p_ring *r)
{
	struct fp_dev *fdev = fp->fdev;
	enum fp_dir dir = r->direction;
	struct fp_ring *ring, *other;
	u32 chunk_bytes, need;
	unsigned long flags;
	bool revoked;
	int ret;

	ret = fp_ring_check(fdev, r, &chunk_bytes);
	if (ret)
		return ret;

	mutex_lock(&fp->lock);
	if (fp->ring[dir]) {
		ret = -EBUSY;
		goto unlock;
	}
	other = fp->ring[!dir];
	if (other && r->addr < other->uaddr + other->bytes &&
	    other->uaddr < r->addr + fp_ring_span(r)) {
		ret = -EINVAL;		/* capture and transmit overlap */
		goto unlock;
	}
	ring = kzalloc(sizeof(*ring), GFP_KERNEL);
	if (!ring) {
		ret = -ENOMEM;
		goto unlock;
	}
	kref_init(&ring->ref);
	spin_lock_init(&ring->lock);
	init_completion(&ring->torn_down);
	INIT_WORK(&ring->unmap_work, fp_ring_unmap_work);
	ring->fp = fp;
	ring->fdev = fdev;
	ring->dir = dir;
	ring->nr_slots = r->nr_slots;
	ring->slot_bytes = r->slot_bytes;
	ring->chunk_bytes = chunk_bytes;
	ring->chunks = dir == FP_C2H ? r->slot_bytes / chunk_bytes : 1;
	ring->uaddr = r->addr;
	ring->bytes = fp_ring_span(r);
	ring->completion = r->flags & FPGA_P2P_RING_COMPLETION;
	ring->state = FP_RING_BUILDING;
	ring->ev_need = dir == FP_C2H ? ring->nr_slots * (ring->chunks + 1) :
			ring->nr_slots;

	mutex_lock(&fdev->lock);
	if (fdev->dead) {
		ret = -ENODEV;
	} else if (fdev->claim[dir]) {
		ret = -EBUSY;
	} else {
		fdev->claim[dir] = ring;
		fdev->building++;
	}
	mutex_unlock(&fdev->lock);
	if (ret) {
		fp_ring_put(ring);
		goto unlock;
	}

	ret = nvidia_p2p_get_pages(ring->uaddr, ring->bytes, &ring->pt,
				   fp_ring_free_callback, ring);
	if (ret) {
		ring->pt = NULL;
		goto abort;
	}
	if (!NVIDIA_P2P_PAGE_TABLE_VERSION_COMPATIBLE(ring->pt)) {
		ret = -EIO;
		goto abort;
	}
	ret = nvidia_p2p_dma_map_pages(fdev->dev, ring->pt, &ring->map,
				       fp_ring_dma_dir(ring));
	if (ret) {
		ring->map = NULL;
		goto abort;
	}
	/* NVIDIA's returns 0 with no mapping when dma_map_sg() fails. */
	if (!ring->map) {
		ret = -ENOMEM;
		goto abort;
	}
	if (!NVIDIA_P2P_DMA_MAPPING_VERSION_COMPATIBLE(ring->map)) {
		ret = -EIO;
		goto abort;
	}
	ret = fp_ring_build(ring);
	if (ret)
		goto abort;
	ret = fp_ring_check_status(ring);
	if (ret)
		goto abort;
	need = ring->ev_need + (other ? other->ev_need : 0);
	ret = fp_evq_reserve(fp, need);
	if (ret)
		goto abort;
	if (dir == FP_H2C) {
		/* Removal waits for us under fdev->lock: no start on a gone device. */
		mutex_lock(&fdev->lock);
		ret = fdev->dead ? -ENODEV : fp_h2c_start(ring);
		mutex_unlock(&fdev->lock);
		if (ret)
			goto abort;
	}

	ring->handle = ++fp->next_handle ? fp->next_handle : ++fp->next_handle;
	r->handle = ring->handle;

	/* Publish, unless the memory or the device went away meanwhile. */
	mutex_lock(&fdev->lock);
	spin_lock_irqsave(&ring->lock, flags);
	revoked = ring->cb_cause != FP_CB_NONE;
	if (!revoked && !fdev->dead)
		ring->state = dir == FP_C2H ? FP_RING_IDLE : FP_RING_RUNNING;
	spin_unlock_irqrestore(&ring->lock, flags);
	if (revoked || fdev->dead) {
		ret = fdev->dead ? -ENODEV : -EFAULT;
	} else {
		spin_lock(&fp->rings_lock);
		fp->ring[dir] = ring;
		spin_unlock(&fp->rings_lock);
	}
	fdev->building--;
	wake_up_all(&fdev->build_wq);
	mutex_unlock(&fdev->lock);
	if (ret) {
		ring->handle = 0;
		fp_ring_destroy(ring);
	}
	mutex_unlock(&fp->lock);
	return ret;

abort:
	mutex_lock(&fdev->lock);
	fdev->building--;
	wake_up_all(&fdev->build_wq);
	mutex_unlock(&fdev->lock);
	fp_ring_destroy(ring);
unlock:
	mutex_unlock(&fp->lock);
	return ret;
}

/**
 * fp_ring_unregister() - unregister a ring of an open file
 * @fp: the open file
 * @handle: the ring's handle
 *
 * Stops its engine, releases the memory (fp_ring_destroy()); works in any
 * state of the ring, revoked, faulted or on a removed device included.
 *
 * Context: process, may sleep; takes the file's lock.
 * Return: 0, or -ENOENT when @handle names no ring of @fp.
 */
int fp_ring_unregister(struct fp_file *fp, u32 handle)
{
	struct fp_ring *ring = NULL;
	int d;

	mutex_lock(&fp->lock);
	spin_lock(&fp->rings_lock);
	for (d = 0; d < FP_DIRS; d++) {
		if (handle && fp->ring[d] && fp->ring[d]->handle == handle) {
			ring = fp->ring[d];
			fp->ring[d] = NULL;
			break;
		}
	}
	spin_unlock(&fp->rings_lock);
	if (ring)
		fp_ring_destroy(ring);
	mutex_unlock(&fp->lock);
	return ring ? 0 : -ENOENT;
}
