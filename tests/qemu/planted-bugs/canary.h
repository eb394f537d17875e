/* SPDX-License-Identifier: GPL-2.0 */
#ifndef CANARY_H
#define CANARY_H

int canary_shim_ping(void);

#endif
