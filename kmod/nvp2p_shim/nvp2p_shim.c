// SPDX-License-Identifier: GPL-2.0
/*
 * nvp2p_shim: the Tegra nv-p2p interface (linux/nv-p2p.h) for kernels that
 * do not have NVIDIA's nvidia-p2p module, with the same semantics as on a
 * Jetson: get_pages pins user pages of the calling process and watches them
 * with an mmu notifier; when the memory goes away (munmap, madvise, process
 * exit) the registration's free_callback runs, once; put_pages runs it too if
 * it has not run yet; free_page_table unpins; dma_map_pages builds an sg table
 * from the pages and maps it for the given device.
 *
 * Beyond NVIDIA's module, for tests: debugfs nvp2p_shim/stats (live page
 * tables, pinned pages, mappings, notifiers, callbacks by cause),
 * nvp2p_shim/registrations (one line per watched registration) and
 * nvp2p_shim/revoke (write "all", "<pid>" or "<pid> <vaddr>" to run the
 * callbacks of those registrations now, as if their memory had gone away)
 * and nvp2p_shim/fail_dma_map (the next N dma_map_pages calls fail the way
 * NVIDIA's does when dma_map_sg() fails: return 0 with *dma_mapping NULL).
 *
 * Differences from NVIDIA's implementation, all on the safe side:
 *  - pages are pinned with pin_user_pages_fast(FOLL_WRITE | FOLL_LONGTERM)
 *    instead of get_user_pages (the kernel's API for long-term DMA pins);
 *  - a callback fires when an invalidation overlaps any part of the range
 *    (NVIDIA: when it covers the start address), and not for invalidations
 *    that leave the pages in place (mprotect, fork's write protection, soft
 *    dirty tracking);
 *  - the notifier is one shared per mm (mmu_notifier_get/put) and the
 *    registration state lives beside the page table, so the callback never
 *    runs twice and put_pages after a callback is harmless;
 *  - nothing is allocated while a lock that the callback path takes is held.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/debugfs.h>
#include <linux/mm.h>
#include <linux/mmu_notifier.h>
#include <linux/module.h>
#include <linux/sched.h>
#include <linux/sched/mm.h>
#include <linux/scatterlist.h>
#include <linux/seq_file.h>
#include <linux/slab.h>
#include <linux/srcu.h>
#include <linux/uaccess.h>
#include <linux/nv-p2p.h>

/* Private bit of page_table->mapped: a dma_map_pages() is under way. */
#define SHIM_MAPPING_BUSY	0x80000000U

/* Pages pinned per pin_user_pages_fast() call. */
#define SHIM_PIN_BATCH		512

enum shim_state {
	SHIM_PINNING,	/* get_pages is pinning; the callback must not run */
	SHIM_ARMED,	/* watched: the next invalidation fires the callback */
	SHIM_FIRED,	/* the callback was claimed; off the list */
};

enum shim_cause {
	SHIM_CAUSE_UNMAP,
	SHIM_CAUSE_EXIT,
	SHIM_CAUSE_PUT,
	SHIM_CAUSE_REVOKE,
	SHIM_CAUSES
};

/*
 * One registration. The page table comes first: the caller frees the struct
 * it got with kfree(), which frees all of this. The shim touches nothing of
 * it after the free callback has been called.
 */
struct shim_table {
	struct nvidia_p2p_page_table pt;
	struct list_head node;		/* shim_tables, under shim_lock */
	struct mmu_notifier *mn;	/* one reference on the mm's notifier */
	enum shim_state state;
	bool invalidated;		/* hit while SHIM_PINNING */
	pid_t tgid;
};

/* The per-mm notifier shared by all registrations of one process. */
struct shim_mm {
	struct mmu_notifier mn;
};

static LIST_HEAD(shim_tables);
static DEFINE_SPINLOCK(shim_lock);	/* shim_tables and shim_table.state */
/* Readers: a running free callback. put_pages waits for them. */
DEFINE_STATIC_SRCU(shim_srcu);

static atomic_long_t shim_tables_live;
static atomic_long_t shim_pinned_pages;
static atomic_long_t shim_mappings_live;
static atomic_long_t shim_notifiers_live;
static atomic_long_t shim_get_ok;
static atomic_long_t shim_get_failed;
static atomic_long_t shim_callbacks[SHIM_CAUSES];

static struct dentry *shim_debugfs;
/* dma_map_pages calls still to fail (debugfs fail_dma_map). */
static atomic_t shim_fail_dma_map = ATOMIC_INIT(0);
static atomic_long_t shim_dma_map_failed;

static struct shim_table *to_shim(struct nvidia_p2p_page_table *pt)
{
	return container_of(pt, struct shim_table, pt);
}

static bool shim_overlaps(struct shim_table *st, unsigned long start,
			  unsigned long end)
{
	return st->pt.vaddr < end && start < st->pt.vaddr + st->pt.size;
}

/* Invalidations after which the pinned pages no longer back the range. */
static bool shim_event_revokes(enum mmu_notifier_event event)
{
	switch (event) {
	case MMU_NOTIFY_PROTECTION_VMA:
	case MMU_NOTIFY_PROTECTION_PAGE:
	case MMU_NOTIFY_SOFT_DIRTY:
	case MMU_NOTIFY_EXCLUSIVE:
		return false;
	default:
		return true;
	}
}

/*
 * Claim a registration for its callback (under shim_lock, inside a
 * shim_srcu read section): off the list, state FIRED.
 */
static void shim_claim(struct shim_table *st, enum shim_cause cause)
{
	lockdep_assert_held(&shim_lock);
	st->state = SHIM_FIRED;
	list_del_init(&st->node);
	atomic_long_inc(&shim_callbacks[cause]);
}

/*
 * Run the free callbacks of every armed registration of @mm that overlaps
 * [start, end) (all of them for a NULL @mm and any pid, or those of @tgid
 * when it is not 0), one at a time. Returns how many ran.
 */
static int shim_fire(struct mm_struct *mm, pid_t tgid, unsigned long start,
		     unsigned long end, enum shim_cause cause)
{
	int fired = 0;

	for (;;) {
		void (*cb)(void *data) = NULL;
		struct mmu_notifier *mn = NULL;
		struct shim_table *st;
		void *data = NULL;
		int idx;

		idx = srcu_read_lock(&shim_srcu);
		spin_lock(&shim_lock);
		list_for_each_entry(st, &shim_tables, node) {
			if (mm && st->pt.mm != mm)
				continue;
			if (tgid && st->tgid != tgid)
				continue;
			if (!shim_overlaps(st, start, end))
				continue;
			if (st->state == SHIM_PINNING) {
				st->invalidated = true;
				continue;
			}
			shim_claim(st, cause);
			cb = st->pt.free_callback;
			data = st->pt.data;
			mn = st->mn;
			break;
		}
		spin_unlock(&shim_lock);
		if (!cb) {
			srcu_read_unlock(&shim_srcu, idx);
			return fired;
		}
		cb(data);
		srcu_read_unlock(&shim_srcu, idx);
		mmu_notifier_put(mn);
		fired++;
	}
}

static int shim_invalidate_range_start(struct mmu_notifier *mn,
				       const struct mmu_notifier_range *range)
{
	struct shim_table *st;
	bool hit = false;

	if (!shim_event_revokes(range->event))
		return 0;
	if (!mmu_notifier_range_blockable(range)) {
		/* The callback sleeps: ask the caller (OOM reaper) to retry. */
		spin_lock(&shim_lock);
		list_for_each_entry(st, &shim_tables, node)
			if (st->pt.mm == range->mm &&
			    shim_overlaps(st, range->start, range->end))
				hit = true;
		spin_unlock(&shim_lock);
		return hit ? -EAGAIN : 0;
	}
	shim_fire(range->mm, 0, range->start, range->end, SHIM_CAUSE_UNMAP);
	return 0;
}

static void shim_release(struct mmu_notifier *mn, struct mm_struct *mm)
{
	shim_fire(mm, 0, 0, ULONG_MAX, SHIM_CAUSE_EXIT);
}

static struct mmu_notifier *shim_alloc_notifier(struct mm_struct *mm)
{
	struct shim_mm *sm = kzalloc(sizeof(*sm), GFP_KERNEL);

	if (!sm)
		return ERR_PTR(-ENOMEM);
	atomic_long_inc(&shim_notifiers_live);
	return &sm->mn;
}

static void shim_free_notifier(struct mmu_notifier *mn)
{
	kfree(container_of(mn, struct shim_mm, mn));
	atomic_long_dec(&shim_notifiers_live);
}

static const struct mmu_notifier_ops shim_mn_ops = {
	.release = shim_release,
	.invalidate_range_start = shim_invalidate_range_start,
	.alloc_notifier = shim_alloc_notifier,
	.free_notifier = shim_free_notifier,
};

int nvidia_p2p_get_pages(u64 vaddr, u64 size,
			 struct nvidia_p2p_page_table **page_table,
			 void (*free_callback)(void *data), void *data)
{
	struct mm_struct *mm = current->mm;
	struct mmu_notifier *mn;
	struct shim_table *st;
	struct page **pages;
	unsigned long nr, pinned = 0;
	bool invalidated;
	int ret;

	if (!page_table || !free_callback || !mm)
		return -EINVAL;
	if (!size || !PAGE_ALIGNED(vaddr) || !PAGE_ALIGNED(size) ||
	    vaddr + size < vaddr)
		return -EINVAL;
	nr = size >> PAGE_SHIFT;
	if (nr > INT_MAX || nr > totalram_pages())
		return -ENOMEM;
	if (!access_ok((void __user *)(uintptr_t)vaddr, size))
		return -EFAULT;

	st = kzalloc(sizeof(*st), GFP_KERNEL);
	if (!st)
		return -ENOMEM;
	pages = kvmalloc_array(nr, sizeof(*pages), GFP_KERNEL | __GFP_NOWARN);
	if (!pages) {
		ret = -ENOMEM;
		goto free_st;
	}
	mn = mmu_notifier_get(&shim_mn_ops, mm);
	if (IS_ERR(mn)) {
		ret = PTR_ERR(mn);
		goto free_pages;
	}

	st->mn = mn;
	st->tgid = task_tgid_nr(current);
	st->pt.version = NVIDIA_P2P_PAGE_TABLE_VERSION;
	st->pt.page_size = NVIDIA_P2P_PAGE_SIZE_4KB;
	st->pt.size = size;
	st->pt.vaddr = vaddr;
	st->pt.mm = mm;
	st->pt.free_callback = free_callback;
	st->pt.data = data;
	mutex_init(&st->pt.lock);

	/* Watch the range before pinning so that no invalidation is missed. */
	st->state = SHIM_PINNING;
	spin_lock(&shim_lock);
	list_add_tail(&st->node, &shim_tables);
	spin_unlock(&shim_lock);

	while (pinned < nr) {
		int batch = min_t(unsigned long, nr - pinned, SHIM_PIN_BATCH);

		ret = pin_user_pages_fast(vaddr + (pinned << PAGE_SHIFT), batch,
					  FOLL_WRITE | FOLL_LONGTERM,
					  pages + pinned);
		if (ret <= 0) {
			ret = ret ? ret : -EFAULT;
			goto unwatch;
		}
		pinned += ret;
		if (fatal_signal_pending(current)) {
			ret = -EINTR;
			goto unwatch;
		}
	}

	spin_lock(&shim_lock);
	invalidated = st->invalidated;
	if (invalidated)
		list_del_init(&st->node);
	else
		st->state = SHIM_ARMED;
	spin_unlock(&shim_lock);
	if (invalidated) {
		/* The memory went away while it was being pinned. */
		ret = -EFAULT;
		goto unpin;
	}

	st->pt.pages = pages;
	st->pt.entries = nr;
	st->pt.mapped = NVIDIA_P2P_PINNED;
	atomic_long_add(nr, &shim_pinned_pages);
	atomic_long_inc(&shim_tables_live);
	atomic_long_inc(&shim_get_ok);
	*page_table = &st->pt;
	return 0;

unwatch:
	spin_lock(&shim_lock);
	list_del_init(&st->node);
	spin_unlock(&shim_lock);
unpin:
	if (pinned)
		unpin_user_pages(pages, pinned);
	mmu_notifier_put(mn);
free_pages:
	kvfree(pages);
free_st:
	kfree(st);
	atomic_long_inc(&shim_get_failed);
	return ret;
}
EXPORT_SYMBOL_GPL(nvidia_p2p_get_pages);

int nvidia_p2p_put_pages(struct nvidia_p2p_page_table *page_table)
{
	void (*cb)(void *data) = NULL;
	struct shim_table *st;
	struct mmu_notifier *mn = NULL;
	void *data = NULL;
	int idx;

	if (!page_table)
		return -EINVAL;
	st = to_shim(page_table);

	idx = srcu_read_lock(&shim_srcu);
	spin_lock(&shim_lock);
	if (st->state == SHIM_ARMED) {
		shim_claim(st, SHIM_CAUSE_PUT);
		cb = st->pt.free_callback;
		data = st->pt.data;
		mn = st->mn;
	}
	spin_unlock(&shim_lock);
	if (cb) {
		cb(data);
		srcu_read_unlock(&shim_srcu, idx);
		mmu_notifier_put(mn);
		return 0;
	}
	srcu_read_unlock(&shim_srcu, idx);
	/* Another path claimed the callback: wait until it has returned. */
	synchronize_srcu(&shim_srcu);
	return 0;
}
EXPORT_SYMBOL_GPL(nvidia_p2p_put_pages);

int nvidia_p2p_free_page_table(struct nvidia_p2p_page_table *page_table)
{
	struct page **pages = NULL;
	u32 entries = 0;

	if (!page_table)
		return 0;

	mutex_lock(&page_table->lock);
	WARN(page_table->mapped & NVIDIA_P2P_MAPPED,
	     "nvp2p_shim: page table freed while still DMA-mapped\n");
	if (page_table->mapped & NVIDIA_P2P_PINNED) {
		pages = page_table->pages;
		entries = page_table->entries;
		page_table->pages = NULL;
		page_table->mapped &= ~NVIDIA_P2P_PINNED;
	}
	mutex_unlock(&page_table->lock);

	if (pages) {
		/* The device may have written them. */
		unpin_user_pages_dirty_lock(pages, entries, true);
		kvfree(pages);
		atomic_long_sub(entries, &shim_pinned_pages);
		atomic_long_dec(&shim_tables_live);
	}
	return 0;
}
EXPORT_SYMBOL_GPL(nvidia_p2p_free_page_table);

static void shim_free_map(struct nvidia_p2p_dma_mapping *map)
{
	if (!map)
		return;
	kfree(map->hw_address);
	kfree(map->hw_len);
	if (map->sgt) {
		sg_free_table(map->sgt);
		kfree(map->sgt);
	}
	kfree(map);
}

/* The largest segment the DMA layer maps for @dev, whole pages. */
static unsigned int shim_max_segment(struct device *dev)
{
	size_t max = min_t(size_t, dma_max_mapping_size(dev), UINT_MAX);

	return max_t(size_t, max & PAGE_MASK, PAGE_SIZE);
}

int nvidia_p2p_dma_map_pages(struct device *dev,
			     struct nvidia_p2p_page_table *page_table,
			     struct nvidia_p2p_dma_mapping **dma_mapping,
			     enum dma_data_direction direction)
{
	struct nvidia_p2p_dma_mapping *map;
	struct page **snap;
	struct scatterlist *sg;
	u32 nr, i;
	int ret;

	if (!dev || !page_table || !dma_mapping || !valid_dma_direction(direction))
		return -EINVAL;
	nr = READ_ONCE(page_table->entries);
	if (!nr)
		return -EINVAL;
	/* As NVIDIA's when dma_map_sg() maps nothing: no mapping, no error. */
	if (atomic_add_unless(&shim_fail_dma_map, -1, 0)) {
		atomic_long_inc(&shim_dma_map_failed);
		*dma_mapping = NULL;
		return 0;
	}

	map = kzalloc(sizeof(*map), GFP_KERNEL);
	snap = kvmalloc_array(nr, sizeof(*snap), GFP_KERNEL | __GFP_NOWARN);
	if (map)
		map->sgt = kzalloc(sizeof(*map->sgt), GFP_KERNEL);
	if (!map || !map->sgt || !snap) {
		ret = -ENOMEM;
		goto free;
	}

	/*
	 * Hold our own reference on each page while mapping, so that the
	 * mapping can be built without the lock (the callback path takes it,
	 * and building allocates memory) even if the callback unpins meanwhile.
	 */
	mutex_lock(&page_table->lock);
	if (!(page_table->mapped & NVIDIA_P2P_PINNED)) {
		ret = -EFAULT;
		goto unlock_free;
	}
	if (page_table->mapped & (NVIDIA_P2P_MAPPED | SHIM_MAPPING_BUSY)) {
		ret = -EBUSY;
		goto unlock_free;
	}
	memcpy(snap, page_table->pages, nr * sizeof(*snap));
	for (i = 0; i < nr; i++)
		get_page(snap[i]);
	page_table->mapped |= SHIM_MAPPING_BUSY;
	mutex_unlock(&page_table->lock);

	/*
	 * NVIDIA's merges contiguous pages without limit. Under bounce
	 * buffering (the tests' swiotlb=force) a segment larger than what
	 * swiotlb maps at once (256 KiB) cannot be mapped at all, so the shim
	 * keeps each segment within what the DMA layer can map; with an IOMMU
	 * or direct mapping that limit is not reached.
	 */
	ret = sg_alloc_table_from_pages_segment(map->sgt, snap, nr, 0,
						page_table->size,
						shim_max_segment(dev),
						GFP_KERNEL);
	if (ret)
		goto put_snap;
	ret = dma_map_sgtable(dev, map->sgt, direction, 0);
	if (ret)
		goto put_snap;
	map->hw_address = kcalloc(map->sgt->nents, sizeof(*map->hw_address),
				  GFP_KERNEL);
	map->hw_len = kcalloc(map->sgt->nents, sizeof(*map->hw_len),
			      GFP_KERNEL);
	if (!map->hw_address || !map->hw_len) {
		ret = -ENOMEM;
		goto unmap;
	}
	for_each_sgtable_dma_sg(map->sgt, sg, i) {
		map->hw_address[i] = sg_dma_address(sg);
		map->hw_len[i] = sg_dma_len(sg);
	}
	map->entries = map->sgt->nents;
	map->version = NVIDIA_P2P_DMA_MAPPING_VERSION;
	map->dev = dev;
	map->page_table = page_table;
	map->direction = direction;

	mutex_lock(&page_table->lock);
	page_table->mapped &= ~SHIM_MAPPING_BUSY;
	if (!(page_table->mapped & NVIDIA_P2P_PINNED)) {
		/* Revoked while mapping. */
		mutex_unlock(&page_table->lock);
		ret = -EFAULT;
		goto unmap;
	}
	page_table->mapped |= NVIDIA_P2P_MAPPED;
	mutex_unlock(&page_table->lock);

	for (i = 0; i < nr; i++)
		put_page(snap[i]);
	kvfree(snap);
	atomic_long_inc(&shim_mappings_live);
	*dma_mapping = map;
	return 0;

unmap:
	dma_unmap_sgtable(dev, map->sgt, direction, 0);
put_snap:
	mutex_lock(&page_table->lock);
	page_table->mapped &= ~SHIM_MAPPING_BUSY;
	mutex_unlock(&page_table->lock);
	for (i = 0; i < nr; i++)
		put_page(snap[i]);
	goto free;
unlock_free:
	mutex_unlock(&page_table->lock);
free:
	kvfree(snap);
	shim_free_map(map);
	return ret;
}
EXPORT_SYMBOL_GPL(nvidia_p2p_dma_map_pages);

int nvidia_p2p_dma_unmap_pages(struct nvidia_p2p_dma_mapping *map)
{
	struct nvidia_p2p_page_table *pt;
	bool mapped;

	if (!map)
		return -EINVAL;
	pt = map->page_table;
	if (!pt)
		return -EFAULT;

	mutex_lock(&pt->lock);
	mapped = pt->mapped & NVIDIA_P2P_MAPPED;
	if (mapped) {
		dma_unmap_sgtable(map->dev, map->sgt, map->direction, 0);
		pt->mapped &= ~NVIDIA_P2P_MAPPED;
	}
	mutex_unlock(&pt->lock);
	if (mapped) {
		shim_free_map(map);
		atomic_long_dec(&shim_mappings_live);
	}
	return 0;
}
EXPORT_SYMBOL_GPL(nvidia_p2p_dma_unmap_pages);

int nvidia_p2p_free_dma_mapping(struct nvidia_p2p_dma_mapping *dma_mapping)
{
	return nvidia_p2p_dma_unmap_pages(dma_mapping);
}
EXPORT_SYMBOL_GPL(nvidia_p2p_free_dma_mapping);

/* --- debugfs ------------------------------------------------------------ */

static int shim_stats_show(struct seq_file *m, void *unused)
{
	unsigned long watched = 0;
	struct shim_table *st;

	spin_lock(&shim_lock);
	list_for_each_entry(st, &shim_tables, node)
		watched++;
	spin_unlock(&shim_lock);

	seq_printf(m, "page_tables %ld\n", atomic_long_read(&shim_tables_live));
	seq_printf(m, "pinned_pages %ld\n", atomic_long_read(&shim_pinned_pages));
	seq_printf(m, "mappings %ld\n", atomic_long_read(&shim_mappings_live));
	seq_printf(m, "notifiers %ld\n", atomic_long_read(&shim_notifiers_live));
	seq_printf(m, "watched %lu\n", watched);
	seq_printf(m, "get_pages_ok %ld\n", atomic_long_read(&shim_get_ok));
	seq_printf(m, "get_pages_failed %ld\n", atomic_long_read(&shim_get_failed));
	seq_printf(m, "callbacks_unmap %ld\n",
		   atomic_long_read(&shim_callbacks[SHIM_CAUSE_UNMAP]));
	seq_printf(m, "callbacks_exit %ld\n",
		   atomic_long_read(&shim_callbacks[SHIM_CAUSE_EXIT]));
	seq_printf(m, "callbacks_put %ld\n",
		   atomic_long_read(&shim_callbacks[SHIM_CAUSE_PUT]));
	seq_printf(m, "callbacks_revoke %ld\n",
		   atomic_long_read(&shim_callbacks[SHIM_CAUSE_REVOKE]));
	seq_printf(m, "dma_map_failed %ld\n",
		   atomic_long_read(&shim_dma_map_failed));
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(shim_stats);

static int shim_registrations_show(struct seq_file *m, void *unused)
{
	struct shim_table *st;

	spin_lock(&shim_lock);
	list_for_each_entry(st, &shim_tables, node)
		seq_printf(m, "pid %d vaddr 0x%llx size %llu state %s\n",
			   st->tgid, st->pt.vaddr, st->pt.size,
			   st->state == SHIM_ARMED ? "armed" : "pinning");
	spin_unlock(&shim_lock);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(shim_registrations);

/* "all", "<pid>" or "<pid> <vaddr>": run those callbacks now. */
static ssize_t shim_revoke_write(struct file *file, const char __user *ubuf,
				 size_t len, loff_t *ppos)
{
	unsigned long long vaddr = 0;
	char buf[64];
	int pid = 0, n, fired;

	if (len == 0 || len >= sizeof(buf))
		return -EINVAL;
	if (copy_from_user(buf, ubuf, len))
		return -EFAULT;
	buf[len] = '\0';

	if (sysfs_streq(buf, "all")) {
		fired = shim_fire(NULL, 0, 0, ULONG_MAX, SHIM_CAUSE_REVOKE);
	} else {
		n = sscanf(buf, "%d %llx", &pid, &vaddr);
		if (n < 1 || pid <= 0)
			return -EINVAL;
		if (n == 2)
			fired = shim_fire(NULL, pid, vaddr, vaddr + 1,
					  SHIM_CAUSE_REVOKE);
		else
			fired = shim_fire(NULL, pid, 0, ULONG_MAX,
					  SHIM_CAUSE_REVOKE);
	}
	return fired ? len : -ESRCH;
}

static const struct file_operations shim_revoke_fops = {
	.owner = THIS_MODULE,
	.write = shim_revoke_write,
	.llseek = noop_llseek,
};

static int __init nvp2p_shim_init(void)
{
	shim_debugfs = debugfs_create_dir("nvp2p_shim", NULL);
	debugfs_create_file("stats", 0444, shim_debugfs, NULL, &shim_stats_fops);
	debugfs_create_file("registrations", 0444, shim_debugfs, NULL,
			    &shim_registrations_fops);
	debugfs_create_file("revoke", 0200, shim_debugfs, NULL,
			    &shim_revoke_fops);
	debugfs_create_atomic_t("fail_dma_map", 0600, shim_debugfs,
				&shim_fail_dma_map);
	return 0;
}

static void __exit nvp2p_shim_exit(void)
{
	debugfs_remove_recursive(shim_debugfs);
	/* Let the notifier core finish freeing our per-mm notifiers. */
	mmu_notifier_synchronize();
	if (!list_empty(&shim_tables) || atomic_long_read(&shim_tables_live))
		pr_err("unloaded with %ld page tables still pinned\n",
		       atomic_long_read(&shim_tables_live));
}

module_init(nvp2p_shim_init);
module_exit(nvp2p_shim_exit);

MODULE_DESCRIPTION("Tegra nv-p2p interface for kernels without NVIDIA's nvidia-p2p module");
MODULE_LICENSE("GPL");
