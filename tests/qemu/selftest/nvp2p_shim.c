// SPDX-License-Identifier: GPL-2.0
/*
 * Harness self-test stand-in for nvp2p_shim: exports one symbol so that the
 * self-test fpga_p2p depends on it as the real one does.
 */
#include <linux/module.h>
#include "selftest.h"

int selftest_shim_ping(void)
{
	return 42;
}
EXPORT_SYMBOL_GPL(selftest_shim_ping);

MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("QEMU harness self-test: stand-in for nvp2p_shim");
