// SPDX-License-Identifier: GPL-2.0
/*
 * fpga_p2p: PCI driver for the radar FPGA card (XDMA-based), character
 * devices /dev/fpga-p2pN (misc devices), counters in
 * /sys/class/misc/fpga-p2pN/counters/, the card's clock as a PTP hardware
 * clock (fp_ptp.c; /sys/class/misc/fpga-p2pN/device/ptp/ptpM names its
 * /dev/ptpM). The tests run it against an
 * emulated card in QEMU (tests/qemu/fpga-card/): the same PCI function,
 * so probe, BARs, MSI-X, bus mastering, remove and shutdown are this code.
 *
 * Device removal (PCI remove, module unload) with files still open: the
 * device is marked dead, every ring's DMA is stopped and released (or
 * quarantined when the engine did not stop), waiters wake up with an
 * error, and the memory of the device goes away with its last open file.
 */
#include <linux/idr.h>
#include <linux/module.h>
#include <linux/pci.h>
#include <linux/slab.h>

#include "fpga_p2p_drv.h"

/* The N of /dev/fpga-p2pN: the lowest free one, below FP_MAX_DEVICES. */
static DEFINE_IDA(fp_index_ida);

/* --- sysfs: /sys/class/misc/fpga-p2pN/counters/ -------------------------- */

static ssize_t fp_counter_show(struct device *d, struct device_attribute *a,
			       char *buf);

#define FP_COUNTER(n)	__ATTR(n, 0444, fp_counter_show, NULL)

/* In the order of struct fpga_p2p_counters, all __u64. */
static struct device_attribute fp_counter_attr[] = {
	FP_COUNTER(frames),
	FP_COUNTER(chunks),
	FP_COUNTER(drops_no_slot),
	FP_COUNTER(drops_fault),
	FP_COUNTER(short_frames),
	FP_COUNTER(crc_errors),
	FP_COUNTER(desc_errors),
	FP_COUNTER(irqs),
	FP_COUNTER(revocations),
	FP_COUNTER(tx_submitted),
	FP_COUNTER(tx_completed),
	FP_COUNTER(event_overflows),
	FP_COUNTER(dma_timeouts),
	FP_COUNTER(lost_irqs),
	FP_COUNTER(quarantined),
};

static ssize_t fp_counter_show(struct device *d, struct device_attribute *a,
			       char *buf)
{
	struct miscdevice *misc = dev_get_drvdata(d);
	struct fpga_p2p_counters c;
	u64 v[ARRAY_SIZE(fp_counter_attr)];

	BUILD_BUG_ON(offsetof(struct fpga_p2p_counters, reserved) !=
		     sizeof(v));
	fp_counters_read(container_of(misc, struct fp_dev, misc), &c);
	memcpy(v, &c, sizeof(v));
	return sysfs_emit(buf, "%llu\n", v[a - fp_counter_attr]);
}

static struct attribute *fp_counter_attrs[ARRAY_SIZE(fp_counter_attr) + 1];

static const struct attribute_group fp_counter_group = {
	.name = "counters",
	.attrs = fp_counter_attrs,
};

static const struct attribute_group *fp_groups[] = {
	&fp_counter_group,
	NULL
};

/*
 * A card appeared: check it, quiesce it, only then let it master the bus,
 * take its interrupt and create /dev/fpga-p2pN.
 */
static struct fp_dev *fp_dev_create(struct pci_dev *pdev,
				    void __iomem * const *bars)
{
	struct device *dev = &pdev->dev;
	struct fp_dev *fdev;
	int index, ret, i;

	ret = dma_set_max_seg_size(dev, UINT_MAX);
	if (!ret)
		ret = dma_set_seg_boundary(dev, ULONG_MAX);
	if (ret)
		return ERR_PTR(ret);

	fdev = kzalloc(sizeof(*fdev), GFP_KERNEL);
	if (!fdev)
		return ERR_PTR(-ENOMEM);
	kref_init(&fdev->ref);
	fdev->pdev = pci_dev_get(pdev);
	fdev->dev = dev;
	fdev->irq = pci_irq_vector(pdev, 0);
	for (i = 0; i < FP_BARS; i++)
		fdev->bar[i] = bars[i];
	mutex_init(&fdev->lock);
	mutex_init(&fdev->hw_lock);
	spin_lock_init(&fdev->irq_lock);
	spin_lock_init(&fdev->quarantine_lock);
	INIT_LIST_HEAD(&fdev->quarantine);
	INIT_LIST_HEAD(&fdev->files);
	init_waitqueue_head(&fdev->build_wq);
	fp_watchdog_init(fdev);

	/* Whatever a previous driver or boot left running stops first. */
	ret = fp_hw_init(fdev);
	if (ret)
		goto put;
	/*
	 * Completion records are only as good as their ordering after the
	 * chunk's bytes: no Relaxed Ordering on the card's writes.
	 */
	if (fdev->hw_caps & FP_UB_CAP_COMPLETION)
		pcie_capability_clear_word(pdev, PCI_EXP_DEVCTL,
					   PCI_EXP_DEVCTL_RELAX_EN);
	pci_set_master(pdev);
	ret = request_irq(fdev->irq, fp_irq,
			  pdev->msi_enabled || pdev->msix_enabled ? 0 :
			  IRQF_SHARED, FP_NAME, fdev);
	if (ret)
		goto shutdown;

	/* -ENOSPC when FP_MAX_DEVICES cards are there already. */
	index = ida_alloc_max(&fp_index_ida, FP_MAX_DEVICES - 1, GFP_KERNEL);
	if (index < 0) {
		ret = index;
		goto free_irq;
	}
	fdev->index = index;
	snprintf(fdev->name, sizeof(fdev->name), "fpga-p2p%d", index);
	fdev->misc.minor = MISC_DYNAMIC_MINOR;
	fdev->misc.name = fdev->name;
	fdev->misc.fops = &fp_fops;
	fdev->misc.parent = dev;
	fdev->misc.groups = fp_groups;
	/* The card's clock first: it is there when the node appears. */
	fp_ptp_register(fdev);
	ret = misc_register(&fdev->misc);
	if (ret)
		goto free_ptp;
	dev_info(dev, "%s: user block %08x v%x.%x, %s\n", fdev->name,
		 fdev->hw_id, fdev->hw_version >> 16,
		 fdev->hw_version & 0xffff,
		 pdev->msix_enabled ? "MSI-X" : pdev->msi_enabled ? "MSI" :
		 "INTx");
	return fdev;

free_ptp:
	fp_ptp_unregister(fdev);
	ida_free(&fp_index_ida, index);
free_irq:
	free_irq(fdev->irq, fdev);
shutdown:
	fp_hw_shutdown(fdev);
	pci_clear_master(pdev);
put:
	fp_dev_put(fdev);
	return ERR_PTR(ret);
}

static void fp_dev_destroy(struct fp_dev *fdev)
{
	struct fp_ring *rings[FP_DIRS] = { };
	struct fp_file *fp;
	bool building, quiet;
	int d;

	/* No new opens (misc_deregister waits for opens under way)... */
	mutex_lock(&fdev->lock);
	fdev->dead = true;
	mutex_unlock(&fdev->lock);
	misc_deregister(&fdev->misc);
	ida_free(&fp_index_ida, fdev->index);

	/* ...no new rings; let registrations under way finish (bounded). */
	building = !wait_event_timeout(fdev->build_wq, !READ_ONCE(fdev->building),
				       msecs_to_jiffies(FP_TEARDOWN_TIMEOUT_MS));

	mutex_lock(&fdev->lock);
	for (d = 0; d < FP_DIRS; d++) {
		rings[d] = fdev->claim[d];
		if (rings[d])
			kref_get(&rings[d]->ref);
	}
	mutex_unlock(&fdev->lock);
	for (d = 0; d < FP_DIRS; d++) {
		if (!rings[d])
			continue;
		/*
		 * A REGISTER still under way owns its ring's page table (which
		 * nv-p2p may have written before arming its notifier): keep
		 * everything of it rather than release it under that call.
		 */
		if (building && READ_ONCE(rings[d]->state) == FP_RING_BUILDING) {
			fp_ring_abandon(rings[d], "registration");
			fp_ring_put(rings[d]);
			continue;
		}
		fp_ring_release_memory(rings[d], FP_RELEASE_REMOVE);
		fp_ring_put(rings[d]);
	}

	quiet = !fp_hw_shutdown(fdev);
	free_irq(fdev->irq, fdev);
	/* No interrupt reads the card's clock any more. */
	fp_ptp_unregister(fdev);
	fp_ring_reap_quarantine(fdev, quiet);

	mutex_lock(&fdev->lock);
	list_for_each_entry(fp, &fdev->files, node)
		fp_file_wake(fp);
	mutex_unlock(&fdev->lock);

	fp_dev_put(fdev);
}

/* --- PCI ----------------------------------------------------------------- */

static int fp_pci_probe(struct pci_dev *pdev, const struct pci_device_id *id)
{
	void __iomem *bars[FP_BARS];
	struct fp_dev *fdev;
	int ret;

	ret = pcim_enable_device(pdev);
	if (ret)
		return ret;
	if (pci_resource_len(pdev, FP_BAR_USER) < FP_BAR_USER_LEN ||
	    pci_resource_len(pdev, FP_BAR_XDMA) < FP_BAR_XDMA_LEN)
		return -ENODEV;
	ret = pcim_iomap_regions(pdev, BIT(FP_BAR_USER) | BIT(FP_BAR_XDMA),
				 FP_NAME);
	if (ret)
		return ret;
	bars[FP_BAR_USER] = pcim_iomap_table(pdev)[FP_BAR_USER];
	bars[FP_BAR_XDMA] = pcim_iomap_table(pdev)[FP_BAR_XDMA];
	ret = dma_set_mask_and_coherent(&pdev->dev, DMA_BIT_MASK(64));
	if (ret)
		ret = dma_set_mask_and_coherent(&pdev->dev, DMA_BIT_MASK(32));
	if (ret)
		return ret;

	/* One vector: MSI-X, else MSI, else the (shared) INTx line. */
	ret = pci_alloc_irq_vectors(pdev, 1, 1, PCI_IRQ_ALL_TYPES);
	if (ret < 0)
		return ret;
	fdev = fp_dev_create(pdev, bars);
	if (IS_ERR(fdev)) {
		pci_free_irq_vectors(pdev);
		return PTR_ERR(fdev);
	}
	pci_set_drvdata(pdev, fdev);
	return 0;
}

static void fp_pci_remove(struct pci_dev *pdev)
{
	fp_dev_destroy(pci_get_drvdata(pdev));
	pci_clear_master(pdev);
	pci_free_irq_vectors(pdev);
}

/*
 * Reboot, kexec, power-off: the engine and the source stop and the card
 * may no longer master the bus, so nothing is written into memory that the
 * next kernel (or firmware) owns. Open files and rings stay as they are.
 */
static void fp_pci_shutdown(struct pci_dev *pdev)
{
	struct fp_dev *fdev = pci_get_drvdata(pdev);

	if (fdev)
		fp_hw_shutdown(fdev);
	pci_clear_master(pdev);
}

static const struct pci_device_id fp_pci_ids[] = {
	{ PCI_DEVICE(FP_PCI_VENDOR_ID, FP_PCI_DEVICE_ID) },
	{ }
};
MODULE_DEVICE_TABLE(pci, fp_pci_ids);

static struct pci_driver fp_pci_driver = {
	.name = FP_NAME,
	.id_table = fp_pci_ids,
	.probe = fp_pci_probe,
	.remove = fp_pci_remove,
	.shutdown = fp_pci_shutdown,
};

/* --- module -------------------------------------------------------------- */

static int __init fp_init(void)
{
	size_t i;
	int ret;

	for (i = 0; i < ARRAY_SIZE(fp_counter_attr); i++)
		fp_counter_attrs[i] = &fp_counter_attr[i].attr;
	ret = fp_ring_init();
	if (ret)
		return ret;
	ret = pci_register_driver(&fp_pci_driver);
	if (ret)
		fp_ring_exit();
	return ret;
}

static void __exit fp_exit(void)
{
	pci_unregister_driver(&fp_pci_driver);
	ida_destroy(&fp_index_ida);
	fp_ring_exit();
	fp_ring_free_buried();
}

module_init(fp_init);
module_exit(fp_exit);

MODULE_DESCRIPTION("Radar FPGA capture/transmit over XDMA into GPU-visible memory (Tegra nv-p2p)");
MODULE_LICENSE("GPL");
