// SPDX-License-Identifier: GPL-2.0
/*
 * Detector canary, stand-in for nvp2p_shim: exports one symbol so that the
 * canary's fpga_p2p depends on it as the real one does.
 */
#include <linux/module.h>
#include "canary.h"

int canary_shim_ping(void)
{
	return 42;
}
EXPORT_SYMBOL_GPL(canary_shim_ping);

MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("QEMU harness detector canary: stand-in for nvp2p_shim");
