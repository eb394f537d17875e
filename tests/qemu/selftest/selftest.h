/* SPDX-License-Identifier: GPL-2.0 */
#ifndef SELFTEST_H
#define SELFTEST_H

int selftest_shim_ping(void);

#endif
