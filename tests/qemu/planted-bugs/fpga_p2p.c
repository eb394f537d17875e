// SPDX-License-Identifier: GPL-2.0
/*
 * Detector canary, stand-in for fpga_p2p: a deliberately broken module.
 * Writing a bug name to /sys/module/fpga_p2p/parameters/bug and then reading
 * /dev/fpga-p2p0 commits that bug, so that tests/qemu/run.sh --canary can
 * prove that each of the debug kernel's detectors fires and is counted.
 */
#include <linux/delay.h>
#include <linux/dma-mapping.h>
#include <linux/fs.h>
#include <linux/miscdevice.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/platform_device.h>
#include <linux/slab.h>
#include <linux/spinlock.h>
#include "canary.h"

static char bug[16];
module_param_string(bug, bug, sizeof(bug), 0644);
MODULE_PARM_DESC(bug, "none, abba, oob, sleep, leak, dma or warn");

static DEFINE_MUTEX(lock_a);
static DEFINE_MUTEX(lock_b);
static DEFINE_SPINLOCK(lock_s);
static struct platform_device *pdev;
static void *leaked;

/* Lockdep: A then B, later B then A. */
static noinline void bug_abba(void)
{
	mutex_lock(&lock_a);
	mutex_lock(&lock_b);
	mutex_unlock(&lock_b);
	mutex_unlock(&lock_a);
	mutex_lock(&lock_b);
	mutex_lock(&lock_a);
	mutex_unlock(&lock_a);
	mutex_unlock(&lock_b);
}

/* KASAN: one byte past an 8-byte allocation. */
static noinline void bug_oob(void)
{
	char *p = kmalloc(8, GFP_KERNEL);

	if (!p)
		return;
	((volatile char *)p)[8] = 1;
	kfree(p);
}

/* DEBUG_ATOMIC_SLEEP: sleeping under a spinlock. */
static noinline void bug_sleep(void)
{
	spin_lock(&lock_s);
	msleep(1);
	spin_unlock(&lock_s);
}

/* kmemleak: the only pointer to an allocation is lost. */
static noinline void bug_leak(void)
{
	leaked = kmalloc(128, GFP_KERNEL);
	leaked = NULL;
}

/* DMA-API debug: unmap with a different size than mapped. */
static noinline void bug_dma(void)
{
	void *buf = kmalloc(64, GFP_KERNEL);
	dma_addr_t addr;

	if (!buf)
		return;
	addr = dma_map_single(&pdev->dev, buf, 64, DMA_TO_DEVICE);
	if (!dma_mapping_error(&pdev->dev, addr))
		dma_unmap_single(&pdev->dev, addr, 32, DMA_TO_DEVICE);
	kfree(buf);
}

static ssize_t canary_read(struct file *file, char __user *ubuf, size_t len,
			     loff_t *pos)
{
	if (sysfs_streq(bug, "abba"))
		bug_abba();
	else if (sysfs_streq(bug, "oob"))
		bug_oob();
	else if (sysfs_streq(bug, "sleep"))
		bug_sleep();
	else if (sysfs_streq(bug, "leak"))
		bug_leak();
	else if (sysfs_streq(bug, "dma"))
		bug_dma();
	else if (sysfs_streq(bug, "warn"))
		WARN_ON(1);
	return 0;
}

static const struct file_operations canary_fops = {
	.owner = THIS_MODULE,
	.read = canary_read,
};

static struct miscdevice canary_misc = {
	.minor = MISC_DYNAMIC_MINOR,
	.name = "fpga-p2p0",
	.fops = &canary_fops,
};

static int __init canary_init(void)
{
	int ret;

	if (canary_shim_ping() != 42)
		return -EINVAL;
	pdev = platform_device_register_simple("fpga_p2p_canary", -1, NULL, 0);
	if (IS_ERR(pdev))
		return PTR_ERR(pdev);
	ret = dma_coerce_mask_and_coherent(&pdev->dev, DMA_BIT_MASK(64));
	if (!ret)
		ret = misc_register(&canary_misc);
	if (ret)
		platform_device_unregister(pdev);
	return ret;
}

static void __exit canary_exit(void)
{
	misc_deregister(&canary_misc);
	platform_device_unregister(pdev);
}

module_init(canary_init);
module_exit(canary_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("QEMU harness detector canary: a deliberately broken fpga_p2p");
