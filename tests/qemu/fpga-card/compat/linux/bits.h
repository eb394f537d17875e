/*
 * The two macros of the kernel's <linux/bits.h> that kmod/fpga_p2p_regs.h
 * uses, so the emulated card builds with the driver's own register
 * header. SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef FPGA_CARD_COMPAT_LINUX_BITS_H
#define FPGA_CARD_COMPAT_LINUX_BITS_H

#ifndef BIT
#define BIT(nr)         (1UL << (nr))
#endif
#define GENMASK(h, l)   ((~0U >> (31 - (h))) & ~((1U << (l)) - 1))

#endif
