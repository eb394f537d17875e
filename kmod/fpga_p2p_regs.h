/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Register map of the radar FPGA card, shared by the driver and the
 * emulated card of the tests (tests/qemu/fpga-card/): the AMD/Xilinx
 * DMA/Bridge Subsystem for PCI Express (XDMA, PG195) registers that the
 * driver uses, the XDMA descriptor and C2H stream
 * writeback formats, and our user register block. board/fpga/registers.md
 * describes the same map in prose.
 *
 * All registers are 32 bits wide, little-endian, accessed with 32-bit
 * reads and writes.
 */
#ifndef FPGA_P2P_REGS_H
#define FPGA_P2P_REGS_H

#include <linux/bits.h>
#include <linux/types.h>

/* --- PCI identity and BARs --------------------------------------------- */

#define FP_PCI_VENDOR_ID		0x10ee	/* AMD/Xilinx */
#define FP_PCI_DEVICE_ID		0x9038	/* XDMA Gen3 x8, as customised */

#define FP_BAR_USER			0	/* AXI-Lite master: user block */
#define FP_BAR_XDMA			1	/* XDMA DMA/config registers */
#define FP_BARS				2
#define FP_BAR_USER_LEN			0x1000
#define FP_BAR_XDMA_LEN			0x10000

/* --- XDMA: register targets (offset = target | channel * 0x100 | reg) --- */

#define XDMA_TGT_H2C			0x0000
#define XDMA_TGT_C2H			0x1000
#define XDMA_TGT_IRQ			0x2000
#define XDMA_TGT_CONFIG			0x3000
#define XDMA_TGT_H2C_SGDMA		0x4000
#define XDMA_TGT_C2H_SGDMA		0x5000
#define XDMA_TGT_SGDMA_COMMON		0x6000
#define XDMA_TGT_SHIFT			12
#define XDMA_CHAN_STRIDE		0x100

/* Identifier register, offset 0 of every target. */
#define XDMA_ID_SUBSYS			GENMASK(31, 20)	/* 0x1fc */
#define XDMA_ID_TARGET			GENMASK(19, 16)
#define XDMA_ID_STREAM			BIT(15)		/* AXI4-Stream */
#define XDMA_ID_CHANNEL			GENMASK(11, 8)
#define XDMA_ID_VERSION			GENMASK(7, 0)
#define XDMA_ID_SUBSYS_VALUE		0x1fc

/* Channel registers (H2C and C2H targets). */
#define XDMA_CH_ID			0x00
#define XDMA_CH_CONTROL			0x04
#define XDMA_CH_CONTROL_W1S		0x08
#define XDMA_CH_CONTROL_W1C		0x0c
#define XDMA_CH_STATUS			0x40
#define XDMA_CH_STATUS_RC		0x44	/* reading clears bits 23:1 */
#define XDMA_CH_COMPLETED		0x48	/* descriptors done since Run */
#define XDMA_CH_INT_MASK		0x90
#define XDMA_CH_INT_MASK_W1S		0x94
#define XDMA_CH_INT_MASK_W1C		0x98

/* Status bits; the control register's interrupt enables and the interrupt
 * mask use the same positions (bit 0 of control is Run).
 */
#define XDMA_CTRL_RUN			BIT(0)
#define XDMA_ST_BUSY			BIT(0)
#define XDMA_ST_DESC_STOPPED		BIT(1)
#define XDMA_ST_DESC_COMPLETED		BIT(2)
#define XDMA_ST_ALIGN_MISMATCH		BIT(3)
#define XDMA_ST_MAGIC_STOPPED		BIT(4)
#define XDMA_ST_INVALID_LENGTH		BIT(5)
#define XDMA_ST_IDLE_STOPPED		BIT(6)
#define XDMA_ST_READ_ERROR		GENMASK(13, 9)
#define XDMA_ST_WRITE_ERROR		GENMASK(18, 14)
#define XDMA_ST_DESC_ERROR		GENMASK(23, 19)
#define XDMA_ST_ERRORS			(XDMA_ST_ALIGN_MISMATCH | \
					 XDMA_ST_MAGIC_STOPPED | \
					 XDMA_ST_INVALID_LENGTH | \
					 XDMA_ST_READ_ERROR | \
					 XDMA_ST_WRITE_ERROR | \
					 XDMA_ST_DESC_ERROR)
#define XDMA_ST_CLEARABLE		GENMASK(23, 1)
#define XDMA_CTRL_POLL_MODE_WB		BIT(26)
#define XDMA_CTRL_STREAM_WB_DISABLE	BIT(27)	/* C2H: no writeback */

/* SGDMA registers (H2C_SGDMA and C2H_SGDMA targets). */
#define XDMA_SG_ID			0x00
#define XDMA_SG_DESC_LO			0x80
#define XDMA_SG_DESC_HI			0x84
#define XDMA_SG_DESC_ADJ		0x88
#define XDMA_SG_CREDITS			0x8c	/* write: add; read: remaining */
#define XDMA_SG_CREDITS_MAX		1023

/* SGDMA common target. */
#define XDMA_SGC_CREDIT_MODE		0x20
#define XDMA_SGC_CREDIT_MODE_W1S	0x24
#define XDMA_SGC_CREDIT_MODE_W1C	0x28
#define XDMA_SGC_CREDIT_H2C(ch)		BIT(ch)
#define XDMA_SGC_CREDIT_C2H(ch)		BIT(16 + (ch))

/* IRQ block target. Channel bits: H2C channels first, then C2H. */
#define XDMA_IRQ_USER_EN		0x04
#define XDMA_IRQ_CHAN_EN		0x10
#define XDMA_IRQ_CHAN_EN_W1S		0x14
#define XDMA_IRQ_CHAN_EN_W1C		0x18
#define XDMA_IRQ_USER_REQ		0x40
#define XDMA_IRQ_CHAN_REQ		0x44
#define XDMA_IRQ_USER_PEND		0x48
#define XDMA_IRQ_CHAN_PEND		0x4c
#define XDMA_IRQ_USER_VEC(n)		(0x80 + 4 * (n))
#define XDMA_IRQ_CHAN_VEC(n)		(0xa0 + 4 * (n))
/* Our design has one H2C and one C2H channel. */
#define FP_IRQ_H2C0			BIT(0)
#define FP_IRQ_C2H0			BIT(1)

/* Register offsets of our two channels in the XDMA BAR. */
#define FP_H2C(reg)			(XDMA_TGT_H2C + (reg))
#define FP_C2H(reg)			(XDMA_TGT_C2H + (reg))
#define FP_IRQ(reg)			(XDMA_TGT_IRQ + (reg))
#define FP_SGC(reg)			(XDMA_TGT_SGDMA_COMMON + (reg))

/* --- XDMA descriptor (32 bytes, 32-byte aligned, in host memory) -------- */

struct xdma_desc {
	__le32 control;
	__le32 bytes;			/* 27:0 */
	__le32 src_lo;			/* C2H stream: writeback address */
	__le32 src_hi;
	__le32 dst_lo;			/* H2C stream: unused */
	__le32 dst_hi;
	__le32 next_lo;
	__le32 next_hi;
};

#define XDMA_DESC_MAGIC			0xad4b
#define XDMA_DESC_MAGIC_SHIFT		16
#define XDMA_DESC_ADJ			GENMASK(13, 8)	/* extra adjacent ones */
#define XDMA_DESC_STOP			BIT(0)	/* engine stops after this */
#define XDMA_DESC_COMPLETED		BIT(1)	/* status DESC_COMPLETED: IRQ */
#define XDMA_DESC_EOP			BIT(4)	/* H2C: end of packet (tlast) */
#define XDMA_DESC_LEN_MASK		GENMASK(27, 0)
/* Largest length the driver puts in one descriptor (4 KiB multiple). */
#define XDMA_DESC_LEN_MAX		(BIT(28) - 4096)
#define XDMA_DESC_CONTROL(flags) \
	((XDMA_DESC_MAGIC << XDMA_DESC_MAGIC_SHIFT) | (flags))

/* C2H stream writeback record, one per descriptor at its src address. */
struct xdma_c2h_result {
	__le32 status;
	__le32 length;			/* bytes written to the descriptor */
	__le32 reserved[6];
};

#define XDMA_RESULT_MAGIC		0x52b4
#define XDMA_RESULT_MAGIC_SHIFT		16
#define XDMA_RESULT_EOP			BIT(0)

/* --- User register block (BAR FP_BAR_USER) ------------------------------ */

#define FP_UB_ID			0x000	/* RO "RADR" */
#define FP_UB_VERSION			0x004	/* RO major << 16 | minor */
#define FP_UB_CAPS			0x008	/* RO FP_UB_CAP_* */
#define FP_UB_SCRATCH			0x00c	/* RW, no effect */
#define FP_UB_META_DEPTH		0x010	/* RO metadata FIFO entries */
#define FP_UB_TAG_DEPTH			0x014	/* RO H2C tag FIFO entries */
#define FP_UB_PLAYBACK_FRAMES		0x018	/* RO frames in playback memory */
#define FP_UB_PLAYBACK_FRAME_BYTES	0x01c	/* RO bytes per playback frame */
#define FP_UB_MAX_FRAME_BYTES		0x020	/* RO largest frame_bytes */

#define FP_UB_ID_VALUE			0x52414452	/* 'R' 'A' 'D' 'R' */
#define FP_UB_VERSION_VALUE		0x00010001	/* 1.1: the time block */
/* FP_UB_CAPS: bits 31:3 are reserved and read 0. */
#define FP_UB_CAP_ADC			BIT(0)
#define FP_UB_CAP_TEST_PATTERN		BIT(1)
#define FP_UB_CAP_PLAYBACK		BIT(2)

/*
 * Stream control; the contract the driver relies on (board/fpga/registers.md):
 * - A rising edge of ENABLE latches the geometry, resets the sequence number,
 *   the drop counters and the metadata overflow flag, and starts the first
 *   frame. Frame credits granted while ENABLE was clear survive the edge (the
 *   driver grants them before it sets ENABLE).
 * - A falling edge stops the source at once: the packet in flight is cut
 *   without TLAST and never completes (no EOP, no writeback, no metadata);
 *   frame credits and the metadata FIFO are cleared. The driver clears Run of
 *   the C2H channel after ENABLE and before the next rising edge, which
 *   discards the partly filled descriptor.
 * - A frame's metadata entry is pushed before its last descriptor completes
 *   (so the interrupt for that descriptor finds it); an entry found missing
 *   is looked for again on the next interrupt or watchdog tick, and only one
 *   that never comes is a stream fault.
 */
#define FP_UB_CTRL			0x100	/* RW */
#define FP_UB_CTRL_ENABLE		BIT(0)
#define FP_UB_CTRL_SOURCE		GENMASK(5, 4)	/* FPGA_P2P_SRC_* */
#define FP_UB_STATUS			0x104	/* RO */
#define FP_UB_STATUS_RUNNING		BIT(0)
#define FP_UB_STATUS_META_OVERFLOW	BIT(1)	/* sticky until ENABLE */
#define FP_UB_FRAME_BYTES		0x108	/* RW, multiple of CHUNK_BYTES */
#define FP_UB_CHUNK_BYTES		0x10c	/* RW, multiple of 4096 */
#define FP_UB_CHUNK_PERIOD_NS		0x110	/* RW, test pattern/playback */
#define FP_UB_PLAYBACK_COUNT		0x114	/* RW, frames to cycle through */
#define FP_UB_FRAME_CREDIT_ADD		0x118	/* WO, adds frame credits */
#define FP_UB_FRAME_CREDITS		0x11c	/* RO, credits left */
#define FP_UB_DROPS_NO_SLOT		0x120	/* RO, since ENABLE */
#define FP_UB_DROPS_FAULT		0x124	/* RO, since ENABLE */
#define FP_UB_FRAMES_SENT		0x128	/* RO, since ENABLE */

/* Per-frame metadata FIFO: the fields of the oldest entry; POP removes it. */
#define FP_UB_META_LEVEL		0x200	/* RO entries queued */
#define FP_UB_META_SEQ_LO		0x204
#define FP_UB_META_SEQ_HI		0x208
#define FP_UB_META_TS_LO		0x20c
#define FP_UB_META_TS_HI		0x210
#define FP_UB_META_BYTES		0x214
#define FP_UB_META_CRC			0x218
#define FP_UB_META_FLAGS		0x21c	/* FP_META_* */
#define FP_UB_META_DROPPED		0x220
#define FP_UB_META_POP			0x224	/* WO, write 1 */

/* Same values as FPGA_P2P_EVF_SHORT, _CRC_MISMATCH, _LINK_ERROR. */
#define FP_META_SHORT			BIT(0)
#define FP_META_CRC_MISMATCH		BIT(1)
#define FP_META_LINK_ERROR		BIT(2)
#define FP_META_FLAGS_MASK		GENMASK(2, 0)

/*
 * GPU-triggered processing: completion records (bit 8 of FP_UB_CAPS and of
 * FP_UB_CTRL; board/fpga/registers.md, "Completion records"). A card with
 * FP_UB_CAP_COMPLETION, started with FP_UB_CTRL_COMPLETION set, appends a
 * struct fpga_p2p_completion (FP_COMPLETION_BYTES) to the stream after the
 * last byte of every chunk, so a frame's packet is FRAME_BYTES plus
 * FP_COMPLETION_BYTES per chunk; the driver points a descriptor of exactly
 * that length at the slot's record in the ring's status page. The card
 * never reads the record. Cards without it read bit 8 of FP_UB_CAPS as 0
 * (one of the reserved bits) and ignore bit 8 of FP_UB_CTRL.
 */
#define FP_UB_CAP_COMPLETION		BIT(8)	/* writes completion records */
#define FP_UB_CTRL_COMPLETION		BIT(8)	/* latched at ENABLE's rise */
#define FP_COMPLETION_BYTES		32

/* H2C tag FIFO: where each transmit packet goes, in packet order. */
#define FP_UB_TAG_LEVEL			0x300	/* RO entries queued */
#define FP_UB_TAG_BYTES			0x304	/* WO bytes of the next tag */
#define FP_UB_TAG_PUSH			0x308	/* WO FP_TAG_*; pushes a tag */
#define FP_TAG_TARGET			GENMASK(7, 0)	/* FPGA_P2P_TX_* */
#define FP_TAG_INDEX			GENMASK(31, 8)
/* H2C sink status, for diagnostics. */
#define FP_UB_H2C_PACKETS		0x310	/* RO packets received */
#define FP_UB_H2C_LAST_TAG		0x314	/* RO tag of the last packet */
#define FP_UB_H2C_LAST_BYTES		0x318	/* RO bytes of the last packet */
#define FP_UB_H2C_LAST_CRC		0x31c	/* RO CRC-32 of the last packet */
#define FP_UB_H2C_ERRORS		0x320	/* RO tag missing or length wrong */

/*
 * Time (0x400-0x4ff): the card's clock, which the driver registers as a
 * PTP hardware clock (board/fpga/registers.md, "Time"). A 64-bit count of
 * nanoseconds whose rate is trimmed by FP_UB_TIME_FREQ, set and stepped
 * atomically by FP_UB_TIME_CMD, read consistently through a latch, and
 * latched by the PPS input's rising edges into a FIFO. Each frame's
 * metadata timestamp (FP_UB_META_TS_*) is this clock at the frame's first
 * sample. A card without the clock reads FP_UB_TIME_CAPS as 0.
 */
#define FP_UB_TIME_CAPS			0x400	/* RO FP_TIME_CAP_*, PPS FIFO depth */
#define FP_UB_TIME_NOW_LO		0x404	/* RO: latches the clock, low half */
#define FP_UB_TIME_NOW_HI		0x408	/* RO: high half of the latched value */
#define FP_UB_TIME_SET_LO		0x40c	/* RW value for FP_TIME_CMD_SET */
#define FP_UB_TIME_SET_HI		0x410
#define FP_UB_TIME_STEP_LO		0x414	/* RW signed ns for FP_TIME_CMD_STEP */
#define FP_UB_TIME_STEP_HI		0x418
#define FP_UB_TIME_CMD			0x41c	/* WO FP_TIME_CMD_* */
#define FP_UB_TIME_FREQ			0x420	/* RW signed, 2^-32 ns per ns */
#define FP_UB_TIME_PPS_CTRL		0x424	/* RW FP_TIME_PPS_* */
#define FP_UB_TIME_PPS_LEVEL		0x428	/* RO pulse times queued */
#define FP_UB_TIME_PPS_TS_LO		0x42c	/* RO the oldest pulse's time */
#define FP_UB_TIME_PPS_TS_HI		0x430
#define FP_UB_TIME_PPS_POP		0x434	/* WO, write 1: removes the oldest */
#define FP_UB_TIME_PPS_LOST		0x438	/* RO pulses lost to a full FIFO */

#define FP_TIME_CAP_CLOCK		BIT(0)	/* the clock above is there */
#define FP_TIME_CAP_PPS_IN		BIT(1)	/* PPS input and its FIFO */
#define FP_TIME_CAP_PPS_DEPTH		GENMASK(15, 8)	/* PPS FIFO entries */
#define FP_TIME_CMD_SET			BIT(0)	/* clock := TIME_SET */
#define FP_TIME_CMD_STEP		BIT(1)	/* clock += TIME_STEP */
#define FP_TIME_PPS_ENABLE		BIT(0)	/* latch rising edges */
/* FP_UB_TIME_FREQ: +-2^31 is +-0.5; one unit is about 0.00023 ppb. */
#define FP_TIME_FREQ_SHIFT		32

#endif /* FPGA_P2P_REGS_H */
