// SPDX-License-Identifier: GPL-2.0
/*
 * fpga_p2p model: a register-level software model of the radar FPGA card,
 * so that the same driver code runs against it as against the card. Only in
 * test builds (FPGA_P2P_MODEL=1); the production module has none of it.
 *
 * What is modelled (register map: fpga_p2p_regs.h, board/fpga/registers.md):
 *  - XDMA H2C and C2H stream channels: Run, busy, sticky status with its
 *    read-clear alias, completed-descriptor count (reset on Run), interrupt
 *    enable masks, descriptor credit mode (credits cleared when Run drops,
 *    one consumed per descriptor), descriptors fetched from host memory and
 *    checked (magic, length, alignment), C2H writeback records with EOP, the
 *    STOP and COMPLETED descriptor bits, errors that halt the channel;
 *  - the IRQ block: channel request/enable; an interrupt is raised on each
 *    rising edge of a channel's request, like an MSI;
 *  - the user block: frame sources (test pattern of board/fpga/test-pattern.md,
 *    playback of frames uploaded over H2C, a noise-only "ADC"), pacing by
 *    chunk period, frame credits and drop-at-source decided at frame start,
 *    the metadata FIFO, the H2C tag FIFO and sink.
 *
 * DMA goes the way a device's does: bus address -> physical address -> page,
 * written through the kernel mapping of that page, so that a driver that lets
 * the engine write after the memory was freed is caught by KASAN.
 *
 * The "hardware" runs in two kernel threads per model, one per XDMA channel
 * (the card's engines are independent). The interrupt is a real
 * Linux IRQ (a descriptor on the dummy irq chip with handle_simple_irq),
 * raised from hard IRQ context through an irq_work, so the driver's
 * request_irq() and handler run exactly as for the card.
 *
 * debugfs fpga_p2p_model/: "add" (write anything: one more model device),
 * "remove" (write an id: tear that device down, even with files open), and
 * per device N/: drop_every, short_every, corrupt_every (fault injection, 0 =
 * off), c2h_error and h2c_error (write 1: the next descriptor fails with a
 * descriptor error), stats, detections (the last detection record received
 * on the transmit channel, as received: what the card would forward on its
 * host link; a test decodes it).
 */
#define pr_fmt(fmt) "fpga_p2p model: " fmt

#include <linux/bitfield.h>
#include <linux/crc32.h>
#include <linux/debugfs.h>
#include <linux/dma-direct.h>
#include <linux/dma-mapping.h>
#include <linux/highmem.h>
#include <linux/hrtimer.h>
#include <linux/irq.h>
#include <linux/irq_work.h>
#include <linux/kthread.h>
#include <linux/platform_device.h>
#include <linux/seq_file.h>
#include <linux/slab.h>
#include <linux/vmalloc.h>

#include "fpga_p2p_drv.h"

#define FP_MODEL_META_DEPTH		64
#define FP_MODEL_TAG_DEPTH		64
#define FP_MODEL_PB_FRAMES		8
#define FP_MODEL_PB_FRAME_BYTES		(4U << 20)
#define FP_MODEL_DET_BYTES		(64U << 10)	/* detection list memory */
#define FP_MODEL_MAX_FRAME_BYTES	(64U << 20)
#define FP_MODEL_XDMA_VERSION		0x06	/* identifier bits 7:0 */
/* The model resynchronises its clock rather than lag more than this. */
#define FP_MODEL_MAX_LAG_NS		(100 * NSEC_PER_MSEC)
/* Bytes an H2C step moves at most, so capture keeps its pace. */
#define FP_MODEL_H2C_STEP		(64U << 10)
/* The first bit of each error field of the status register. */
#define FP_MODEL_READ_ERROR		BIT(9)
#define FP_MODEL_WRITE_ERROR		BIT(14)
#define FP_MODEL_DESC_ERROR		BIT(19)

struct fp_mchan {
	u32 control;
	u32 int_mask;
	u32 status;			/* sticky bits 23:1 */
	u32 completed;
	u32 desc_lo;
	u32 desc_hi;
	u32 adj;
	u32 credits;
	bool running;			/* Run set and not halted */
	bool busy;			/* a transfer is under way */
	bool irq_line;			/* request level, for edges */
	bool have_desc;
	u64 next;			/* bus address of the next descriptor */
	u32 d_ctrl;			/* the current descriptor */
	u32 d_len;
	u64 d_src;
	u64 d_dst;
	u64 d_next;
	u32 d_done;			/* its bytes moved so far */
	atomic_t inject_error;
};

struct fp_mmeta {
	u64 seq;
	u64 ts;
	u32 bytes;
	u32 crc;
	u32 flags;
	u32 dropped;
};

/* Frame source state: the frame in progress. */
struct fp_msrc {
	bool active;
	u32 gen;			/* bumped when ENABLE drops */
	u32 source;
	u64 next_seq;
	u64 seq;
	u64 ts;
	u32 frame_bytes;
	u32 chunk_bytes;
	u32 valid_bytes;		/* < frame_bytes for a short frame */
	u32 corrupt_at;			/* byte flipped after the CRC, or ~0 */
	u32 off;			/* bytes of the frame streamed */
	u32 chunk_off;
	u32 crc;			/* running, not yet inverted */
	u32 flags;
	u32 dropped;			/* drops since the last delivered frame */
	ktime_t next_due;		/* when the next chunk may go */
	u32 pb_index;
};

struct fp_model {
	int id;
	struct list_head node;
	struct platform_device *pdev;
	struct fp_dev *fdev;
	int irq;
	struct irq_work irq_work;
	struct task_struct *c2h_thread;
	struct task_struct *h2c_thread;
	bool c2h_kick;
	bool h2c_kick;

	spinlock_t lock;		/* everything the registers reach */

	struct fp_mchan h2c;
	struct fp_mchan c2h;
	u32 irq_chan_en;
	u32 irq_user_en;
	u32 chan_vec[2];
	u32 credit_mode;

	u32 scratch;
	u32 ctrl;
	u32 frame_bytes;
	u32 chunk_bytes;
	u32 chunk_period_ns;
	u32 playback_count;
	u32 frame_credits;
	u32 drops_no_slot;
	u32 drops_fault;
	u32 frames_sent;
	bool meta_overflow;
	struct fp_mmeta meta[FP_MODEL_META_DEPTH];
	u32 meta_head;
	u32 meta_count;
	u32 tags[FP_MODEL_TAG_DEPTH][2];	/* tag word, bytes */
	u32 tag_head;
	u32 tag_count;
	u32 tag_bytes;
	u32 h2c_packets;
	u32 h2c_last_tag;
	u32 h2c_last_bytes;
	u32 h2c_last_crc;
	u32 h2c_errors;

	struct fp_msrc src;

	/* H2C sink: the packet in progress. */
	bool pkt_active;
	u32 pkt_tag;
	u32 pkt_expect;
	u32 pkt_got;
	u32 pkt_crc;

	void *pb[FP_MODEL_PB_FRAMES];	/* playback memory, lazily */
	u32 pb_len[FP_MODEL_PB_FRAMES];

	/*
	 * Detection list memory: det_rx fills as a FPGA_P2P_TX_DETECTIONS
	 * packet arrives, det_last holds the last complete one (under lock).
	 */
	u8 *det_rx;
	u8 *det_last;
	u32 det_last_len;
	u32 det_records;

	/* Fault injection (debugfs). */
	u32 drop_every;
	u32 short_every;
	u32 corrupt_every;

	u64 st_chunks;
	u64 st_frames;
	u64 st_stalls;
	u64 st_protocol_errors;
	struct dentry *dbg;
};

static LIST_HEAD(fp_models);
static DEFINE_MUTEX(fp_models_lock);	/* fp_models */
static int fp_model_next_id;
static struct dentry *fp_model_dbg;

static void fp_model_kick(struct fp_model *m, bool c2h)
{
	if (c2h) {
		WRITE_ONCE(m->c2h_kick, true);
		wake_up_process(m->c2h_thread);
	} else {
		WRITE_ONCE(m->h2c_kick, true);
		wake_up_process(m->h2c_thread);
	}
}

/* --- interrupts ---------------------------------------------------------- */

static void fp_model_irq_work(struct irq_work *w)
{
	struct fp_model *m = container_of(w, struct fp_model, irq_work);

	generic_handle_irq(m->irq);
}

static bool fp_model_chan_req(struct fp_model *m, struct fp_mchan *ch, u32 bit)
{
	return (m->irq_chan_en & bit) &&
	       (ch->status & ch->int_mask & ch->control & XDMA_ST_CLEARABLE);
}

/* Raise the interrupt on a rising edge of a channel request. m->lock held. */
static void fp_model_update_irq(struct fp_model *m)
{
	bool fire = false;
	bool req;

	req = fp_model_chan_req(m, &m->h2c, FP_IRQ_H2C0);
	fire |= req && !m->h2c.irq_line;
	m->h2c.irq_line = req;
	req = fp_model_chan_req(m, &m->c2h, FP_IRQ_C2H0);
	fire |= req && !m->c2h.irq_line;
	m->c2h.irq_line = req;
	if (fire)
		irq_work_queue(&m->irq_work);
}

/* --- DMA: bus address -> physical -> page, as a device does -------------- */

/* Call @fn on each page-sized piece of host memory at bus address @addr. */
static int fp_model_dma(struct fp_model *m, u64 addr, u32 len,
			int (*fn)(struct fp_model *m, void *kaddr, u32 len,
				  void *ctx),
			void *ctx)
{
	while (len) {
		phys_addr_t phys = dma_to_phys(&m->pdev->dev, addr);
		u32 off = offset_in_page(phys);
		u32 n = min_t(u32, len, PAGE_SIZE - off);
		void *kaddr;
		int ret;

		if (!pfn_valid(PHYS_PFN(phys)))
			return -EFAULT;
		kaddr = kmap_local_page(pfn_to_page(PHYS_PFN(phys)));
		ret = fn(m, kaddr + off, n, ctx);
		kunmap_local(kaddr);
		if (ret)
			return ret;
		addr += n;
		len -= n;
	}
	return 0;
}

static int fp_model_copy_out(struct fp_model *m, void *kaddr, u32 len,
			     void *ctx)
{
	void **p = ctx;

	memcpy(kaddr, *p, len);
	*p += len;
	return 0;
}

static int fp_model_copy_in(struct fp_model *m, void *kaddr, u32 len,
			    void *ctx)
{
	void **p = ctx;

	memcpy(*p, kaddr, len);
	*p += len;
	return 0;
}

static int fp_model_dma_write(struct fp_model *m, u64 addr, const void *buf,
			      u32 len)
{
	void *p = (void *)buf;

	return fp_model_dma(m, addr, len, fp_model_copy_out, &p);
}

static int fp_model_dma_read(struct fp_model *m, u64 addr, void *buf, u32 len)
{
	void *p = buf;

	return fp_model_dma(m, addr, len, fp_model_copy_in, &p);
}

/* --- XDMA channels ------------------------------------------------------- */

/* The channel stops with an error. m->lock held. */
static void fp_model_halt(struct fp_model *m, struct fp_mchan *ch, u32 bits)
{
	ch->status |= bits;
	ch->running = false;
	ch->have_desc = false;
	fp_model_update_irq(m);
}

/*
 * Fetch the next descriptor if the channel has none; false if it cannot
 * (stopped, no credit, or an error that halted it). m->lock held.
 */
static bool fp_model_fetch(struct fp_model *m, struct fp_mchan *ch, u32 cbit)
{
	struct xdma_desc d;

	if (!ch->running)
		return false;
	if (ch->have_desc)
		return true;
	if ((m->credit_mode & cbit) && !ch->credits) {
		m->st_stalls++;
		return false;
	}
	if (ch->next % sizeof(d)) {
		fp_model_halt(m, ch, XDMA_ST_ALIGN_MISMATCH);
		return false;
	}
	if (fp_model_dma_read(m, ch->next, &d, sizeof(d))) {
		fp_model_halt(m, ch, FP_MODEL_DESC_ERROR);
		return false;
	}
	if (atomic_xchg(&ch->inject_error, 0)) {
		fp_model_halt(m, ch, FP_MODEL_DESC_ERROR);
		return false;
	}
	ch->d_ctrl = le32_to_cpu(d.control);
	ch->d_len = le32_to_cpu(d.bytes) & XDMA_DESC_LEN_MASK;
	ch->d_src = le32_to_cpu(d.src_lo) | (u64)le32_to_cpu(d.src_hi) << 32;
	ch->d_dst = le32_to_cpu(d.dst_lo) | (u64)le32_to_cpu(d.dst_hi) << 32;
	ch->d_next = le32_to_cpu(d.next_lo) | (u64)le32_to_cpu(d.next_hi) << 32;
	if (ch->d_ctrl >> XDMA_DESC_MAGIC_SHIFT != XDMA_DESC_MAGIC) {
		fp_model_halt(m, ch, XDMA_ST_MAGIC_STOPPED);
		return false;
	}
	if (!ch->d_len) {
		fp_model_halt(m, ch, XDMA_ST_INVALID_LENGTH);
		return false;
	}
	if (m->credit_mode & cbit)
		ch->credits--;
	ch->have_desc = true;
	ch->d_done = 0;
	return true;
}

/* The current descriptor is done. m->lock held. */
static void fp_model_desc_done(struct fp_model *m, struct fp_mchan *ch,
			       bool c2h, bool eop)
{
	if (c2h) {
		struct xdma_c2h_result res = {
			.status = cpu_to_le32(XDMA_RESULT_MAGIC <<
					      XDMA_RESULT_MAGIC_SHIFT |
					      (eop ? XDMA_RESULT_EOP : 0)),
			.length = cpu_to_le32(ch->d_done),
		};

		if (fp_model_dma_write(m, ch->d_src, &res, 8)) {
			fp_model_halt(m, ch, FP_MODEL_WRITE_ERROR);
			return;
		}
	}
	ch->completed++;
	ch->have_desc = false;
	ch->next = ch->d_next;
	if (ch->d_ctrl & XDMA_DESC_COMPLETED)
		ch->status |= XDMA_ST_DESC_COMPLETED;
	if (ch->d_ctrl & XDMA_DESC_STOP) {
		ch->status |= XDMA_ST_DESC_STOPPED;
		ch->running = false;
	}
	fp_model_update_irq(m);
}

static u32 fp_model_chan_read(struct fp_model *m, struct fp_mchan *ch,
			      u32 target, u32 reg)
{
	u32 v;

	switch (reg) {
	case XDMA_CH_ID:
		return XDMA_ID_SUBSYS_VALUE << 20 | target << 16 |
		       XDMA_ID_STREAM | FP_MODEL_XDMA_VERSION;
	case XDMA_CH_CONTROL:
		return ch->control;
	case XDMA_CH_STATUS:
		return ch->status | (ch->busy ? XDMA_ST_BUSY : 0);
	case XDMA_CH_STATUS_RC:
		v = ch->status | (ch->busy ? XDMA_ST_BUSY : 0);
		ch->status = 0;
		fp_model_update_irq(m);
		return v;
	case XDMA_CH_COMPLETED:
		return ch->completed;
	case XDMA_CH_INT_MASK:
		return ch->int_mask;
	default:
		return 0;
	}
}

static void fp_model_set_control(struct fp_model *m, struct fp_mchan *ch,
				 u32 val)
{
	bool was = ch->control & XDMA_CTRL_RUN;
	bool run = val & XDMA_CTRL_RUN;

	ch->control = val;
	if (run && !was) {
		ch->running = true;
		ch->completed = 0;
		ch->have_desc = false;
		ch->next = ch->desc_lo | (u64)ch->desc_hi << 32;
		if (ch == &m->h2c)
			m->pkt_active = false;
	} else if (!run && was) {
		/* The transfer under way finishes; nothing more starts. */
		ch->running = false;
		ch->credits = 0;
	}
}

static void fp_model_chan_write(struct fp_model *m, struct fp_mchan *ch,
				u32 reg, u32 val)
{
	switch (reg) {
	case XDMA_CH_CONTROL:
		fp_model_set_control(m, ch, val);
		break;
	case XDMA_CH_CONTROL_W1S:
		fp_model_set_control(m, ch, ch->control | val);
		break;
	case XDMA_CH_CONTROL_W1C:
		fp_model_set_control(m, ch, ch->control & ~val);
		break;
	case XDMA_CH_INT_MASK:
		ch->int_mask = val;
		break;
	case XDMA_CH_INT_MASK_W1S:
		ch->int_mask |= val;
		break;
	case XDMA_CH_INT_MASK_W1C:
		ch->int_mask &= ~val;
		break;
	default:
		m->st_protocol_errors++;
		return;
	}
	fp_model_update_irq(m);
}

static u32 fp_model_sg_read(struct fp_mchan *ch, u32 target, u32 reg)
{
	switch (reg) {
	case XDMA_SG_ID:
		return XDMA_ID_SUBSYS_VALUE << 20 | target << 16 |
		       FP_MODEL_XDMA_VERSION;
	case XDMA_SG_DESC_LO:
		return ch->desc_lo;
	case XDMA_SG_DESC_HI:
		return ch->desc_hi;
	case XDMA_SG_DESC_ADJ:
		return ch->adj;
	case XDMA_SG_CREDITS:
		return ch->credits;
	default:
		return 0;
	}
}

static void fp_model_sg_write(struct fp_model *m, struct fp_mchan *ch, u32 reg,
			      u32 val)
{
	switch (reg) {
	case XDMA_SG_DESC_LO:
		ch->desc_lo = val;
		break;
	case XDMA_SG_DESC_HI:
		ch->desc_hi = val;
		break;
	case XDMA_SG_DESC_ADJ:
		ch->adj = val & 0x3f;
		break;
	case XDMA_SG_CREDITS:
		val &= XDMA_SG_CREDITS_MAX;
		/* Credits only count while the channel runs. */
		if (!ch->running || ch->credits + val > XDMA_SG_CREDITS_MAX) {
			m->st_protocol_errors++;
			break;
		}
		ch->credits += val;
		break;
	default:
		m->st_protocol_errors++;
	}
}

static u32 fp_model_irq_read(struct fp_model *m, u32 reg)
{
	switch (reg) {
	case XDMA_CH_ID:
		return XDMA_ID_SUBSYS_VALUE << 20 | 2 << 16 |
		       FP_MODEL_XDMA_VERSION;
	case XDMA_IRQ_USER_EN:
		return m->irq_user_en;
	case XDMA_IRQ_CHAN_EN:
		return m->irq_chan_en;
	case XDMA_IRQ_CHAN_REQ:
	case XDMA_IRQ_CHAN_PEND:
		return (fp_model_chan_req(m, &m->h2c, FP_IRQ_H2C0) ?
			FP_IRQ_H2C0 : 0) |
		       (fp_model_chan_req(m, &m->c2h, FP_IRQ_C2H0) ?
			FP_IRQ_C2H0 : 0);
	case XDMA_IRQ_CHAN_VEC(0):
		return m->chan_vec[0];
	default:
		return 0;
	}
}

static void fp_model_irq_write(struct fp_model *m, u32 reg, u32 val)
{
	switch (reg) {
	case XDMA_IRQ_USER_EN:
		m->irq_user_en = val;
		break;
	case XDMA_IRQ_CHAN_EN:
		m->irq_chan_en = val;
		break;
	case XDMA_IRQ_CHAN_EN_W1S:
		m->irq_chan_en |= val;
		break;
	case XDMA_IRQ_CHAN_EN_W1C:
		m->irq_chan_en &= ~val;
		break;
	case XDMA_IRQ_CHAN_VEC(0):
		m->chan_vec[0] = val;
		break;
	default:
		m->st_protocol_errors++;
		return;
	}
	fp_model_update_irq(m);
}

static u32 fp_model_xdma_read(struct fp_model *m, u32 off)
{
	u32 target = off >> XDMA_TGT_SHIFT;
	u32 reg = off & 0xff;

	/* Channel 0 only; other channels read as absent. */
	if (off & 0xf00)
		return 0;
	switch (target << XDMA_TGT_SHIFT) {
	case XDMA_TGT_H2C:
		return fp_model_chan_read(m, &m->h2c, target, reg);
	case XDMA_TGT_C2H:
		return fp_model_chan_read(m, &m->c2h, target, reg);
	case XDMA_TGT_IRQ:
		return fp_model_irq_read(m, reg);
	case XDMA_TGT_CONFIG:
		return reg ? 0 : XDMA_ID_SUBSYS_VALUE << 20 | 3 << 16 |
				 FP_MODEL_XDMA_VERSION;
	case XDMA_TGT_H2C_SGDMA:
		return fp_model_sg_read(&m->h2c, target, reg);
	case XDMA_TGT_C2H_SGDMA:
		return fp_model_sg_read(&m->c2h, target, reg);
	case XDMA_TGT_SGDMA_COMMON:
		if (reg == XDMA_CH_ID)
			return XDMA_ID_SUBSYS_VALUE << 20 | 6 << 16 |
			       FP_MODEL_XDMA_VERSION;
		return reg == XDMA_SGC_CREDIT_MODE ? m->credit_mode : 0;
	default:
		return 0;
	}
}

static void fp_model_xdma_write(struct fp_model *m, u32 off, u32 val)
{
	u32 reg = off & 0xff;

	if (off & 0xf00) {
		m->st_protocol_errors++;
		return;
	}
	switch (off & ~0xfffU) {
	case XDMA_TGT_H2C:
		fp_model_chan_write(m, &m->h2c, reg, val);
		break;
	case XDMA_TGT_C2H:
		fp_model_chan_write(m, &m->c2h, reg, val);
		break;
	case XDMA_TGT_IRQ:
		fp_model_irq_write(m, reg, val);
		break;
	case XDMA_TGT_H2C_SGDMA:
		fp_model_sg_write(m, &m->h2c, reg, val);
		break;
	case XDMA_TGT_C2H_SGDMA:
		fp_model_sg_write(m, &m->c2h, reg, val);
		break;
	case XDMA_TGT_SGDMA_COMMON:
		if (reg == XDMA_SGC_CREDIT_MODE)
			m->credit_mode = val;
		else if (reg == XDMA_SGC_CREDIT_MODE_W1S)
			m->credit_mode |= val;
		else if (reg == XDMA_SGC_CREDIT_MODE_W1C)
			m->credit_mode &= ~val;
		else
			m->st_protocol_errors++;
		break;
	default:
		m->st_protocol_errors++;
	}
}

/* --- user block ---------------------------------------------------------- */

static void fp_model_set_ctrl(struct fp_model *m, u32 val)
{
	bool was = m->ctrl & FP_UB_CTRL_ENABLE;
	bool en = val & FP_UB_CTRL_ENABLE;

	if (en && !was) {
		if (!m->frame_bytes || !m->chunk_bytes ||
		    m->frame_bytes % m->chunk_bytes ||
		    m->frame_bytes > FP_MODEL_MAX_FRAME_BYTES ||
		    FIELD_GET(FP_UB_CTRL_SOURCE, val) > FPGA_P2P_SRC_PLAYBACK) {
			m->st_protocol_errors++;
			val &= ~FP_UB_CTRL_ENABLE;
		} else {
			m->src.next_seq = 0;
			m->src.dropped = 0;
			m->src.active = false;
			m->src.next_due = ktime_get();
			m->src.source = FIELD_GET(FP_UB_CTRL_SOURCE, val);
			/* The geometry holds until the next enable. */
			m->src.frame_bytes = m->frame_bytes;
			m->src.chunk_bytes = m->chunk_bytes;
			m->drops_no_slot = 0;
			m->drops_fault = 0;
			m->frames_sent = 0;
			m->meta_overflow = false;
		}
	} else if (!en && was) {
		/* Abandon the frame in progress; credits and FIFO reset. */
		m->src.active = false;
		m->src.gen++;
		m->frame_credits = 0;
		m->meta_count = 0;
	}
	m->ctrl = val;
}

static u32 fp_model_user_read(struct fp_model *m, u32 off)
{
	struct fp_mmeta *e = &m->meta[m->meta_head];
	bool have = m->meta_count;

	switch (off) {
	case FP_UB_ID:
		return FP_UB_ID_VALUE;
	case FP_UB_VERSION:
		return FP_UB_VERSION_VALUE;
	case FP_UB_CAPS:
		return FP_UB_CAP_ADC | FP_UB_CAP_TEST_PATTERN |
		       FP_UB_CAP_PLAYBACK | FP_UB_CAP_MODEL;
	case FP_UB_SCRATCH:
		return m->scratch;
	case FP_UB_META_DEPTH:
		return FP_MODEL_META_DEPTH;
	case FP_UB_TAG_DEPTH:
		return FP_MODEL_TAG_DEPTH;
	case FP_UB_PLAYBACK_FRAMES:
		return FP_MODEL_PB_FRAMES;
	case FP_UB_PLAYBACK_FRAME_BYTES:
		return FP_MODEL_PB_FRAME_BYTES;
	case FP_UB_MAX_FRAME_BYTES:
		return FP_MODEL_MAX_FRAME_BYTES;
	case FP_UB_CTRL:
		return m->ctrl;
	case FP_UB_STATUS:
		return (m->ctrl & FP_UB_CTRL_ENABLE ? FP_UB_STATUS_RUNNING : 0) |
		       (m->meta_overflow ? FP_UB_STATUS_META_OVERFLOW : 0);
	case FP_UB_FRAME_BYTES:
		return m->frame_bytes;
	case FP_UB_CHUNK_BYTES:
		return m->chunk_bytes;
	case FP_UB_CHUNK_PERIOD_NS:
		return m->chunk_period_ns;
	case FP_UB_PLAYBACK_COUNT:
		return m->playback_count;
	case FP_UB_FRAME_CREDITS:
		return m->frame_credits;
	case FP_UB_DROPS_NO_SLOT:
		return m->drops_no_slot;
	case FP_UB_DROPS_FAULT:
		return m->drops_fault;
	case FP_UB_FRAMES_SENT:
		return m->frames_sent;
	case FP_UB_META_LEVEL:
		return m->meta_count;
	case FP_UB_META_SEQ_LO:
		return have ? lower_32_bits(e->seq) : 0;
	case FP_UB_META_SEQ_HI:
		return have ? upper_32_bits(e->seq) : 0;
	case FP_UB_META_TS_LO:
		return have ? lower_32_bits(e->ts) : 0;
	case FP_UB_META_TS_HI:
		return have ? upper_32_bits(e->ts) : 0;
	case FP_UB_META_BYTES:
		return have ? e->bytes : 0;
	case FP_UB_META_CRC:
		return have ? e->crc : 0;
	case FP_UB_META_FLAGS:
		return have ? e->flags : 0;
	case FP_UB_META_DROPPED:
		return have ? e->dropped : 0;
	case FP_UB_TAG_LEVEL:
		return m->tag_count;
	case FP_UB_H2C_PACKETS:
		return m->h2c_packets;
	case FP_UB_H2C_LAST_TAG:
		return m->h2c_last_tag;
	case FP_UB_H2C_LAST_BYTES:
		return m->h2c_last_bytes;
	case FP_UB_H2C_LAST_CRC:
		return m->h2c_last_crc;
	case FP_UB_H2C_ERRORS:
		return m->h2c_errors;
	default:
		return 0;
	}
}

static void fp_model_user_write(struct fp_model *m, u32 off, u32 val)
{
	switch (off) {
	case FP_UB_SCRATCH:
		m->scratch = val;
		break;
	case FP_UB_CTRL:
		fp_model_set_ctrl(m, val);
		break;
	case FP_UB_FRAME_BYTES:
		m->frame_bytes = val;
		break;
	case FP_UB_CHUNK_BYTES:
		m->chunk_bytes = val;
		break;
	case FP_UB_CHUNK_PERIOD_NS:
		m->chunk_period_ns = val;
		break;
	case FP_UB_PLAYBACK_COUNT:
		m->playback_count = val;
		break;
	case FP_UB_FRAME_CREDIT_ADD:
		m->frame_credits += val;
		if (m->frame_credits > FP_MODEL_META_DEPTH)
			m->st_protocol_errors++;
		break;
	case FP_UB_META_POP:
		if (!m->meta_count) {
			m->st_protocol_errors++;
			break;
		}
		m->meta_head = (m->meta_head + 1) % FP_MODEL_META_DEPTH;
		m->meta_count--;
		break;
	case FP_UB_TAG_BYTES:
		m->tag_bytes = val;
		break;
	case FP_UB_TAG_PUSH:
		if (m->tag_count == FP_MODEL_TAG_DEPTH) {
			m->st_protocol_errors++;
			break;
		}
		m->tags[(m->tag_head + m->tag_count) % FP_MODEL_TAG_DEPTH][0] = val;
		m->tags[(m->tag_head + m->tag_count) % FP_MODEL_TAG_DEPTH][1] =
			m->tag_bytes;
		m->tag_count++;
		break;
	default:
		m->st_protocol_errors++;
	}
}

u32 fp_model_read(struct fp_model *m, int bar, u32 off)
{
	unsigned long flags;
	u32 v;

	if (off & 3)
		return ~0U;
	spin_lock_irqsave(&m->lock, flags);
	if (bar == FP_BAR_XDMA && off < FP_BAR_XDMA_LEN)
		v = fp_model_xdma_read(m, off);
	else if (bar == FP_BAR_USER && off < FP_BAR_USER_LEN)
		v = fp_model_user_read(m, off);
	else
		v = ~0U;
	spin_unlock_irqrestore(&m->lock, flags);
	return v;
}

/* Register writes after which a channel's thread may have work: 1 C2H, 2 H2C. */
static int fp_model_wakes(int bar, u32 off)
{
	u32 reg = off & 0xff;

	if (bar == FP_BAR_USER)
		return off == FP_UB_CTRL || off == FP_UB_FRAME_CREDIT_ADD ? 1 :
		       off == FP_UB_TAG_PUSH ? 2 : 0;
	switch (off & ~0xfffU) {
	case XDMA_TGT_C2H:
	case XDMA_TGT_C2H_SGDMA:
		return reg == XDMA_SG_CREDITS || reg == XDMA_CH_CONTROL ||
		       reg == XDMA_CH_CONTROL_W1S ? 1 : 0;
	case XDMA_TGT_H2C:
	case XDMA_TGT_H2C_SGDMA:
		return reg == XDMA_SG_CREDITS || reg == XDMA_CH_CONTROL ||
		       reg == XDMA_CH_CONTROL_W1S ? 2 : 0;
	default:
		return 0;
	}
}

void fp_model_write(struct fp_model *m, int bar, u32 off, u32 val)
{
	unsigned long flags;
	int wake = fp_model_wakes(bar, off);

	spin_lock_irqsave(&m->lock, flags);
	if (off & 3)
		m->st_protocol_errors++;
	else if (bar == FP_BAR_XDMA && off < FP_BAR_XDMA_LEN)
		fp_model_xdma_write(m, off, val);
	else if (bar == FP_BAR_USER && off < FP_BAR_USER_LEN)
		fp_model_user_write(m, off, val);
	else
		m->st_protocol_errors++;
	spin_unlock_irqrestore(&m->lock, flags);
	if (wake)
		fp_model_kick(m, wake == 1);
}

/* --- frame sources ------------------------------------------------------- */

/* Word @w of frame @seq of the test pattern (board/fpga/test-pattern.md). */
static u32 fp_model_pattern(u64 seq, u32 w, u32 chunk_words)
{
	u32 c = w / chunk_words;
	u32 k = w - c * chunk_words;
	u32 lo = lower_32_bits(seq), hi = upper_32_bits(seq);

	switch (k) {
	case 0:
		return 0x7E57F00D;
	case 1:
		return lo;
	case 2:
		return hi;
	case 3:
		return c;
	default:
		return (w * 0x9E3779B1U) ^ (lo * 0x85EBCA6BU) ^ hi;
	}
}

/* Noise of the model's "ADC" (no front end): a hash of frame and word. */
static u32 fp_model_noise(u64 seq, u32 w)
{
	u64 x = seq * 0x9E3779B97F4A7C15ULL + w;

	x ^= x >> 31;
	x *= 0xBF58476D1CE4E5B9ULL;
	x ^= x >> 29;
	return lower_32_bits(x);
}

/* What one unlocked fill needs to know about the frame. */
struct fp_mfill {
	u32 source;
	u64 seq;
	u32 off;			/* frame offset of the next byte */
	u32 chunk_words;
	u32 valid;
	u32 corrupt_at;
	u32 crc;
	u8 *pb;				/* playback frame or NULL */
	u32 pb_len;
};

static u32 fp_model_word(struct fp_mfill *f, u32 w)
{
	u32 b = w * 4, v = 0;

	switch (f->source) {
	case FPGA_P2P_SRC_TEST_PATTERN:
		return fp_model_pattern(f->seq, w, f->chunk_words);
	case FPGA_P2P_SRC_PLAYBACK:
		if (f->pb && b + 4 <= f->pb_len)
			memcpy(&v, f->pb + b, 4);
		return le32_to_cpu((__force __le32)v);
	default:
		return fp_model_noise(f->seq, w);
	}
}

/* Words [w, w + n) of the frame, the common case: aligned, all valid. */
static void fp_model_gen_words(struct fp_mfill *f, __le32 *q, u32 w, u32 n)
{
	u32 lo = lower_32_bits(f->seq), hi = upper_32_bits(f->seq);
	u32 x = (lo * 0x85EBCA6BU) ^ hi;
	u32 k = w % f->chunk_words;
	u32 i;

	switch (f->source) {
	case FPGA_P2P_SRC_TEST_PATTERN:
		for (i = 0; i < n; i++, w++) {
			if (k < 4)
				q[i] = cpu_to_le32(fp_model_pattern(f->seq, w,
								    f->chunk_words));
			else
				q[i] = cpu_to_le32((w * 0x9E3779B1U) ^ x);
			if (++k == f->chunk_words)
				k = 0;
		}
		break;
	case FPGA_P2P_SRC_PLAYBACK:
		for (i = 0; i < n; i++, w++)
			q[i] = cpu_to_le32(fp_model_word(f, w));
		break;
	default:
		for (i = 0; i < n; i++, w++)
			q[i] = cpu_to_le32(fp_model_noise(f->seq, w));
	}
}

/* Generate frame bytes into one mapped piece of a slot. */
static int fp_model_fill_piece(struct fp_model *m, void *kaddr, u32 len,
			       void *ctx)
{
	struct fp_mfill *f = ctx;
	u8 *p = kaddr;
	u32 i, crc_len;

	if (!(f->off & 3) && !(len & 3) && f->off + len <= f->valid &&
	    !((uintptr_t)p & 3)) {
		fp_model_gen_words(f, kaddr, f->off / 4, len / 4);
	} else {
		for (i = 0; i < len; i++) {
			u32 pos = f->off + i;

			p[i] = pos >= f->valid ? 0 :	/* padding, short frame */
			       fp_model_word(f, pos / 4) >> (8 * (pos & 3));
		}
	}
	crc_len = f->off >= f->valid ? 0 : min(len, f->valid - f->off);
	f->crc = crc32_le(f->crc, p, crc_len);
	/* Corruption after the CRC: the receiver must notice. */
	if (f->corrupt_at >= f->off && f->corrupt_at < f->off + len)
		p[f->corrupt_at - f->off] ^= 0x01;
	f->off += len;
	return 0;
}

static u64 fp_model_period(struct fp_model *m)
{
	return max_t(u32, m->chunk_period_ns, 1);
}

static u64 fp_model_frame_ns(struct fp_model *m)
{
	return fp_model_period(m) * (m->src.frame_bytes / m->src.chunk_bytes);
}

/*
 * Frames that start while no slot is free are dropped whole. Without
 * credits every frame due up to now is dropped at once, so that a stalled
 * application costs the model no time. m->lock held.
 */
static void fp_model_drop_due(struct fp_model *m, ktime_t now)
{
	struct fp_msrc *s = &m->src;
	u64 frame_ns = fp_model_frame_ns(m);
	u64 n = 1 + div64_u64(ktime_to_ns(ktime_sub(now, s->next_due)),
			      frame_ns);
	u32 drop = READ_ONCE(m->drop_every);
	u64 faults = 0;

	if (drop)
		faults = div_u64(s->next_seq + n, drop) -
			 div_u64(s->next_seq, drop);
	s->next_seq += n;
	m->drops_fault += faults;
	m->drops_no_slot += n - faults;
	s->dropped += n;
	s->next_due = ktime_add_ns(s->next_due, n * frame_ns);
}

/* Decide at frame start: deliver (credit taken) or drop. m->lock held. */
static bool fp_model_frame_start(struct fp_model *m, ktime_t now)
{
	struct fp_msrc *s = &m->src;
	u32 drop = READ_ONCE(m->drop_every);
	u32 shrt = READ_ONCE(m->short_every);
	u32 corr = READ_ONCE(m->corrupt_every);
	u64 seq = s->next_seq;

	if (drop && seq % drop == drop - 1) {
		s->next_seq++;
		m->drops_fault++;
		s->dropped++;
		s->next_due = ktime_add_ns(s->next_due, fp_model_frame_ns(m));
		return false;
	}
	if (!m->frame_credits) {
		fp_model_drop_due(m, now);
		return false;
	}
	/*
	 * A frame can be delivered but is late: the simulation ran slower
	 * than real time (the card never does). Catch up rather than drop.
	 */
	if (ktime_to_ns(ktime_sub(now, s->next_due)) > FP_MODEL_MAX_LAG_NS)
		s->next_due = now;
	s->next_seq++;
	m->frame_credits--;
	s->active = true;
	s->seq = seq;
	s->ts = ktime_to_ns(now);
	s->valid_bytes = s->frame_bytes;
	s->flags = 0;
	s->off = 0;
	s->chunk_off = 0;
	s->crc = ~0U;
	s->corrupt_at = ~0U;
	s->pb_index = m->playback_count ? seq % m->playback_count : 0;
	if (shrt && seq % shrt == shrt - 1) {
		s->valid_bytes = (s->frame_bytes / 2) & ~3U;
		s->flags |= FP_META_SHORT;
	}
	if (corr && seq % corr == corr - 1 && s->valid_bytes)
		s->corrupt_at = (u32)(seq * 4099) % s->valid_bytes;
	return true;
}

static void fp_model_meta_push(struct fp_model *m)
{
	struct fp_msrc *s = &m->src;
	struct fp_mmeta *e;

	if (m->meta_count == FP_MODEL_META_DEPTH) {
		m->meta_overflow = true;
		m->st_protocol_errors++;
		return;
	}
	e = &m->meta[(m->meta_head + m->meta_count) % FP_MODEL_META_DEPTH];
	e->seq = s->seq;
	e->ts = s->ts;
	e->bytes = s->valid_bytes;
	e->crc = ~s->crc;
	e->flags = s->flags;
	e->dropped = s->dropped;
	s->dropped = 0;
	m->meta_count++;
}

/*
 * One step of capture: start a frame when it is due, or stream the next
 * piece of the frame into the current C2H descriptor. Returns true if it
 * did something; otherwise *wake is when to look again (or KTIME_MAX).
 */
static bool fp_model_c2h_step(struct fp_model *m, ktime_t *wake)
{
	struct fp_msrc *s = &m->src;
	struct fp_mchan *ch = &m->c2h;
	struct fp_mfill f = { };
	unsigned long flags;
	u32 n, gen;
	u64 dst;
	ktime_t now;
	bool end;
	int ret;

	spin_lock_irqsave(&m->lock, flags);
	if (!(m->ctrl & FP_UB_CTRL_ENABLE))
		goto idle;
	now = ktime_get();
	if (ktime_before(now, s->next_due)) {
		*wake = s->next_due;
		goto idle;
	}
	if (!s->active) {
		if (!fp_model_frame_start(m, now)) {
			*wake = s->next_due;
			goto idle;
		}
	}
	if (!fp_model_fetch(m, ch, XDMA_SGC_CREDIT_C2H(0)))
		goto idle;	/* backpressure: wait for a kick */

	n = min(ch->d_len - ch->d_done, s->chunk_bytes - s->chunk_off);
	dst = ch->d_dst + ch->d_done;
	f.source = s->source;
	f.seq = s->seq;
	f.off = s->off;
	f.chunk_words = s->chunk_bytes / 4;
	f.valid = s->valid_bytes;
	f.corrupt_at = s->corrupt_at;
	f.crc = s->crc;
	f.pb = m->pb[s->pb_index];
	f.pb_len = m->pb_len[s->pb_index];
	gen = s->gen;
	ch->busy = true;
	spin_unlock_irqrestore(&m->lock, flags);

	ret = fp_model_dma(m, dst, n, fp_model_fill_piece, &f);

	spin_lock_irqsave(&m->lock, flags);
	ch->busy = false;
	if (ret) {
		fp_model_halt(m, ch, FP_MODEL_WRITE_ERROR);
		goto out;
	}
	ch->d_done += n;
	end = false;
	if (gen == s->gen && s->active) {
		s->crc = f.crc;
		s->off += n;
		s->chunk_off += n;
		if (s->chunk_off == s->chunk_bytes) {
			s->chunk_off = 0;
			s->next_due = ktime_add_ns(s->next_due,
						   fp_model_period(m));
			m->st_chunks++;
		}
		end = s->off == s->frame_bytes;
		if (end) {
			fp_model_meta_push(m);
			s->active = false;
			m->frames_sent++;
			m->st_frames++;
		}
	}
	/* A packet ends the descriptor early; the next one starts afresh. */
	if (ch->d_done == ch->d_len || end)
		fp_model_desc_done(m, ch, true, end);
out:
	spin_unlock_irqrestore(&m->lock, flags);
	return true;

idle:
	spin_unlock_irqrestore(&m->lock, flags);
	return false;
}

/* Read host memory into the H2C sink. */
static int fp_model_sink_piece(struct fp_model *m, void *kaddr, u32 len,
			       void *ctx)
{
	struct fp_mfill *f = ctx;

	if (f->pb && f->off < f->pb_len)
		memcpy(f->pb + f->off, kaddr,
		       min(len, f->pb_len - f->off));
	f->crc = crc32_le(f->crc, kaddr, len);
	f->off += len;
	return 0;
}

/* One step of transmit: move up to FP_MODEL_H2C_STEP bytes of a packet. */
static bool fp_model_h2c_step(struct fp_model *m)
{
	struct fp_mchan *ch = &m->h2c;
	struct fp_mfill f = { };
	unsigned long flags;
	u32 n, target, index;
	u64 src;
	int ret;

	spin_lock_irqsave(&m->lock, flags);
	if (!fp_model_fetch(m, ch, XDMA_SGC_CREDIT_H2C(0))) {
		spin_unlock_irqrestore(&m->lock, flags);
		return false;
	}
	if (!m->pkt_active) {
		m->pkt_active = true;
		m->pkt_got = 0;
		m->pkt_crc = ~0U;
		if (m->tag_count) {
			m->pkt_tag = m->tags[m->tag_head][0];
			m->pkt_expect = m->tags[m->tag_head][1];
			m->tag_head = (m->tag_head + 1) % FP_MODEL_TAG_DEPTH;
			m->tag_count--;
		} else {
			m->pkt_tag = ~0U;	/* nowhere: discarded */
			m->pkt_expect = 0;
			m->h2c_errors++;
		}
	}
	target = FIELD_GET(FP_TAG_TARGET, m->pkt_tag);
	index = FIELD_GET(FP_TAG_INDEX, m->pkt_tag);
	n = min(ch->d_len - ch->d_done, FP_MODEL_H2C_STEP);
	src = ch->d_src + ch->d_done;
	f.off = m->pkt_got;
	f.crc = m->pkt_crc;
	ch->busy = true;
	spin_unlock_irqrestore(&m->lock, flags);

	if (target == FPGA_P2P_TX_DETECTIONS) {
		f.pb = m->det_rx;
		f.pb_len = FP_MODEL_DET_BYTES;
	} else if (target == FPGA_P2P_TX_PLAYBACK && index < FP_MODEL_PB_FRAMES) {
		/* Playback memory comes on first use; capture reads it. */
		f.pb = READ_ONCE(m->pb[index]);
		if (!f.pb) {
			f.pb = vzalloc(FP_MODEL_PB_FRAME_BYTES);
			spin_lock_irqsave(&m->lock, flags);
			m->pb[index] = f.pb;
			spin_unlock_irqrestore(&m->lock, flags);
		}
		f.pb_len = f.pb ? FP_MODEL_PB_FRAME_BYTES : 0;
	}
	ret = fp_model_dma(m, src, n, fp_model_sink_piece, &f);

	spin_lock_irqsave(&m->lock, flags);
	ch->busy = false;
	if (ret) {
		fp_model_halt(m, ch, FP_MODEL_READ_ERROR);
		m->pkt_active = false;
		goto out;
	}
	ch->d_done += n;
	m->pkt_got = f.off;
	m->pkt_crc = f.crc;
	if (ch->d_done < ch->d_len)
		goto out;
	if (ch->d_ctrl & XDMA_DESC_EOP) {
		m->pkt_active = false;
		m->h2c_packets++;
		m->h2c_last_tag = m->pkt_tag;
		m->h2c_last_bytes = m->pkt_got;
		m->h2c_last_crc = ~m->pkt_crc;
		if (m->pkt_got != m->pkt_expect ||
		    (target == FPGA_P2P_TX_PLAYBACK &&
		     (index >= FP_MODEL_PB_FRAMES ||
		      m->pkt_got > FP_MODEL_PB_FRAME_BYTES)) ||
		    (target == FPGA_P2P_TX_DETECTIONS &&
		     m->pkt_got > FP_MODEL_DET_BYTES)) {
			m->h2c_errors++;
		} else if (target == FPGA_P2P_TX_PLAYBACK) {
			m->pb_len[index] = m->pkt_got;
		} else if (target == FPGA_P2P_TX_DETECTIONS) {
			memcpy(m->det_last, m->det_rx, m->pkt_got);
			m->det_last_len = m->pkt_got;
			m->det_records++;
		}
	}
	fp_model_desc_done(m, ch, false, false);
out:
	spin_unlock_irqrestore(&m->lock, flags);
	return true;
}

/* Sleep until kicked or until @wake (KTIME_MAX: no timeout). */
static void fp_model_sleep(bool *kick, ktime_t wake)
{
	set_current_state(TASK_INTERRUPTIBLE);
	if (READ_ONCE(*kick) || kthread_should_stop())
		__set_current_state(TASK_RUNNING);
	else if (wake == KTIME_MAX)
		schedule();
	else
		schedule_hrtimeout_range(&wake, 10 * NSEC_PER_USEC,
					 HRTIMER_MODE_ABS);
	WRITE_ONCE(*kick, false);
}

static int fp_model_c2h_thread(void *data)
{
	struct fp_model *m = data;

	while (!kthread_should_stop()) {
		ktime_t wake = KTIME_MAX;

		if (fp_model_c2h_step(m, &wake))
			cond_resched();
		else
			fp_model_sleep(&m->c2h_kick, wake);
	}
	return 0;
}

static int fp_model_h2c_thread(void *data)
{
	struct fp_model *m = data;

	while (!kthread_should_stop()) {
		if (fp_model_h2c_step(m))
			cond_resched();
		else
			fp_model_sleep(&m->h2c_kick, KTIME_MAX);
	}
	return 0;
}

/* --- debugfs ------------------------------------------------------------- */

static int fp_model_stats_show(struct seq_file *sf, void *unused)
{
	struct fp_model *m = sf->private;
	unsigned long flags;

	spin_lock_irqsave(&m->lock, flags);
	seq_printf(sf, "frames_started %llu\n", m->src.next_seq);
	seq_printf(sf, "frames_sent %llu\n", m->st_frames);
	seq_printf(sf, "chunks %llu\n", m->st_chunks);
	seq_printf(sf, "drops_no_slot %u\n", m->drops_no_slot);
	seq_printf(sf, "drops_fault %u\n", m->drops_fault);
	seq_printf(sf, "frame_credits %u\n", m->frame_credits);
	seq_printf(sf, "c2h_credits %u\n", m->c2h.credits);
	seq_printf(sf, "c2h_completed %u\n", m->c2h.completed);
	seq_printf(sf, "c2h_status 0x%08x\n", m->c2h.status);
	seq_printf(sf, "h2c_credits %u\n", m->h2c.credits);
	seq_printf(sf, "h2c_status 0x%08x\n", m->h2c.status);
	seq_printf(sf, "stalls %llu\n", m->st_stalls);
	seq_printf(sf, "protocol_errors %llu\n", m->st_protocol_errors);
	seq_printf(sf, "meta_level %u\n", m->meta_count);
	seq_printf(sf, "tag_level %u\n", m->tag_count);
	seq_printf(sf, "h2c_packets %u\n", m->h2c_packets);
	seq_printf(sf, "h2c_errors %u\n", m->h2c_errors);
	seq_printf(sf, "h2c_last_target %lu\n",
		   FIELD_GET(FP_TAG_TARGET, m->h2c_last_tag));
	seq_printf(sf, "h2c_last_index %lu\n",
		   FIELD_GET(FP_TAG_INDEX, m->h2c_last_tag));
	seq_printf(sf, "h2c_last_bytes %u\n", m->h2c_last_bytes);
	seq_printf(sf, "h2c_last_crc 0x%08x\n", m->h2c_last_crc);
	seq_printf(sf, "detection_records %u\n", m->det_records);
	seq_printf(sf, "detection_last_bytes %u\n", m->det_last_len);
	spin_unlock_irqrestore(&m->lock, flags);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(fp_model_stats);

/* The last detection record, a consistent copy taken under the lock. */
static ssize_t fp_model_detections_read(struct file *file, char __user *ubuf,
					size_t count, loff_t *ppos)
{
	struct fp_model *m = file->private_data;
	unsigned long flags;
	ssize_t ret;
	u8 *copy;
	u32 len;

	if (!m->det_last)
		return 0;
	copy = kvmalloc(FP_MODEL_DET_BYTES, GFP_KERNEL);
	if (!copy)
		return -ENOMEM;
	spin_lock_irqsave(&m->lock, flags);
	len = m->det_last_len;
	memcpy(copy, m->det_last, len);
	spin_unlock_irqrestore(&m->lock, flags);
	ret = simple_read_from_buffer(ubuf, count, ppos, copy, len);
	kvfree(copy);
	return ret;
}

static const struct file_operations fp_model_detections_fops = {
	.owner = THIS_MODULE,
	.open = simple_open,
	.read = fp_model_detections_read,
	.llseek = default_llseek,
};

static ssize_t fp_model_inject_write(struct file *file, const char __user *buf,
				     size_t len, loff_t *ppos)
{
	struct fp_mchan *ch = file->private_data;
	bool on;
	int ret;

	ret = kstrtobool_from_user(buf, len, &on);
	if (ret)
		return ret;
	atomic_set(&ch->inject_error, on);
	return len;
}

static const struct file_operations fp_model_inject_fops = {
	.owner = THIS_MODULE,
	.open = simple_open,
	.write = fp_model_inject_write,
	.llseek = noop_llseek,
};

/* --- devices ------------------------------------------------------------- */

static void fp_model_free(struct fp_model *m)
{
	int i;

	if (m->c2h_thread)
		kthread_stop(m->c2h_thread);
	if (m->h2c_thread)
		kthread_stop(m->h2c_thread);
	irq_work_sync(&m->irq_work);
	if (m->irq > 0)
		irq_free_descs(m->irq, 1);
	for (i = 0; i < FP_MODEL_PB_FRAMES; i++)
		vfree(m->pb[i]);
	vfree(m->det_rx);
	vfree(m->det_last);
	if (m->pdev)
		platform_device_unregister(m->pdev);
	kfree(m);
}

static struct fp_model *fp_model_create(void)
{
	struct fp_model *m;
	char name[16];
	int ret;

	m = kzalloc(sizeof(*m), GFP_KERNEL);
	if (!m)
		return ERR_PTR(-ENOMEM);
	spin_lock_init(&m->lock);
	m->irq_work = IRQ_WORK_INIT_HARD(fp_model_irq_work);
	m->id = fp_model_next_id++;
	m->det_rx = vzalloc(FP_MODEL_DET_BYTES);
	m->det_last = vzalloc(FP_MODEL_DET_BYTES);
	if (!m->det_rx || !m->det_last) {
		ret = -ENOMEM;
		goto fail;
	}

	m->pdev = platform_device_register_simple("fpga_p2p_model", m->id,
						  NULL, 0);
	if (IS_ERR(m->pdev)) {
		ret = PTR_ERR(m->pdev);
		m->pdev = NULL;
		goto fail;
	}
	ret = dma_coerce_mask_and_coherent(&m->pdev->dev, DMA_BIT_MASK(64));
	if (ret)
		goto fail;

	/*
	 * No owner module: request_irq() takes a reference on the owner,
	 * which would keep this very module from unloading.
	 */
	m->irq = __irq_alloc_descs(-1, 1, 1, NUMA_NO_NODE, NULL, NULL);
	if (m->irq < 0) {
		ret = m->irq;
		goto fail;
	}
	irq_set_chip_and_handler(m->irq, &dummy_irq_chip, handle_simple_irq);
	irq_modify_status(m->irq, IRQ_NOREQUEST | IRQ_NOAUTOEN, IRQ_NOPROBE);

	m->c2h_thread = kthread_run(fp_model_c2h_thread, m, "fp_model%d_c2h",
				    m->id);
	if (IS_ERR(m->c2h_thread)) {
		ret = PTR_ERR(m->c2h_thread);
		m->c2h_thread = NULL;
		goto fail;
	}
	m->h2c_thread = kthread_run(fp_model_h2c_thread, m, "fp_model%d_h2c",
				    m->id);
	if (IS_ERR(m->h2c_thread)) {
		ret = PTR_ERR(m->h2c_thread);
		m->h2c_thread = NULL;
		goto fail;
	}

	m->fdev = fp_dev_create(&m->pdev->dev, m->irq, false, NULL, m);
	if (IS_ERR(m->fdev)) {
		ret = PTR_ERR(m->fdev);
		goto fail;
	}

	snprintf(name, sizeof(name), "%d", m->id);
	m->dbg = debugfs_create_dir(name, fp_model_dbg);
	debugfs_create_u32("drop_every", 0644, m->dbg, &m->drop_every);
	debugfs_create_u32("short_every", 0644, m->dbg, &m->short_every);
	debugfs_create_u32("corrupt_every", 0644, m->dbg, &m->corrupt_every);
	debugfs_create_file("c2h_error", 0200, m->dbg, &m->c2h,
			    &fp_model_inject_fops);
	debugfs_create_file("h2c_error", 0200, m->dbg, &m->h2c,
			    &fp_model_inject_fops);
	debugfs_create_file("stats", 0444, m->dbg, m, &fp_model_stats_fops);
	debugfs_create_file("detections", 0444, m->dbg, m,
			    &fp_model_detections_fops);
	return m;

fail:
	fp_model_free(m);
	return ERR_PTR(ret);
}

/* Tear a model device down like a card being removed. fp_models_lock held. */
static void fp_model_destroy(struct fp_model *m)
{
	list_del(&m->node);
	debugfs_remove_recursive(m->dbg);
	fp_dev_destroy(m->fdev);
	fp_model_free(m);
}

static ssize_t fp_model_add_write(struct file *file, const char __user *buf,
				  size_t len, loff_t *ppos)
{
	struct fp_model *m;

	mutex_lock(&fp_models_lock);
	m = fp_model_create();
	if (!IS_ERR(m))
		list_add_tail(&m->node, &fp_models);
	mutex_unlock(&fp_models_lock);
	return IS_ERR(m) ? PTR_ERR(m) : len;
}

static ssize_t fp_model_remove_write(struct file *file, const char __user *buf,
				     size_t len, loff_t *ppos)
{
	struct fp_model *m, *found = NULL;
	int id, ret;

	ret = kstrtoint_from_user(buf, len, 0, &id);
	if (ret)
		return ret;
	mutex_lock(&fp_models_lock);
	list_for_each_entry(m, &fp_models, node) {
		if (m->id == id) {
			found = m;
			break;
		}
	}
	if (found)
		fp_model_destroy(found);
	mutex_unlock(&fp_models_lock);
	return found ? len : -ENODEV;
}

static const struct file_operations fp_model_add_fops = {
	.owner = THIS_MODULE,
	.write = fp_model_add_write,
	.llseek = noop_llseek,
};

static const struct file_operations fp_model_remove_fops = {
	.owner = THIS_MODULE,
	.write = fp_model_remove_write,
	.llseek = noop_llseek,
};

int fp_model_init(unsigned int count)
{
	struct fp_model *m;
	unsigned int i;

	fp_model_dbg = debugfs_create_dir("fpga_p2p_model", NULL);
	debugfs_create_file("add", 0200, fp_model_dbg, NULL, &fp_model_add_fops);
	debugfs_create_file("remove", 0200, fp_model_dbg, NULL,
			    &fp_model_remove_fops);
	mutex_lock(&fp_models_lock);
	for (i = 0; i < count; i++) {
		m = fp_model_create();
		if (IS_ERR(m)) {
			mutex_unlock(&fp_models_lock);
			fp_model_exit();
			return PTR_ERR(m);
		}
		list_add_tail(&m->node, &fp_models);
	}
	mutex_unlock(&fp_models_lock);
	return 0;
}

void fp_model_exit(void)
{
	struct fp_model *m, *tmp;

	/* Open debugfs files hold the module: no add/remove runs now. */
	mutex_lock(&fp_models_lock);
	list_for_each_entry_safe(m, tmp, &fp_models, node)
		fp_model_destroy(m);
	mutex_unlock(&fp_models_lock);
	debugfs_remove_recursive(fp_model_dbg);
	fp_model_dbg = NULL;
}
