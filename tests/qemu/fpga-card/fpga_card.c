/*
 * Radar FPGA card: an emulated PCI device for the fpga_p2p driver's tests.
 *
 * The card is an AMD/Xilinx XDMA (PG195) with one H2C and one C2H
 * AXI4-Stream channel plus the project's user block; the register map is
 * kmod/fpga_p2p_regs.h, described in board/fpga/registers.md. This device
 * gives the driver the card's PCI function: vendor/device ID, BAR0 (user
 * block), BAR1 (XDMA), MSI-X (vector 0, BAR4) with INTx as the fallback,
 * and bus-master DMA. Every descriptor fetch, writeback record and data
 * transfer goes through QEMU's PCI DMA API, and so through the emulated
 * IOMMU when there is one: a DMA to an address the driver has not mapped
 * (or no longer maps) fails here and faults in the guest's IOMMU.
 *
 * BAR2 is a test port that exists only on the emulated card (the driver never
 * maps it; tests mmap /sys/bus/pci/devices/.../resource2): fault
 * injection (dropped, short and corrupted frames, descriptor errors, lost
 * interrupts, a C2H engine that never goes idle, all-ones register reads
 * as after a completion timeout), counters, and the detection packets the
 * card received over H2C.
 *
 * The card's clock (the time block of the user registers) counts
 * nanoseconds from QEMU's virtual clock at the rate of an oscillator that is
 * clock-ppm (a property; the test port can change it) off, trimmed by the
 * driver's frequency word; frames are stamped with it at their first
 * sample, and the test port's PPS_PULSE is an edge on its PPS input.
 *
 * With the property shutdown-log=PATH the card appends one line to PATH
 * when the machine shuts down (with -no-reboot a guest reboot is one):
 * whether its engines, source and bus mastering were still on. A driver's
 * .shutdown must have stopped them; the tests' shutdown suite reads it.
 *
 * All of the emulated card runs under the BQL: MMIO handlers and the two channel
 * timers (QEMU_CLOCK_VIRTUAL) never run concurrently.
 *
 * This file is QEMU code (QEMU's coding style), built into a QEMU binary by
 * tests/qemu/build-qemu.sh; it is not part of the driver.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "qemu/units.h"
#include "qemu/host-utils.h"
#include "qemu/timer.h"
#include "qemu/module.h"
#include "qemu/log.h"
#include "qemu/error-report.h"
#include "qapi/error.h"
#include "hw/pci/pci.h"
#include "hw/pci/msix.h"
#include "hw/qdev-properties.h"
#include "qom/object.h"
#include "sysemu/dma.h"
#include "sysemu/runstate.h"
#include <zlib.h>

#include "fpga_p2p_regs.h"
#include "fpga_p2p.h"
#include "fpga_card_test.h"

#define TYPE_FPGA_CARD "radar-fpga-card"
OBJECT_DECLARE_SIMPLE_TYPE(FpgaCard, FPGA_CARD)

#define FC_META_DEPTH           64
#define FC_TAG_DEPTH            64
#define FC_PB_FRAMES            8
#define FC_PB_FRAME_BYTES       (4 * MiB)
#define FC_MAX_FRAME_BYTES      (64 * MiB)
#define FC_XDMA_VERSION         0x06
/* The card resynchronises its clock rather than lag more than this. */
#define FC_MAX_LAG_NS           (100 * 1000 * 1000LL)
/* Bytes one step moves at most (one DMA write or read). */
#define FC_STEP_BYTES           (64 * KiB)
/* Work one timer callback does before it lets the vCPUs run. */
#define FC_BUDGET_BYTES         (1 * MiB)
/* First bit of each error field of the status register. */
#define FC_READ_ERROR           (1u << 9)
#define FC_WRITE_ERROR          (1u << 14)
#define FC_DESC_ERROR           (1u << 19)
/* A stuck C2H engine keeps writing its last destination this often. */
#define FC_STUCK_PERIOD_NS      (5 * 1000 * 1000LL)
#define FC_MSIX_BAR             4
/* PPS input: pulse times the card holds until the driver pops them. */
#define FC_PPS_DEPTH            4

typedef struct FcChan {
    uint32_t control;
    uint32_t int_mask;
    uint32_t status;            /* sticky bits 23:1 */
    uint32_t completed;
    uint32_t desc_lo;
    uint32_t desc_hi;
    uint32_t adj;
    uint32_t credits;
    bool running;               /* Run set and not halted */
    bool irq_line;              /* request level, for edges */
    bool have_desc;
    bool inject_error;
    uint64_t next;              /* bus address of the next descriptor */
    uint32_t d_ctrl;            /* the current descriptor */
    uint32_t d_len;
    uint64_t d_src;
    uint64_t d_dst;
    uint64_t d_next;
    uint32_t d_done;            /* its bytes moved so far */
    uint64_t last_dst;          /* where the last data went (stuck engine) */
} FcChan;

typedef struct FcMeta {
    uint64_t seq;
    uint64_t ts;
    uint32_t bytes;
    uint32_t crc;
    uint32_t flags;
    uint32_t dropped;
} FcMeta;

/* The frame source: the frame in progress. */
typedef struct FcSrc {
    bool active;
    uint32_t source;
    uint64_t next_seq;
    uint64_t seq;
    uint64_t ts;
    uint32_t frame_bytes;
    uint32_t chunk_bytes;
    uint32_t valid_bytes;       /* < frame_bytes for a short frame */
    uint32_t corrupt_at;        /* byte flipped after the CRC, or ~0 */
    uint32_t off;               /* bytes of the frame streamed */
    uint32_t chunk_off;
    uint32_t crc;               /* zlib running CRC-32 */
    uint32_t flags;
    uint32_t dropped;           /* drops since the last delivered frame */
    int64_t next_due;           /* when the next chunk may go */
    uint32_t pb_index;
    /* Completion records (FP_UB_CTRL_COMPLETION, latched at ENABLE). */
    bool completion;
    bool rec_pending;           /* the chunk's record goes next */
    uint32_t rec_off;           /* its bytes streamed */
    struct fpga_p2p_completion rec;
} FcSrc;

/*
 * The card's clock (board/fpga/registers.md, "Time"): nanoseconds that run
 * from QEMU's virtual clock at the oscillator's rate, 1 + ppb_error / 1e9,
 * trimmed by the frequency word (2^-32 per unit). It is kept as its value
 * at an instant (the anchor) and a rate: a change of rate re-anchors it, so
 * the count is continuous; SET and STEP re-anchor it at the new value, as
 * one operation. Like the oscillator it counts, it runs from power-on and
 * keeps running over a reset of the PCI function.
 */
typedef struct FcClock {
    int64_t anchor_virt;        /* QEMU_CLOCK_VIRTUAL ns of the anchor */
    uint64_t anchor;            /* the clock's value then */
    int32_t freq;               /* FP_UB_TIME_FREQ */
    int32_t ppb_error;          /* the oscillator's frequency error */
    uint32_t latch_hi;          /* high half latched by a NOW_LO read */
    uint64_t set;               /* FP_UB_TIME_SET_* */
    uint64_t step;              /* FP_UB_TIME_STEP_* */
    uint32_t pps_ctrl;
    uint64_t pps[FC_PPS_DEPTH];
    uint32_t pps_head;
    uint32_t pps_count;
    uint32_t pps_lost;
    uint32_t pulses;            /* edges the harness sent */
} FcClock;

typedef struct FcDet {
    uint32_t tag;
    uint32_t bytes;
    uint8_t *data;              /* FC_TEST_DET_MAX bytes */
} FcDet;

struct FpgaCard {
    PCIDevice parent_obj;

    MemoryRegion bar_user;
    MemoryRegion bar_xdma;
    MemoryRegion bar_test;
    QEMUTimer *c2h_timer;
    QEMUTimer *h2c_timer;
    QEMUTimer *stuck_timer;
    QEMUTimer *meta_timer;
    Notifier shutdown;
    char *shutdown_log;         /* property: where the state at shutdown goes */
    char *adc_recording;        /* property: the front end's frames, raw */
    uint8_t *adc_rec;           /* the recording, read at realize */
    size_t adc_rec_len;
    int32_t clock_ppm;          /* property: the oscillator's error, ppm */

    /* Not cleared by a reset (fc_reset_state clears what follows it). */
    FcClock clock;

    FcChan h2c;
    FcChan c2h;
    uint32_t irq_chan_en;
    uint32_t irq_user_en;
    uint32_t chan_vec[2];
    uint32_t credit_mode;
    bool intx;

    uint32_t scratch;
    uint32_t ctrl;
    uint32_t frame_bytes;
    uint32_t chunk_bytes;
    uint32_t chunk_period_ns;
    uint32_t playback_count;
    uint32_t frame_credits;
    uint32_t drops_no_slot;
    uint32_t drops_fault;
    uint32_t frames_sent;
    bool meta_overflow;
    FcMeta meta[FC_META_DEPTH];
    uint32_t meta_head;
    uint32_t meta_count;
    uint32_t tags[FC_TAG_DEPTH][2];     /* tag word, bytes */
    uint32_t tag_head;
    uint32_t tag_count;
    uint32_t tag_bytes;
    uint32_t h2c_packets;
    uint32_t h2c_last_tag;
    uint32_t h2c_last_bytes;
    uint32_t h2c_last_crc;
    uint32_t h2c_errors;

    FcSrc src;

    /* H2C sink: the packet in progress. */
    bool pkt_active;
    uint32_t pkt_tag;
    uint32_t pkt_expect;
    uint32_t pkt_got;
    uint32_t pkt_crc;
    uint8_t *pkt_det;           /* detection packet being received */

    uint8_t *pb[FC_PB_FRAMES];  /* playback memory, on first use */
    uint32_t pb_len[FC_PB_FRAMES];

    FcDet det[FC_TEST_DET_DEPTH];
    uint32_t det_head;
    uint32_t det_count;

    /* Fault injection and counters (test port). */
    uint32_t drop_every;
    uint32_t short_every;
    uint32_t corrupt_every;
    uint32_t lose_irqs;
    uint32_t meta_late_every;
    bool meta_late_pending;
    FcMeta meta_late;
    uint32_t c2h_stuck;         /* FC_TEST_C2H_STUCK: 1 writes, 2 does not */
    bool all_ones;
    uint32_t st[FC_TEST_STATS];

    uint8_t buf[FC_STEP_BYTES];
};

static int64_t fc_now(void)
{
    return qemu_clock_get_ns(QEMU_CLOCK_VIRTUAL);
}

static void fc_kick(FpgaCard *s, bool c2h)
{
    timer_mod(c2h ? s->c2h_timer : s->h2c_timer, fc_now());
}

/* --- the card's clock ----------------------------------------------------- */

/* The clock's rate offset in 2^-32 units: the oscillator's and the trim. */
static int64_t fc_clock_rate(FpgaCard *s)
{
    /* |ppb| * 2^32 < 2^63 for any int32. */
    return (int64_t)s->clock.freq +
           (int64_t)s->clock.ppb_error * (1LL << 32) / 1000000000;
}

/* The clock's value at virtual time @virt (not before its anchor). */
static uint64_t fc_clock_at(FpgaCard *s, int64_t virt)
{
    FcClock *c = &s->clock;
    int64_t dv = MAX(virt - c->anchor_virt, 0);
    uint64_t lo, hi;

    muls64(&lo, &hi, dv, fc_clock_rate(s));
    /* (dv * rate) >> 32, arithmetic: |rate| < 2^32, so it fits. */
    return c->anchor + dv + (int64_t)((hi << 32) | (lo >> 32));
}

/* Re-anchor at the current instant with value @value. */
static void fc_clock_anchor(FpgaCard *s, uint64_t value)
{
    s->clock.anchor_virt = fc_now();
    s->clock.anchor = value;
}

static uint64_t fc_clock_now(FpgaCard *s)
{
    return fc_clock_at(s, fc_now());
}

/* An edge on the PPS input: its time goes to the FIFO while enabled. */
static void fc_pps_edge(FpgaCard *s)
{
    FcClock *c = &s->clock;

    c->pulses++;
    if (!(c->pps_ctrl & FP_TIME_PPS_ENABLE)) {
        return;
    }
    if (c->pps_count == FC_PPS_DEPTH) {
        c->pps_lost++;
        return;
    }
    c->pps[(c->pps_head + c->pps_count) % FC_PPS_DEPTH] = fc_clock_now(s);
    c->pps_count++;
}

static uint32_t fc_time_read(FpgaCard *s, uint32_t off)
{
    FcClock *c = &s->clock;
    uint64_t v;

    switch (off) {
    case FP_UB_TIME_CAPS:
        return FP_TIME_CAP_CLOCK | FP_TIME_CAP_PPS_IN | FC_PPS_DEPTH << 8;
    case FP_UB_TIME_NOW_LO:
        v = fc_clock_now(s);
        c->latch_hi = v >> 32;
        return (uint32_t)v;
    case FP_UB_TIME_NOW_HI:
        return c->latch_hi;
    case FP_UB_TIME_SET_LO:
        return (uint32_t)c->set;
    case FP_UB_TIME_SET_HI:
        return c->set >> 32;
    case FP_UB_TIME_STEP_LO:
        return (uint32_t)c->step;
    case FP_UB_TIME_STEP_HI:
        return c->step >> 32;
    case FP_UB_TIME_FREQ:
        return (uint32_t)c->freq;
    case FP_UB_TIME_PPS_CTRL:
        return c->pps_ctrl;
    case FP_UB_TIME_PPS_LEVEL:
        return c->pps_count;
    case FP_UB_TIME_PPS_TS_LO:
        return c->pps_count ? (uint32_t)c->pps[c->pps_head] : 0;
    case FP_UB_TIME_PPS_TS_HI:
        return c->pps_count ? c->pps[c->pps_head] >> 32 : 0;
    case FP_UB_TIME_PPS_LOST:
        return c->pps_lost;
    default:
        return 0;
    }
}

static void fc_time_write(FpgaCard *s, uint32_t off, uint32_t val)
{
    FcClock *c = &s->clock;

    switch (off) {
    case FP_UB_TIME_SET_LO:
        c->set = (c->set & ~0xffffffffULL) | val;
        break;
    case FP_UB_TIME_SET_HI:
        c->set = (c->set & 0xffffffffULL) | (uint64_t)val << 32;
        break;
    case FP_UB_TIME_STEP_LO:
        c->step = (c->step & ~0xffffffffULL) | val;
        break;
    case FP_UB_TIME_STEP_HI:
        c->step = (c->step & 0xffffffffULL) | (uint64_t)val << 32;
        break;
    case FP_UB_TIME_CMD:
        if ((val & FP_TIME_CMD_SET) && (val & FP_TIME_CMD_STEP)) {
            s->st[FC_ST_PROTOCOL_ERRORS]++;
        } else if (val & FP_TIME_CMD_SET) {
            fc_clock_anchor(s, c->set);
        } else if (val & FP_TIME_CMD_STEP) {
            fc_clock_anchor(s, fc_clock_now(s) + c->step);
        }
        break;
    case FP_UB_TIME_FREQ:
        fc_clock_anchor(s, fc_clock_now(s));
        c->freq = (int32_t)val;
        break;
    case FP_UB_TIME_PPS_CTRL:
        if ((val & FP_TIME_PPS_ENABLE) && !(c->pps_ctrl & FP_TIME_PPS_ENABLE)) {
            c->pps_count = 0;
            c->pps_lost = 0;
        }
        c->pps_ctrl = val & FP_TIME_PPS_ENABLE;
        break;
    case FP_UB_TIME_PPS_POP:
        if (!c->pps_count) {
            s->st[FC_ST_PROTOCOL_ERRORS]++;
            break;
        }
        c->pps_head = (c->pps_head + 1) % FC_PPS_DEPTH;
        c->pps_count--;
        break;
    default:
        s->st[FC_ST_PROTOCOL_ERRORS]++;
    }
}

/* --- interrupts ---------------------------------------------------------- */

static bool fc_chan_req(FpgaCard *s, FcChan *ch, uint32_t bit)
{
    return (s->irq_chan_en & bit) &&
           (ch->status & ch->int_mask & ch->control & XDMA_ST_CLEARABLE);
}

/*
 * MSI-X: a message on each rising edge of a channel's request (unless the
 * test port says to lose it). INTx: the level of the OR of the requests.
 */
static void fc_update_irq(FpgaCard *s)
{
    PCIDevice *pdev = PCI_DEVICE(s);
    bool fire = false, req, any;

    req = fc_chan_req(s, &s->h2c, FP_IRQ_H2C0);
    fire |= req && !s->h2c.irq_line;
    s->h2c.irq_line = req;
    any = req;
    req = fc_chan_req(s, &s->c2h, FP_IRQ_C2H0);
    fire |= req && !s->c2h.irq_line;
    s->c2h.irq_line = req;
    any |= req;

    if (msix_enabled(pdev)) {
        if (s->intx) {
            pci_set_irq(pdev, 0);
            s->intx = false;
        }
        if (!fire) {
            return;
        }
        if (s->lose_irqs) {
            s->lose_irqs--;
            s->st[FC_ST_IRQS_LOST]++;
            return;
        }
        s->st[FC_ST_IRQS]++;
        msix_notify(pdev, 0);
        return;
    }
    if (any != s->intx) {
        s->intx = any;
        if (any) {
            s->st[FC_ST_IRQS]++;
        }
        pci_set_irq(pdev, any);
    }
}

/* --- XDMA channels ------------------------------------------------------- */

static bool fc_dma_read(FpgaCard *s, uint64_t addr, void *buf, uint32_t len)
{
    return pci_dma_read(PCI_DEVICE(s), addr, buf, len) == MEMTX_OK;
}

static bool fc_dma_write(FpgaCard *s, uint64_t addr, const void *buf,
                         uint32_t len)
{
    return pci_dma_write(PCI_DEVICE(s), addr, buf, len) == MEMTX_OK;
}

/* The channel stops with an error. */
static void fc_halt(FpgaCard *s, FcChan *ch, uint32_t bits)
{
    ch->status |= bits;
    ch->running = false;
    ch->have_desc = false;
    s->st[FC_ST_HALTS]++;
    fc_update_irq(s);
}

/*
 * Fetch the next descriptor if the channel has none; false if it cannot
 * (stopped, no credit, or an error that halted it).
 */
static bool fc_fetch(FpgaCard *s, FcChan *ch, uint32_t cbit)
{
    struct xdma_desc d;

    if (!ch->running) {
        return false;
    }
    if (ch->have_desc) {
        return true;
    }
    if ((s->credit_mode & cbit) && !ch->credits) {
        s->st[FC_ST_STALLS]++;
        return false;
    }
    if (ch->next % sizeof(d)) {
        fc_halt(s, ch, XDMA_ST_ALIGN_MISMATCH);
        return false;
    }
    if (!fc_dma_read(s, ch->next, &d, sizeof(d))) {
        s->st[FC_ST_DMA_ERRORS]++;
        fc_halt(s, ch, FC_DESC_ERROR);
        return false;
    }
    if (ch->inject_error) {
        ch->inject_error = false;
        fc_halt(s, ch, FC_DESC_ERROR);
        return false;
    }
    ch->d_ctrl = le32_to_cpu(d.control);
    ch->d_len = le32_to_cpu(d.bytes) & XDMA_DESC_LEN_MASK;
    ch->d_src = le32_to_cpu(d.src_lo) | (uint64_t)le32_to_cpu(d.src_hi) << 32;
    ch->d_dst = le32_to_cpu(d.dst_lo) | (uint64_t)le32_to_cpu(d.dst_hi) << 32;
    ch->d_next = le32_to_cpu(d.next_lo) |
                 (uint64_t)le32_to_cpu(d.next_hi) << 32;
    if (ch->d_ctrl >> XDMA_DESC_MAGIC_SHIFT != XDMA_DESC_MAGIC) {
        fc_halt(s, ch, XDMA_ST_MAGIC_STOPPED);
        return false;
    }
    if (!ch->d_len) {
        fc_halt(s, ch, XDMA_ST_INVALID_LENGTH);
        return false;
    }
    if (s->credit_mode & cbit) {
        ch->credits--;
    }
    ch->have_desc = true;
    ch->d_done = 0;
    return true;
}

/* The current descriptor is done. */
static void fc_desc_done(FpgaCard *s, FcChan *ch, bool c2h, bool eop)
{
    if (c2h) {
        struct xdma_c2h_result res = {
            .status = cpu_to_le32(XDMA_RESULT_MAGIC << XDMA_RESULT_MAGIC_SHIFT |
                                  (eop ? XDMA_RESULT_EOP : 0)),
            .length = cpu_to_le32(ch->d_done),
        };

        if (!fc_dma_write(s, ch->d_src, &res, 8)) {
            s->st[FC_ST_DMA_ERRORS]++;
            fc_halt(s, ch, FC_WRITE_ERROR);
            return;
        }
    }
    ch->completed++;
    ch->have_desc = false;
    ch->next = ch->d_next;
    if (ch->d_ctrl & XDMA_DESC_COMPLETED) {
        ch->status |= XDMA_ST_DESC_COMPLETED;
    }
    if (ch->d_ctrl & XDMA_DESC_STOP) {
        ch->status |= XDMA_ST_DESC_STOPPED;
        ch->running = false;
    }
    fc_update_irq(s);
}

static bool fc_busy(FpgaCard *s, FcChan *ch)
{
    /*
     * Transfers complete within one step here, so a channel is busy only
     * while it runs with a descriptor in hand, or when it is stuck.
     */
    return (ch == &s->c2h && s->c2h_stuck) || (ch->running && ch->have_desc);
}

static uint32_t fc_chan_read(FpgaCard *s, FcChan *ch, uint32_t target,
                             uint32_t reg)
{
    uint32_t v;

    switch (reg) {
    case XDMA_CH_ID:
        return XDMA_ID_SUBSYS_VALUE << 20 | target << 16 | XDMA_ID_STREAM |
               FC_XDMA_VERSION;
    case XDMA_CH_CONTROL:
        return ch->control;
    case XDMA_CH_STATUS:
        return ch->status | (fc_busy(s, ch) ? XDMA_ST_BUSY : 0);
    case XDMA_CH_STATUS_RC:
        v = ch->status | (fc_busy(s, ch) ? XDMA_ST_BUSY : 0);
        ch->status = 0;
        fc_update_irq(s);
        return v;
    case XDMA_CH_COMPLETED:
        return ch->completed;
    case XDMA_CH_INT_MASK:
        return ch->int_mask;
    default:
        return 0;
    }
}

static void fc_set_control(FpgaCard *s, FcChan *ch, uint32_t val)
{
    bool was = ch->control & XDMA_CTRL_RUN;
    bool run = val & XDMA_CTRL_RUN;

    ch->control = val;
    if (run && !was) {
        ch->running = true;
        ch->completed = 0;
        ch->have_desc = false;
        ch->next = ch->desc_lo | (uint64_t)ch->desc_hi << 32;
        if (ch == &s->h2c) {
            s->pkt_active = false;
        }
    } else if (!run && was) {
        /*
         * Nothing more starts; the transfer under way was finished within
         * its step, so the engine is idle at once (unless stuck).
         */
        ch->running = false;
        ch->have_desc = false;
        ch->credits = 0;
    }
}

static void fc_chan_write(FpgaCard *s, FcChan *ch, uint32_t reg, uint32_t val)
{
    switch (reg) {
    case XDMA_CH_CONTROL:
        fc_set_control(s, ch, val);
        break;
    case XDMA_CH_CONTROL_W1S:
        fc_set_control(s, ch, ch->control | val);
        break;
    case XDMA_CH_CONTROL_W1C:
        fc_set_control(s, ch, ch->control & ~val);
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
        s->st[FC_ST_PROTOCOL_ERRORS]++;
        return;
    }
    fc_update_irq(s);
}

static uint32_t fc_sg_read(FcChan *ch, uint32_t target, uint32_t reg)
{
    switch (reg) {
    case XDMA_SG_ID:
        return XDMA_ID_SUBSYS_VALUE << 20 | target << 16 | FC_XDMA_VERSION;
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

static void fc_sg_write(FpgaCard *s, FcChan *ch, uint32_t reg, uint32_t val)
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
            s->st[FC_ST_PROTOCOL_ERRORS]++;
            break;
        }
        ch->credits += val;
        break;
    default:
        s->st[FC_ST_PROTOCOL_ERRORS]++;
    }
}

static uint32_t fc_irq_read(FpgaCard *s, uint32_t reg)
{
    switch (reg) {
    case XDMA_CH_ID:
        return XDMA_ID_SUBSYS_VALUE << 20 | 2 << 16 | FC_XDMA_VERSION;
    case XDMA_IRQ_USER_EN:
        return s->irq_user_en;
    case XDMA_IRQ_CHAN_EN:
        return s->irq_chan_en;
    case XDMA_IRQ_CHAN_REQ:
    case XDMA_IRQ_CHAN_PEND:
        return (fc_chan_req(s, &s->h2c, FP_IRQ_H2C0) ? FP_IRQ_H2C0 : 0) |
               (fc_chan_req(s, &s->c2h, FP_IRQ_C2H0) ? FP_IRQ_C2H0 : 0);
    case XDMA_IRQ_CHAN_VEC(0):
        return s->chan_vec[0];
    default:
        return 0;
    }
}

static void fc_irq_write(FpgaCard *s, uint32_t reg, uint32_t val)
{
    switch (reg) {
    case XDMA_IRQ_USER_EN:
        s->irq_user_en = val;
        break;
    case XDMA_IRQ_CHAN_EN:
        s->irq_chan_en = val;
        break;
    case XDMA_IRQ_CHAN_EN_W1S:
        s->irq_chan_en |= val;
        break;
    case XDMA_IRQ_CHAN_EN_W1C:
        s->irq_chan_en &= ~val;
        break;
    case XDMA_IRQ_CHAN_VEC(0):
        s->chan_vec[0] = val;
        break;
    default:
        s->st[FC_ST_PROTOCOL_ERRORS]++;
        return;
    }
    fc_update_irq(s);
}

static uint32_t fc_xdma_read(FpgaCard *s, uint32_t off)
{
    uint32_t target = off >> XDMA_TGT_SHIFT;
    uint32_t reg = off & 0xff;

    /* Channel 0 only; other channels read as absent. */
    if (off & 0xf00) {
        return 0;
    }
    switch (target << XDMA_TGT_SHIFT) {
    case XDMA_TGT_H2C:
        return fc_chan_read(s, &s->h2c, target, reg);
    case XDMA_TGT_C2H:
        return fc_chan_read(s, &s->c2h, target, reg);
    case XDMA_TGT_IRQ:
        return fc_irq_read(s, reg);
    case XDMA_TGT_CONFIG:
        return reg ? 0 : XDMA_ID_SUBSYS_VALUE << 20 | 3 << 16 |
                         FC_XDMA_VERSION;
    case XDMA_TGT_H2C_SGDMA:
        return fc_sg_read(&s->h2c, target, reg);
    case XDMA_TGT_C2H_SGDMA:
        return fc_sg_read(&s->c2h, target, reg);
    case XDMA_TGT_SGDMA_COMMON:
        if (reg == XDMA_CH_ID) {
            return XDMA_ID_SUBSYS_VALUE << 20 | 6 << 16 | FC_XDMA_VERSION;
        }
        return reg == XDMA_SGC_CREDIT_MODE ? s->credit_mode : 0;
    default:
        return 0;
    }
}

static void fc_xdma_write(FpgaCard *s, uint32_t off, uint32_t val)
{
    uint32_t reg = off & 0xff;

    if (off & 0xf00) {
        s->st[FC_ST_PROTOCOL_ERRORS]++;
        return;
    }
    switch (off & ~0xfffu) {
    case XDMA_TGT_H2C:
        fc_chan_write(s, &s->h2c, reg, val);
        if (reg <= XDMA_CH_CONTROL_W1S) {
            fc_kick(s, false);
        }
        break;
    case XDMA_TGT_C2H:
        fc_chan_write(s, &s->c2h, reg, val);
        if (reg <= XDMA_CH_CONTROL_W1S) {
            fc_kick(s, true);
        }
        break;
    case XDMA_TGT_IRQ:
        fc_irq_write(s, reg, val);
        break;
    case XDMA_TGT_H2C_SGDMA:
        fc_sg_write(s, &s->h2c, reg, val);
        if (reg == XDMA_SG_CREDITS) {
            fc_kick(s, false);
        }
        break;
    case XDMA_TGT_C2H_SGDMA:
        fc_sg_write(s, &s->c2h, reg, val);
        if (reg == XDMA_SG_CREDITS) {
            fc_kick(s, true);
        }
        break;
    case XDMA_TGT_SGDMA_COMMON:
        if (reg == XDMA_SGC_CREDIT_MODE) {
            s->credit_mode = val;
        } else if (reg == XDMA_SGC_CREDIT_MODE_W1S) {
            s->credit_mode |= val;
        } else if (reg == XDMA_SGC_CREDIT_MODE_W1C) {
            s->credit_mode &= ~val;
        } else {
            s->st[FC_ST_PROTOCOL_ERRORS]++;
        }
        break;
    default:
        s->st[FC_ST_PROTOCOL_ERRORS]++;
    }
}

/* --- user block ---------------------------------------------------------- */

static void fc_set_ctrl(FpgaCard *s, uint32_t val)
{
    bool was = s->ctrl & FP_UB_CTRL_ENABLE;
    bool en = val & FP_UB_CTRL_ENABLE;
    uint32_t source = (val & FP_UB_CTRL_SOURCE) >> 4;

    if (en && !was) {
        if (!s->frame_bytes || !s->chunk_bytes ||
            s->frame_bytes % s->chunk_bytes ||
            s->frame_bytes > FC_MAX_FRAME_BYTES ||
            source > FPGA_P2P_SRC_PLAYBACK) {
            s->st[FC_ST_PROTOCOL_ERRORS]++;
            val &= ~FP_UB_CTRL_ENABLE;
        } else {
            s->src.next_seq = 0;
            s->src.dropped = 0;
            s->src.active = false;
            s->src.next_due = fc_now();
            s->src.source = source;
            /* The geometry holds until the next enable. */
            s->src.frame_bytes = s->frame_bytes;
            s->src.chunk_bytes = s->chunk_bytes;
            s->src.completion = val & FP_UB_CTRL_COMPLETION;
            s->drops_no_slot = 0;
            s->drops_fault = 0;
            s->frames_sent = 0;
            s->meta_overflow = false;
        }
    } else if (!en && was) {
        /*
         * The frame in progress is abandoned at once: its remaining bytes
         * are never sent and no metadata is pushed for it. Frame credits
         * and the metadata FIFO are cleared.
         */
        s->src.active = false;
        s->frame_credits = 0;
        s->meta_count = 0;
        s->meta_late_pending = false;
    }
    s->ctrl = val;
}

static uint32_t fc_user_read(FpgaCard *s, uint32_t off)
{
    FcMeta *e = &s->meta[s->meta_head];
    bool have = s->meta_count;

    if (off >= FP_UB_TIME_CAPS && off < FP_UB_TIME_CAPS + 0x100) {
        return fc_time_read(s, off);
    }
    switch (off) {
    case FP_UB_ID:
        return FP_UB_ID_VALUE;
    case FP_UB_VERSION:
        return FP_UB_VERSION_VALUE;
    case FP_UB_CAPS:
        return FP_UB_CAP_ADC | FP_UB_CAP_TEST_PATTERN | FP_UB_CAP_PLAYBACK |
               FP_UB_CAP_COMPLETION;
    case FP_UB_SCRATCH:
        return s->scratch;
    case FP_UB_META_DEPTH:
        return FC_META_DEPTH;
    case FP_UB_TAG_DEPTH:
        return FC_TAG_DEPTH;
    case FP_UB_PLAYBACK_FRAMES:
        return FC_PB_FRAMES;
    case FP_UB_PLAYBACK_FRAME_BYTES:
        return FC_PB_FRAME_BYTES;
    case FP_UB_MAX_FRAME_BYTES:
        return FC_MAX_FRAME_BYTES;
    case FP_UB_CTRL:
        return s->ctrl;
    case FP_UB_STATUS:
        return (s->ctrl & FP_UB_CTRL_ENABLE ? FP_UB_STATUS_RUNNING : 0) |
               (s->meta_overflow ? FP_UB_STATUS_META_OVERFLOW : 0);
    case FP_UB_FRAME_BYTES:
        return s->frame_bytes;
    case FP_UB_CHUNK_BYTES:
        return s->chunk_bytes;
    case FP_UB_CHUNK_PERIOD_NS:
        return s->chunk_period_ns;
    case FP_UB_PLAYBACK_COUNT:
        return s->playback_count;
    case FP_UB_FRAME_CREDITS:
        return s->frame_credits;
    case FP_UB_DROPS_NO_SLOT:
        return s->drops_no_slot;
    case FP_UB_DROPS_FAULT:
        return s->drops_fault;
    case FP_UB_FRAMES_SENT:
        return s->frames_sent;
    case FP_UB_META_LEVEL:
        return s->meta_count;
    case FP_UB_META_SEQ_LO:
        return have ? (uint32_t)e->seq : 0;
    case FP_UB_META_SEQ_HI:
        return have ? (uint32_t)(e->seq >> 32) : 0;
    case FP_UB_META_TS_LO:
        return have ? (uint32_t)e->ts : 0;
    case FP_UB_META_TS_HI:
        return have ? (uint32_t)(e->ts >> 32) : 0;
    case FP_UB_META_BYTES:
        return have ? e->bytes : 0;
    case FP_UB_META_CRC:
        return have ? e->crc : 0;
    case FP_UB_META_FLAGS:
        return have ? e->flags : 0;
    case FP_UB_META_DROPPED:
        return have ? e->dropped : 0;
    case FP_UB_TAG_LEVEL:
        return s->tag_count;
    case FP_UB_H2C_PACKETS:
        return s->h2c_packets;
    case FP_UB_H2C_LAST_TAG:
        return s->h2c_last_tag;
    case FP_UB_H2C_LAST_BYTES:
        return s->h2c_last_bytes;
    case FP_UB_H2C_LAST_CRC:
        return s->h2c_last_crc;
    case FP_UB_H2C_ERRORS:
        return s->h2c_errors;
    default:
        return 0;
    }
}

static void fc_user_write(FpgaCard *s, uint32_t off, uint32_t val)
{
    uint32_t i;

    if (off >= FP_UB_TIME_CAPS && off < FP_UB_TIME_CAPS + 0x100) {
        fc_time_write(s, off, val);
        return;
    }
    switch (off) {
    case FP_UB_SCRATCH:
        s->scratch = val;
        break;
    case FP_UB_CTRL:
        fc_set_ctrl(s, val);
        fc_kick(s, true);
        break;
    case FP_UB_FRAME_BYTES:
        s->frame_bytes = val;
        break;
    case FP_UB_CHUNK_BYTES:
        s->chunk_bytes = val;
        break;
    case FP_UB_CHUNK_PERIOD_NS:
        s->chunk_period_ns = val;
        break;
    case FP_UB_PLAYBACK_COUNT:
        s->playback_count = val;
        break;
    case FP_UB_FRAME_CREDIT_ADD:
        s->frame_credits += val;
        if (s->frame_credits > FC_META_DEPTH) {
            s->st[FC_ST_PROTOCOL_ERRORS]++;
        }
        fc_kick(s, true);
        break;
    case FP_UB_META_POP:
        if (!s->meta_count) {
            s->st[FC_ST_PROTOCOL_ERRORS]++;
            break;
        }
        s->meta_head = (s->meta_head + 1) % FC_META_DEPTH;
        s->meta_count--;
        break;
    case FP_UB_TAG_BYTES:
        s->tag_bytes = val;
        break;
    case FP_UB_TAG_PUSH:
        if (s->tag_count == FC_TAG_DEPTH) {
            s->st[FC_ST_PROTOCOL_ERRORS]++;
            break;
        }
        i = (s->tag_head + s->tag_count) % FC_TAG_DEPTH;
        s->tags[i][0] = val;
        s->tags[i][1] = s->tag_bytes;
        s->tag_count++;
        fc_kick(s, false);
        break;
    default:
        s->st[FC_ST_PROTOCOL_ERRORS]++;
    }
}

/* --- frame sources ------------------------------------------------------- */

/* Word @w of frame @seq of the test pattern (board/fpga/test-pattern.md). */
static uint32_t fc_pattern(uint64_t seq, uint32_t w, uint32_t chunk_words)
{
    uint32_t c = w / chunk_words;
    uint32_t k = w - c * chunk_words;
    uint32_t lo = (uint32_t)seq, hi = (uint32_t)(seq >> 32);

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
        return (w * 0x9E3779B1u) ^ (lo * 0x85EBCA6Bu) ^ hi;
    }
}

/* Noise of the emulated "ADC" without a recording: a hash of frame and word. */
static uint32_t fc_noise(uint64_t seq, uint32_t w)
{
    uint64_t x = seq * 0x9E3779B97F4A7C15ULL + w;

    x ^= x >> 31;
    x *= 0xBF58476D1CE4E5B9ULL;
    x ^= x >> 29;
    return (uint32_t)x;
}

/*
 * The ADC source. With a front-end recording (property adc-recording: raw
 * frames in the layout of docs/requirements.md, concatenated) frame @seq
 * is the recording's frame seq mod n, the front end running on whatever
 * the host uploads; a recording shorter than one frame, or none, gives
 * noise.
 */
static uint32_t fc_adc(FpgaCard *s, uint64_t seq, uint32_t w)
{
    FcSrc *f = &s->src;
    uint64_t frames = f->frame_bytes ? s->adc_rec_len / f->frame_bytes : 0;
    uint32_t v;

    if (!frames) {
        return fc_noise(seq, w);
    }
    memcpy(&v, s->adc_rec + (seq % frames) * f->frame_bytes + (size_t)w * 4, 4);
    return le32_to_cpu(v);
}

static uint32_t fc_word(FpgaCard *s, uint32_t w)
{
    FcSrc *f = &s->src;
    uint8_t *pb = s->pb[f->pb_index];
    uint32_t v = 0;

    switch (f->source) {
    case FPGA_P2P_SRC_TEST_PATTERN:
        return fc_pattern(f->seq, w, f->chunk_bytes / 4);
    case FPGA_P2P_SRC_PLAYBACK:
        if (pb && (uint64_t)w * 4 + 4 <= s->pb_len[f->pb_index]) {
            memcpy(&v, pb + (size_t)w * 4, 4);
        }
        return le32_to_cpu(v);
    default:
        return fc_adc(s, f->seq, w);
    }
}

/* Generate @len bytes of the frame at the source's offset into s->buf. */
static void fc_fill(FpgaCard *s, uint32_t len)
{
    FcSrc *f = &s->src;
    uint8_t *p = s->buf;
    uint32_t i, crc_len;

    if (!(f->off & 3) && !(len & 3) && f->off + len <= f->valid_bytes) {
        for (i = 0; i < len / 4; i++) {
            uint32_t v = cpu_to_le32(fc_word(s, f->off / 4 + i));

            memcpy(p + 4 * i, &v, 4);
        }
    } else {
        for (i = 0; i < len; i++) {
            uint32_t pos = f->off + i;

            /* Zero padding after the valid bytes of a short frame. */
            p[i] = pos >= f->valid_bytes ? 0 :
                   fc_word(s, pos / 4) >> (8 * (pos & 3));
        }
    }
    crc_len = f->off >= f->valid_bytes ? 0 : MIN(len, f->valid_bytes - f->off);
    f->crc = crc32(f->crc, p, crc_len);
    /* Corruption after the CRC: the receiver must notice. */
    if (f->corrupt_at >= f->off && f->corrupt_at < f->off + len) {
        p[f->corrupt_at - f->off] ^= 0x01;
    }
}

static int64_t fc_period(FpgaCard *s)
{
    return MAX(s->chunk_period_ns, 1);
}

static int64_t fc_frame_ns(FpgaCard *s)
{
    return fc_period(s) * (s->src.frame_bytes / s->src.chunk_bytes);
}

/*
 * Frames that start while no slot is free are dropped whole. Without
 * credits every frame due up to now is dropped at once, so that a stalled
 * application costs the emulated card no time.
 */
static void fc_drop_due(FpgaCard *s, int64_t now)
{
    FcSrc *f = &s->src;
    int64_t frame_ns = fc_frame_ns(s);
    uint64_t n = 1 + (now - f->next_due) / frame_ns;
    uint64_t faults = 0;

    if (s->drop_every) {
        faults = (f->next_seq + n) / s->drop_every -
                 f->next_seq / s->drop_every;
    }
    f->next_seq += n;
    s->drops_fault += faults;
    s->drops_no_slot += n - faults;
    f->dropped += n;
    f->next_due += n * frame_ns;
}

/* Decide at frame start: deliver (credit taken) or drop. */
static bool fc_frame_start(FpgaCard *s, int64_t now)
{
    FcSrc *f = &s->src;
    uint64_t seq = f->next_seq;

    if (s->drop_every && seq % s->drop_every == s->drop_every - 1) {
        f->next_seq++;
        s->drops_fault++;
        f->dropped++;
        f->next_due += fc_frame_ns(s);
        return false;
    }
    if (!s->frame_credits) {
        fc_drop_due(s, now);
        return false;
    }
    /*
     * A frame can be delivered but is late: the emulation ran slower than
     * real time (the card never does). Catch up rather than drop.
     */
    if (now - f->next_due > FC_MAX_LAG_NS) {
        f->next_due = now;
    }
    f->next_seq++;
    s->frame_credits--;
    f->active = true;
    f->seq = seq;
    /* The card's clock at the frame's first sample. */
    f->ts = fc_clock_at(s, now);
    f->valid_bytes = f->frame_bytes;
    f->flags = 0;
    f->off = 0;
    f->chunk_off = 0;
    f->rec_pending = false;
    f->crc = crc32(0, NULL, 0);
    f->corrupt_at = ~0u;
    f->pb_index = s->playback_count ? seq % s->playback_count : 0;
    if (f->pb_index >= FC_PB_FRAMES) {
        f->pb_index = 0;
    }
    if (s->short_every && seq % s->short_every == s->short_every - 1) {
        f->valid_bytes = (f->frame_bytes / 2) & ~3u;
        f->flags |= FP_META_SHORT;
    }
    if (s->corrupt_every && seq % s->corrupt_every == s->corrupt_every - 1 &&
        f->valid_bytes) {
        f->corrupt_at = (uint32_t)(seq * 4099) % f->valid_bytes;
    }
    return true;
}

static void fc_meta_queue(FpgaCard *s, const FcMeta *m)
{
    if (s->meta_count == FC_META_DEPTH) {
        s->meta_overflow = true;
        s->st[FC_ST_PROTOCOL_ERRORS]++;
        return;
    }
    s->meta[(s->meta_head + s->meta_count) % FC_META_DEPTH] = *m;
    s->meta_count++;
}

/* A late entry goes first: the FIFO keeps frame order. */
static void fc_meta_flush_late(FpgaCard *s)
{
    if (s->meta_late_pending) {
        s->meta_late_pending = false;
        s->st[FC_ST_META_LATE]++;
        fc_meta_queue(s, &s->meta_late);
    }
}

static void fc_meta_timer(void *opaque)
{
    FpgaCard *s = opaque;

    if (s->ctrl & FP_UB_CTRL_ENABLE) {
        fc_meta_flush_late(s);
    }
    s->meta_late_pending = false;
}

/*
 * The frame's metadata, pushed before its last descriptor completes (the
 * contract); the test port can make it come 2 ms after it instead.
 */
static void fc_meta_push(FpgaCard *s)
{
    FcSrc *f = &s->src;
    FcMeta e = {
        .seq = f->seq,
        .ts = f->ts,
        .bytes = f->valid_bytes,
        .crc = f->crc,
        .flags = f->flags,
        .dropped = f->dropped,
    };

    f->dropped = 0;
    fc_meta_flush_late(s);
    if (s->meta_late_every &&
        f->seq % s->meta_late_every == s->meta_late_every - 1) {
        s->meta_late = e;
        s->meta_late_pending = true;
        timer_mod(s->meta_timer, fc_now() + 2 * 1000 * 1000);
        return;
    }
    fc_meta_queue(s, &e);
}

/*
 * The last byte of a chunk went: its completion record follows in the
 * stream (board/fpga/registers.md, "Completion records"): the frame's
 * chunks so far, the sequence number, the chunk and the card's clock.
 */
static void fc_record(FpgaCard *s, int64_t now)
{
    FcSrc *f = &s->src;
    uint32_t c = f->off / f->chunk_bytes - 1;

    f->rec = (struct fpga_p2p_completion) {
        .chunks = cpu_to_le32(c + 1),
        .magic = cpu_to_le32(FPGA_P2P_COMPLETION_MAGIC),
        .sequence = cpu_to_le64(f->seq),
        .chunk = cpu_to_le32(c),
        .timestamp_ns = cpu_to_le64(fc_clock_at(s, now)),
    };
    f->rec_off = 0;
    f->rec_pending = true;
}

/*
 * One step of capture: start a frame when it is due, or stream the next
 * piece of the frame (data, or a chunk's completion record) into the
 * current C2H descriptor. Returns the bytes moved (0: nothing to do; then
 * *wake is when to look again, or -1).
 */
static uint32_t fc_c2h_step(FpgaCard *s, int64_t *wake)
{
    FcSrc *f = &s->src;
    FcChan *ch = &s->c2h;
    int64_t now;
    uint32_t n;
    bool end, chunk_end;

    if (!(s->ctrl & FP_UB_CTRL_ENABLE) || s->c2h_stuck) {
        return 0;
    }
    now = fc_now();
    if (now < f->next_due) {
        *wake = f->next_due;
        return 0;
    }
    if (!f->active && !fc_frame_start(s, now)) {
        *wake = f->next_due;
        return 0;
    }
    if (!fc_fetch(s, ch, XDMA_SGC_CREDIT_C2H(0))) {
        return 0;       /* backpressure: wait for a kick */
    }

    if (f->rec_pending) {
        n = MIN(ch->d_len - ch->d_done, sizeof(f->rec) - f->rec_off);
        memcpy(s->buf, (uint8_t *)&f->rec + f->rec_off, n);
    } else {
        n = MIN(ch->d_len - ch->d_done, f->chunk_bytes - f->chunk_off);
        n = MIN(n, FC_STEP_BYTES);
        fc_fill(s, n);
    }
    ch->last_dst = ch->d_dst + ch->d_done;
    if (!fc_dma_write(s, ch->d_dst + ch->d_done, s->buf, n)) {
        s->st[FC_ST_DMA_ERRORS]++;
        fc_halt(s, ch, FC_WRITE_ERROR);
        return n;
    }
    ch->d_done += n;
    if (f->rec_pending) {
        f->rec_off += n;
        f->rec_pending = f->rec_off < sizeof(f->rec);
        chunk_end = !f->rec_pending;
    } else {
        f->off += n;
        f->chunk_off += n;
        chunk_end = f->chunk_off == f->chunk_bytes;
        if (chunk_end && f->completion) {
            /* In the same stream, so after the chunk's bytes. */
            fc_record(s, now);
            chunk_end = false;
        }
    }
    if (chunk_end) {
        f->chunk_off = 0;
        f->next_due += fc_period(s);
        s->st[FC_ST_CHUNKS]++;
    }
    end = chunk_end && f->off == f->frame_bytes;
    if (end) {
        fc_meta_push(s);
        f->active = false;
        s->frames_sent++;
        s->st[FC_ST_FRAMES_SENT]++;
    }
    /* A packet ends the descriptor early; the next one starts afresh. */
    if (ch->d_done == ch->d_len || end) {
        fc_desc_done(s, ch, true, end);
    }
    return n;
}

static void fc_c2h_timer(void *opaque)
{
    FpgaCard *s = opaque;
    uint32_t moved = 0, n;
    int64_t wake = -1;

    while (moved < FC_BUDGET_BYTES) {
        n = fc_c2h_step(s, &wake);
        if (!n) {
            if (wake >= 0) {
                timer_mod(s->c2h_timer, wake);
            }
            return;
        }
        moved += n;
    }
    /* More to do: let the vCPUs run first. */
    timer_mod(s->c2h_timer, fc_now());
}

/*
 * The detection packet just received, for tests (test port): the card keeps
 * the newest FC_TEST_DET_DEPTH (an overflow drops the oldest, counted) so
 * that the last record is always there to read. A packet larger than the
 * card's detection list memory is an h2c error, as on the card.
 */
static void fc_det_push(FpgaCard *s)
{
    FcDet *d;

    if (s->pkt_got > FC_TEST_DET_MAX) {
        s->h2c_errors++;
        return;
    }
    s->st[FC_ST_DET_RECORDS]++;
    if (s->det_count == FC_TEST_DET_DEPTH) {
        s->st[FC_ST_DET_OVERFLOWS]++;
        s->det_head = (s->det_head + 1) % FC_TEST_DET_DEPTH;
        s->det_count--;
    }
    d = &s->det[(s->det_head + s->det_count) % FC_TEST_DET_DEPTH];
    d->tag = s->pkt_tag;
    d->bytes = s->pkt_got;
    if (!d->data) {
        d->data = g_malloc0(FC_TEST_DET_MAX);
    }
    memcpy(d->data, s->pkt_det, d->bytes);
    s->det_count++;
}

/* One step of transmit: move up to FC_STEP_BYTES of a packet. */
static uint32_t fc_h2c_step(FpgaCard *s)
{
    FcChan *ch = &s->h2c;
    uint32_t n, target, index;
    uint8_t *pb = NULL;

    if (!fc_fetch(s, ch, XDMA_SGC_CREDIT_H2C(0))) {
        return 0;
    }
    if (!s->pkt_active) {
        s->pkt_active = true;
        s->pkt_got = 0;
        s->pkt_crc = crc32(0, NULL, 0);
        if (s->tag_count) {
            s->pkt_tag = s->tags[s->tag_head][0];
            s->pkt_expect = s->tags[s->tag_head][1];
            s->tag_head = (s->tag_head + 1) % FC_TAG_DEPTH;
            s->tag_count--;
        } else {
            s->pkt_tag = ~0u;   /* nowhere: discarded */
            s->pkt_expect = 0;
            s->h2c_errors++;
        }
    }
    target = s->pkt_tag & FP_TAG_TARGET;
    index = s->pkt_tag >> 8;
    n = MIN(ch->d_len - ch->d_done, FC_STEP_BYTES);
    if (!fc_dma_read(s, ch->d_src + ch->d_done, s->buf, n)) {
        s->st[FC_ST_DMA_ERRORS]++;
        fc_halt(s, ch, FC_READ_ERROR);
        s->pkt_active = false;
        return n;
    }
    if (target == FPGA_P2P_TX_PLAYBACK && index < FC_PB_FRAMES) {
        /* Playback memory comes on first use; capture reads it. */
        if (!s->pb[index]) {
            s->pb[index] = g_malloc0(FC_PB_FRAME_BYTES);
        }
        pb = s->pb[index];
        if (s->pkt_got < FC_PB_FRAME_BYTES) {
            memcpy(pb + s->pkt_got, s->buf,
                   MIN(n, FC_PB_FRAME_BYTES - s->pkt_got));
        }
    } else if (target == FPGA_P2P_TX_DETECTIONS) {
        if (!s->pkt_det) {
            s->pkt_det = g_malloc0(FC_TEST_DET_MAX);
        }
        if (s->pkt_got < FC_TEST_DET_MAX) {
            memcpy(s->pkt_det + s->pkt_got, s->buf,
                   MIN(n, FC_TEST_DET_MAX - s->pkt_got));
        }
    }
    s->pkt_crc = crc32(s->pkt_crc, s->buf, n);
    s->pkt_got += n;
    ch->d_done += n;
    if (ch->d_done < ch->d_len) {
        return n;
    }
    if (ch->d_ctrl & XDMA_DESC_EOP) {
        s->pkt_active = false;
        s->h2c_packets++;
        s->h2c_last_tag = s->pkt_tag;
        s->h2c_last_bytes = s->pkt_got;
        s->h2c_last_crc = s->pkt_crc;
        if (s->pkt_got != s->pkt_expect ||
            (target == FPGA_P2P_TX_PLAYBACK &&
             (index >= FC_PB_FRAMES || s->pkt_got > FC_PB_FRAME_BYTES))) {
            s->h2c_errors++;
        } else if (target == FPGA_P2P_TX_PLAYBACK) {
            s->pb_len[index] = s->pkt_got;
        } else if (target == FPGA_P2P_TX_DETECTIONS) {
            fc_det_push(s);
        }
    }
    fc_desc_done(s, ch, false, false);
    return n;
}

static void fc_h2c_timer(void *opaque)
{
    FpgaCard *s = opaque;
    uint32_t moved = 0, n;

    while (moved < FC_BUDGET_BYTES) {
        n = fc_h2c_step(s);
        if (!n) {
            return;
        }
        moved += n;
    }
    timer_mod(s->h2c_timer, fc_now());
}

/*
 * A C2H engine that never goes idle still touches memory: while stuck it
 * rewrites the first bytes of the last place it wrote, so a driver that
 * unmaps or frees that memory after giving up on the engine is caught by
 * the IOMMU (or by KASAN/a byte check in the guest).
 */
static void fc_stuck_timer(void *opaque)
{
    FpgaCard *s = opaque;
    static const uint8_t junk[64] = { [0 ... 63] = 0x5a };

    if (!s->c2h_stuck) {
        return;
    }
    if (s->c2h_stuck == 1 && s->c2h.last_dst) {
        if (!fc_dma_write(s, s->c2h.last_dst, junk, sizeof(junk))) {
            s->st[FC_ST_DMA_ERRORS]++;
        }
        s->st[FC_ST_STUCK_WRITES]++;
    }
    timer_mod(s->stuck_timer, fc_now() + FC_STUCK_PERIOD_NS);
}

/* --- BARs ---------------------------------------------------------------- */

static uint64_t fc_user_mmio_read(void *opaque, hwaddr addr, unsigned size)
{
    FpgaCard *s = opaque;

    if (s->all_ones) {
        return ~0u;
    }
    return fc_user_read(s, addr);
}

static void fc_user_mmio_write(void *opaque, hwaddr addr, uint64_t val,
                               unsigned size)
{
    FpgaCard *s = opaque;

    if (s->all_ones) {
        return;
    }
    fc_user_write(s, addr, val);
}

static uint64_t fc_xdma_mmio_read(void *opaque, hwaddr addr, unsigned size)
{
    FpgaCard *s = opaque;

    if (s->all_ones) {
        return ~0u;
    }
    return fc_xdma_read(s, addr);
}

static void fc_xdma_mmio_write(void *opaque, hwaddr addr, uint64_t val,
                               unsigned size)
{
    FpgaCard *s = opaque;

    if (s->all_ones) {
        return;
    }
    fc_xdma_write(s, addr, val);
}

static uint64_t fc_test_mmio_read(void *opaque, hwaddr addr, unsigned size)
{
    FpgaCard *s = opaque;
    FcDet *d = &s->det[s->det_head];
    uint32_t v = 0;

    if (addr >= FC_TEST_DET_DATA) {
        addr -= FC_TEST_DET_DATA;
        if (s->det_count && addr + 4 <= d->bytes) {
            memcpy(&v, d->data + addr, 4);
        } else if (s->det_count && addr < d->bytes) {
            memcpy(&v, d->data + addr, d->bytes - addr);
        }
        return le32_to_cpu(v);
    }
    if (addr >= FC_TEST_STAT0 && addr < FC_TEST_STAT0 + 4 * FC_TEST_STATS) {
        uint32_t i = (addr - FC_TEST_STAT0) / 4;

        switch (i) {
        case FC_ST_FRAMES_STARTED:
            return (uint32_t)s->src.next_seq;
        case FC_ST_DROPS_NO_SLOT:
            return s->drops_no_slot;
        case FC_ST_DROPS_FAULT:
            return s->drops_fault;
        case FC_ST_FRAME_CREDITS:
            return s->frame_credits;
        case FC_ST_C2H_CREDITS:
            return s->c2h.credits;
        case FC_ST_C2H_COMPLETED:
            return s->c2h.completed;
        case FC_ST_C2H_STATUS:
            return s->c2h.status;
        case FC_ST_H2C_CREDITS:
            return s->h2c.credits;
        case FC_ST_H2C_STATUS:
            return s->h2c.status;
        case FC_ST_META_LEVEL:
            return s->meta_count;
        case FC_ST_TAG_LEVEL:
            return s->tag_count;
        case FC_ST_H2C_PACKETS:
            return s->h2c_packets;
        case FC_ST_H2C_ERRORS:
            return s->h2c_errors;
        case FC_ST_H2C_LAST_TARGET:
            return s->h2c_last_tag & FP_TAG_TARGET;
        case FC_ST_H2C_LAST_INDEX:
            return s->h2c_last_tag >> 8;
        case FC_ST_H2C_LAST_BYTES:
            return s->h2c_last_bytes;
        case FC_ST_H2C_LAST_CRC:
            return s->h2c_last_crc;
        case FC_ST_BUS_MASTER:
            return !!(pci_get_word(PCI_DEVICE(s)->config + PCI_COMMAND) &
                      PCI_COMMAND_MASTER);
        default:
            return s->st[i];
        }
    }
    switch (addr) {
    case FC_TEST_ID:
        return FC_TEST_ID_VALUE;
    case FC_TEST_DROP_EVERY:
        return s->drop_every;
    case FC_TEST_SHORT_EVERY:
        return s->short_every;
    case FC_TEST_CORRUPT_EVERY:
        return s->corrupt_every;
    case FC_TEST_C2H_DESC_ERROR:
        return s->c2h.inject_error;
    case FC_TEST_H2C_DESC_ERROR:
        return s->h2c.inject_error;
    case FC_TEST_LOSE_IRQS:
        return s->lose_irqs;
    case FC_TEST_C2H_STUCK:
        return s->c2h_stuck;
    case FC_TEST_ALL_ONES:
        return s->all_ones;
    case FC_TEST_META_LATE_EVERY:
        return s->meta_late_every;
    case FC_TEST_CLOCK_PPB:
        return (uint32_t)s->clock.ppb_error;
    case FC_TEST_PPS_PULSES:
        return s->clock.pulses;
    case FC_TEST_DET_LEVEL:
        return s->det_count;
    case FC_TEST_DET_BYTES:
        return s->det_count ? d->bytes : 0;
    case FC_TEST_DET_TAG:
        return s->det_count ? d->tag : 0;
    default:
        return 0;
    }
}

static void fc_test_mmio_write(void *opaque, hwaddr addr, uint64_t val,
                               unsigned size)
{
    FpgaCard *s = opaque;

    switch (addr) {
    case FC_TEST_DROP_EVERY:
        s->drop_every = val;
        break;
    case FC_TEST_SHORT_EVERY:
        s->short_every = val;
        break;
    case FC_TEST_CORRUPT_EVERY:
        s->corrupt_every = val;
        break;
    case FC_TEST_C2H_DESC_ERROR:
        s->c2h.inject_error = val;
        break;
    case FC_TEST_H2C_DESC_ERROR:
        s->h2c.inject_error = val;
        break;
    case FC_TEST_LOSE_IRQS:
        s->lose_irqs = val;
        break;
    case FC_TEST_C2H_STUCK:
        s->c2h_stuck = val;
        if (val) {
            timer_mod(s->stuck_timer, fc_now());
        } else {
            fc_kick(s, true);
        }
        break;
    case FC_TEST_ALL_ONES:
        s->all_ones = val;
        break;
    case FC_TEST_META_LATE_EVERY:
        s->meta_late_every = val;
        break;
    case FC_TEST_PPS_PULSE:
        fc_pps_edge(s);
        break;
    case FC_TEST_CLOCK_PPB:
        fc_clock_anchor(s, fc_clock_now(s));
        s->clock.ppb_error = (int32_t)val;
        break;
    case FC_TEST_DET_POP:
        if (s->det_count) {
            s->det_head = (s->det_head + 1) % FC_TEST_DET_DEPTH;
            s->det_count--;
        }
        break;
    default:
        break;
    }
}

static const MemoryRegionOps fc_user_ops = {
    .read = fc_user_mmio_read,
    .write = fc_user_mmio_write,
    .endianness = DEVICE_LITTLE_ENDIAN,
    .valid = { .min_access_size = 4, .max_access_size = 4 },
    .impl = { .min_access_size = 4, .max_access_size = 4 },
};

static const MemoryRegionOps fc_xdma_ops = {
    .read = fc_xdma_mmio_read,
    .write = fc_xdma_mmio_write,
    .endianness = DEVICE_LITTLE_ENDIAN,
    .valid = { .min_access_size = 4, .max_access_size = 4 },
    .impl = { .min_access_size = 4, .max_access_size = 4 },
};

static const MemoryRegionOps fc_test_ops = {
    .read = fc_test_mmio_read,
    .write = fc_test_mmio_write,
    .endianness = DEVICE_LITTLE_ENDIAN,
    .valid = { .min_access_size = 4, .max_access_size = 4 },
    .impl = { .min_access_size = 4, .max_access_size = 4 },
};

/* --- device -------------------------------------------------------------- */

/*
 * The machine shuts down (or, under -no-reboot, resets): the guest kernel's
 * device shutdown has run, so the driver's .shutdown had its chance to stop
 * the card. Whatever still runs now would write into memory the next
 * kernel or the firmware owns.
 */
static void fc_shutdown_notify(Notifier *n, void *data)
{
    FpgaCard *s = container_of(n, FpgaCard, shutdown);
    ShutdownCause cause = *(ShutdownCause *)data;
    bool c2h = s->c2h.running || (s->c2h.control & XDMA_CTRL_RUN);
    bool h2c = s->h2c.running || (s->h2c.control & XDMA_CTRL_RUN);
    bool src = s->ctrl & FP_UB_CTRL_ENABLE;
    bool master = pci_get_word(PCI_DEVICE(s)->config + PCI_COMMAND) &
                  PCI_COMMAND_MASTER;
    FILE *f;

    if (!s->shutdown_log) {
        return;
    }
    f = fopen(s->shutdown_log, "a");
    if (!f) {
        error_report("radar-fpga-card: cannot write %s: %s",
                     s->shutdown_log, strerror(errno));
        return;
    }
    fprintf(f, "radar-fpga-card: machine shutdown (%s): c2h engine %s, "
            "h2c engine %s, source %s, bus master %s, frames sent %u%s\n",
            ShutdownCause_str(cause), c2h ? "running" : "stopped",
            h2c ? "running" : "stopped", src ? "on" : "off",
            master ? "on" : "off", s->frames_sent,
            c2h ? ": c2h engine running while the machine resets" : "");
    fclose(f);
}

static void fc_reset_state(FpgaCard *s)
{
    int i;

    timer_del(s->c2h_timer);
    timer_del(s->h2c_timer);
    timer_del(s->stuck_timer);
    timer_del(s->meta_timer);
    for (i = 0; i < FC_PB_FRAMES; i++) {
        g_free(s->pb[i]);
        s->pb[i] = NULL;
        s->pb_len[i] = 0;
    }
    for (i = 0; i < FC_TEST_DET_DEPTH; i++) {
        g_free(s->det[i].data);
    }
    g_free(s->pkt_det);
    memset(&s->h2c, 0, offsetof(FpgaCard, buf) - offsetof(FpgaCard, h2c));
    /* The clock runs on; its registers and PPS input are reset. */
    s->clock.pps_ctrl = 0;
    s->clock.pps_count = 0;
    s->clock.pps_lost = 0;
    s->clock.set = 0;
    s->clock.step = 0;
}

static void fc_reset(DeviceState *dev)
{
    FpgaCard *s = FPGA_CARD(dev);

    fc_reset_state(s);
}

static void fc_realize(PCIDevice *pdev, Error **errp)
{
    FpgaCard *s = FPGA_CARD(pdev);

    if (s->adc_recording) {
        GError *err = NULL;
        gchar *data;
        gsize len;

        if (!g_file_get_contents(s->adc_recording, &data, &len, &err)) {
            error_setg(errp, "radar-fpga-card: adc-recording: %s",
                       err->message);
            g_error_free(err);
            return;
        }
        s->adc_rec = (uint8_t *)data;
        s->adc_rec_len = len;
    }
    pci_config_set_interrupt_pin(pdev->config, 1);
    memory_region_init_io(&s->bar_user, OBJECT(s), &fc_user_ops, s,
                          "radar-fpga-card-user", FP_BAR_USER_LEN);
    memory_region_init_io(&s->bar_xdma, OBJECT(s), &fc_xdma_ops, s,
                          "radar-fpga-card-xdma", FP_BAR_XDMA_LEN);
    memory_region_init_io(&s->bar_test, OBJECT(s), &fc_test_ops, s,
                          "radar-fpga-card-test", FC_TEST_BAR_LEN);
    pci_register_bar(pdev, FP_BAR_USER, PCI_BASE_ADDRESS_SPACE_MEMORY,
                     &s->bar_user);
    pci_register_bar(pdev, FP_BAR_XDMA, PCI_BASE_ADDRESS_SPACE_MEMORY,
                     &s->bar_xdma);
    pci_register_bar(pdev, FC_TEST_BAR, PCI_BASE_ADDRESS_SPACE_MEMORY,
                     &s->bar_test);
    if (msix_init_exclusive_bar(pdev, 1, FC_MSIX_BAR, errp)) {
        return;
    }
    msix_vector_use(pdev, 0);
    /* The clock starts at 0 at power-on, counting at the oscillator's rate. */
    s->clock.ppb_error = s->clock_ppm * 1000;
    fc_clock_anchor(s, 0);
    s->c2h_timer = timer_new_ns(QEMU_CLOCK_VIRTUAL, fc_c2h_timer, s);
    s->h2c_timer = timer_new_ns(QEMU_CLOCK_VIRTUAL, fc_h2c_timer, s);
    s->stuck_timer = timer_new_ns(QEMU_CLOCK_VIRTUAL, fc_stuck_timer, s);
    s->meta_timer = timer_new_ns(QEMU_CLOCK_VIRTUAL, fc_meta_timer, s);
    s->shutdown.notify = fc_shutdown_notify;
    qemu_register_shutdown_notifier(&s->shutdown);
}

static void fc_exit(PCIDevice *pdev)
{
    FpgaCard *s = FPGA_CARD(pdev);

    notifier_remove(&s->shutdown);
    fc_reset_state(s);
    timer_free(s->c2h_timer);
    timer_free(s->h2c_timer);
    timer_free(s->stuck_timer);
    timer_free(s->meta_timer);
    msix_uninit_exclusive_bar(pdev);
    g_free(s->adc_rec);
    s->adc_rec = NULL;
}

static Property fc_properties[] = {
    DEFINE_PROP_STRING("shutdown-log", FpgaCard, shutdown_log),
    DEFINE_PROP_STRING("adc-recording", FpgaCard, adc_recording),
    DEFINE_PROP_INT32("clock-ppm", FpgaCard, clock_ppm, 0),
    DEFINE_PROP_END_OF_LIST(),
};

static void fc_class_init(ObjectClass *class, void *data)
{
    DeviceClass *dc = DEVICE_CLASS(class);
    PCIDeviceClass *k = PCI_DEVICE_CLASS(class);

    k->realize = fc_realize;
    k->exit = fc_exit;
    k->vendor_id = FP_PCI_VENDOR_ID;
    k->device_id = FP_PCI_DEVICE_ID;
    k->revision = 0x01;
    k->class_id = PCI_CLASS_MEMORY_OTHER;
    dc->desc = "Radar FPGA card (XDMA + user block), for fpga_p2p tests";
    dc->reset = fc_reset;
    device_class_set_props(dc, fc_properties);
    set_bit(DEVICE_CATEGORY_MISC, dc->categories);
}

static const TypeInfo fc_info = {
    .name = TYPE_FPGA_CARD,
    .parent = TYPE_PCI_DEVICE,
    .instance_size = sizeof(FpgaCard),
    .class_init = fc_class_init,
    .interfaces = (InterfaceInfo[]) {
        { INTERFACE_CONVENTIONAL_PCI_DEVICE },
        { },
    },
};

static void fc_register_types(void)
{
    type_register_static(&fc_info);
}

type_init(fc_register_types)
