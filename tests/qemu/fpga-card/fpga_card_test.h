/*
 * The emulated card's test port (BAR2): exists only on the emulated radar
 * FPGA card in QEMU (fpga_card.c), never on a real card, and the driver never
 * maps it. Tests in the guest mmap /sys/bus/pci/devices/<card>/resource2.
 * The same offsets are in tests/capture-suite/src/card.rs.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef FPGA_CARD_TEST_H
#define FPGA_CARD_TEST_H

#define FC_TEST_BAR             2
#define FC_TEST_BAR_LEN         0x20000

#define FC_TEST_ID              0x000   /* RO "TEST" */
#define FC_TEST_ID_VALUE        0x54455354
/* Fault injection, RW; 0 turns a fault off. */
#define FC_TEST_DROP_EVERY      0x004   /* every Nth frame: link fault drop */
#define FC_TEST_SHORT_EVERY     0x008   /* every Nth frame ends at half */
#define FC_TEST_CORRUPT_EVERY   0x00c   /* every Nth frame: a bit flipped */
#define FC_TEST_C2H_DESC_ERROR  0x010   /* 1: next C2H fetch fails */
#define FC_TEST_H2C_DESC_ERROR  0x014   /* 1: next H2C fetch fails */
#define FC_TEST_LOSE_IRQS       0x018   /* the next N MSI-X messages are lost */
#define FC_TEST_C2H_STUCK       0x01c   /* C2H never idle: 1 keeps writing, 2 not */
#define FC_TEST_ALL_ONES        0x020   /* 1: BAR0/BAR1 read all ones */
#define FC_TEST_META_LATE_EVERY 0x024   /* every Nth frame: metadata late */

/*
 * Time (0x040-0x05f): the card's oscillator and its PPS input, as the
 * harness drives them. A write of PPS_PULSE is a rising edge on the PPS
 * input at that instant (the card latches its clock then, if the driver
 * enabled the input); CLOCK_PPB is the oscillator's frequency error in
 * ppb (signed; from the device property clock-ppm, changeable at run time).
 */
#define FC_TEST_PPS_PULSE       0x040   /* WO: a PPS edge now */
#define FC_TEST_CLOCK_PPB       0x044   /* RW signed: oscillator error, ppb */
#define FC_TEST_PPS_PULSES      0x048   /* RO: PPS edges the harness sent */

/* Counters, RO, 32 bits each at FC_TEST_STAT0 + 4 * index. */
#define FC_TEST_STAT0           0x100
enum {
    FC_ST_FRAMES_STARTED,
    FC_ST_FRAMES_SENT,
    FC_ST_CHUNKS,
    FC_ST_DROPS_NO_SLOT,
    FC_ST_DROPS_FAULT,
    FC_ST_FRAME_CREDITS,
    FC_ST_C2H_CREDITS,
    FC_ST_C2H_COMPLETED,
    FC_ST_C2H_STATUS,
    FC_ST_H2C_CREDITS,
    FC_ST_H2C_STATUS,
    FC_ST_STALLS,
    FC_ST_PROTOCOL_ERRORS,
    FC_ST_META_LEVEL,
    FC_ST_TAG_LEVEL,
    FC_ST_H2C_PACKETS,
    FC_ST_H2C_ERRORS,
    FC_ST_H2C_LAST_TARGET,
    FC_ST_H2C_LAST_INDEX,
    FC_ST_H2C_LAST_BYTES,
    FC_ST_H2C_LAST_CRC,
    FC_ST_IRQS,                 /* interrupts sent */
    FC_ST_IRQS_LOST,            /* interrupts lost on purpose */
    FC_ST_HALTS,                /* channel halts (errors) */
    FC_ST_DMA_ERRORS,           /* DMA the bus/IOMMU refused */
    FC_ST_STUCK_WRITES,         /* writes of a stuck engine */
    FC_ST_DET_OVERFLOWS,        /* oldest detection packets dropped */
    FC_ST_BUS_MASTER,           /* 1 while bus mastering is on */
    FC_ST_META_LATE,            /* metadata pushed after the last descriptor */
    FC_ST_DET_RECORDS,          /* detection packets received whole */
    FC_TEST_STATS
};

/*
 * Detection packets (H2C target 0) the card received: the newest
 * FC_TEST_DET_DEPTH, oldest first.
 */
#define FC_TEST_DET_DEPTH       16
#define FC_TEST_DET_MAX         0x10000 /* bytes kept per packet */
#define FC_TEST_DET_LEVEL       0x800   /* RO packets kept */
#define FC_TEST_DET_BYTES       0x804   /* RO bytes of the oldest (capped) */
#define FC_TEST_DET_TAG         0x808   /* RO its tag word */
#define FC_TEST_DET_POP         0x80c   /* WO: drop the oldest */
#define FC_TEST_DET_DATA        0x10000 /* RO the oldest packet's bytes */

#endif /* FPGA_CARD_TEST_H */
