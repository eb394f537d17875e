/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The Tegra nv-p2p interface (NVIDIA's `nvidia-p2p` module on Jetson, L4T r36),
 * declared for kernels that do not have NVIDIA's module. nvp2p_shim.ko
 * implements it. The declarations, struct layouts and version macros match
 * NVIDIA's nvidia-oot/include/linux/nv-p2p.h so that a driver built against
 * this header builds unchanged against NVIDIA's (and the other way round).
 *
 * Contract (Tegra semantics):
 *  - nvidia_p2p_get_pages() pins the user pages of [vaddr, vaddr + size) of
 *    current->mm and watches that range; it must run in the owning process.
 *  - free_callback(data) runs when the memory goes away (munmap, process exit,
 *    or a test revocation) and when nvidia_p2p_put_pages() is called before
 *    that; it runs at most once per page table, possibly with the mm's
 *    mmap_lock held. Inside it the driver stops its DMA, then calls
 *    nvidia_p2p_free_dma_mapping() and nvidia_p2p_free_page_table().
 *  - nvidia_p2p_free_page_table() releases the pages and the page array but
 *    not the struct: the caller kfree()s the struct once the callback has run.
 *
 * NVIDIA's header also declares the typedefs nvidia_p2p_page_table_t and
 * nvidia_p2p_dma_mapping_t for these structs; they are left out here (kernel
 * style), so use the struct names, which build against both headers.
 */
#ifndef __NVIDIA_P2P_H__
#define __NVIDIA_P2P_H__

#include <linux/dma-mapping.h>
#include <linux/mmu_notifier.h>

#define NVIDIA_P2P_UNINITIALIZED	0x0
#define NVIDIA_P2P_PINNED		0x1U
#define NVIDIA_P2P_MAPPED		0x2U

#define NVIDIA_P2P_MAJOR_VERSION_MASK	0xffff0000
#define NVIDIA_P2P_MINOR_VERSION_MASK	0x0000ffff

#define NVIDIA_P2P_MAJOR_VERSION(v) \
	(((v) & NVIDIA_P2P_MAJOR_VERSION_MASK) >> 16)

#define NVIDIA_P2P_MINOR_VERSION(v) \
	(((v) & NVIDIA_P2P_MINOR_VERSION_MASK))

static inline bool nvidia_p2p_version_compatible(u32 have, u32 want)
{
	return NVIDIA_P2P_MAJOR_VERSION(have) == NVIDIA_P2P_MAJOR_VERSION(want) &&
	       NVIDIA_P2P_MINOR_VERSION(have) >= NVIDIA_P2P_MINOR_VERSION(want);
}

/* Does the struct at p (with a version field) have a layout v can use? */
#define NVIDIA_P2P_MAJOR_VERSION_MATCHES(p, v) \
	(NVIDIA_P2P_MAJOR_VERSION((p)->version) == NVIDIA_P2P_MAJOR_VERSION(v))

#define NVIDIA_P2P_VERSION_COMPATIBLE(p, v) \
	nvidia_p2p_version_compatible((p)->version, v)

enum nvidia_p2p_page_size_type {
	NVIDIA_P2P_PAGE_SIZE_4KB = 0,
	NVIDIA_P2P_PAGE_SIZE_64KB,
	NVIDIA_P2P_PAGE_SIZE_128KB,
	NVIDIA_P2P_PAGE_SIZE_COUNT
};

/* Pinned user pages of one registration. */
struct nvidia_p2p_page_table {
	u32 version;
	u32 page_size;			/* enum nvidia_p2p_page_size_type */
	u64 size;			/* bytes */
	u32 entries;			/* pages */
	struct page **pages;

	u64 vaddr;
	u32 mapped;			/* NVIDIA_P2P_PINNED | NVIDIA_P2P_MAPPED */

	struct mm_struct *mm;
	struct mmu_notifier mn;
	struct mutex lock;		/* guards mapped and pages */
	void (*free_callback)(void *data);
	void *data;
};

/* The bus addresses of a page table for one device and direction. */
struct nvidia_p2p_dma_mapping {
	u32 version;
	dma_addr_t *hw_address;		/* entries contiguous bus ranges */
	u32 *hw_len;
	u32 entries;

	struct sg_table *sgt;
	struct device *dev;
	struct nvidia_p2p_page_table *page_table;
	enum dma_data_direction direction;
};

#define NVIDIA_P2P_PAGE_TABLE_VERSION	0x00010000

#define NVIDIA_P2P_PAGE_TABLE_VERSION_COMPATIBLE(p) \
	NVIDIA_P2P_VERSION_COMPATIBLE(p, NVIDIA_P2P_PAGE_TABLE_VERSION)

/*
 * Pin [vaddr, vaddr + size) of the calling process (both page aligned) and
 * call free_callback(data) when that memory goes away. Returns 0 and the
 * page table in *page_table, or a negative errno.
 */
int nvidia_p2p_get_pages(u64 vaddr, u64 size,
			 struct nvidia_p2p_page_table **page_table,
			 void (*free_callback)(void *data), void *data);

/*
 * Stop watching the memory; runs free_callback if it has not run yet and
 * returns once no callback for this page table is running.
 */
int nvidia_p2p_put_pages(struct nvidia_p2p_page_table *page_table);

/* Unpin the pages and free the page array (from inside free_callback). */
int nvidia_p2p_free_page_table(struct nvidia_p2p_page_table *page_table);

#define NVIDIA_P2P_DMA_MAPPING_VERSION	0x00010000

#define NVIDIA_P2P_DMA_MAPPING_VERSION_COMPATIBLE(p) \
	NVIDIA_P2P_VERSION_COMPATIBLE(p, NVIDIA_P2P_DMA_MAPPING_VERSION)

/* Map the pinned pages for dev in one direction. */
int nvidia_p2p_dma_map_pages(struct device *dev,
			     struct nvidia_p2p_page_table *page_table,
			     struct nvidia_p2p_dma_mapping **map,
			     enum dma_data_direction direction);

/* Unmap and free a mapping. */
int nvidia_p2p_dma_unmap_pages(struct nvidia_p2p_dma_mapping *map);

/* The same, for use inside free_callback. */
int nvidia_p2p_free_dma_mapping(struct nvidia_p2p_dma_mapping *dma_mapping);

#endif /* __NVIDIA_P2P_H__ */
