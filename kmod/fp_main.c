// SPDX-License-Identifier: GPL-2.0
/*
 * fpga_p2p: PCI driver for the radar FPGA card (XDMA-based), character
 * devices /dev/fpga-p2pN, counters in sysfs. Built with FPGA_P2P_MODEL=1 it
 * also contains a register-level model of the card (fp_model.c), enabled
 * with the module parameter model_devices=N.
 *
 * Device removal (PCI remove, model teardown, module unload) with files
 * still open: the device is marked dead, every ring's DMA is stopped and
 * released, waiters wake up with an error, and the memory of the device
 * goes away with its last open file.
 */
#include <linux/cdev.h>
#include <linux/module.h>
#include <linux/pci.h>
#include <linux/slab.h>
#include <linux/version.h>

#include "fpga_p2p.h"

static struct class *fp_class;
static dev_t fp_devt;
static struct cdev fp_cdev;
static DEFINE_MUTEX(fp_devs_lock);	/* fp_devs[] */
static struct fp_dev *fp_devs[FP_MAX_DEVICES];

static void fp_dev_release(struct kref *ref)
{
	struct fp_dev *fdev = container_of(ref, struct fp_dev, ref);

	put_device(fdev->dev);
	kfree(fdev);
}

void fp_dev_put(struct fp_dev *fdev)
{
	kref_put(&fdev->ref, fp_dev_release);
}

struct fp_dev *fp_dev_get_minor(unsigned int minor)
{
	struct fp_dev *fdev = NULL;

	if (minor >= FP_MAX_DEVICES)
		return NULL;
	mutex_lock(&fp_devs_lock);
	if (fp_devs[minor] && !fp_devs[minor]->dead) {
		fdev = fp_devs[minor];
		kref_get(&fdev->ref);
	}
	mutex_unlock(&fp_devs_lock);
	return fdev;
}

void fp_counters_read(struct fp_dev *fdev, struct fpga_p2p_counters *c)
{
	struct fp_counters *k = &fdev->cnt;

	memset(c, 0, sizeof(*c));
	c->frames = atomic64_read(&k->frames);
	c->chunks = atomic64_read(&k->chunks);
	c->short_frames = atomic64_read(&k->short_frames);
	c->crc_errors = atomic64_read(&k->crc_errors);
	c->desc_errors = atomic64_read(&k->desc_errors);
	c->irqs = atomic64_read(&k->irqs);
	c->revocations = atomic64_read(&k->revocations);
	c->tx_submitted = atomic64_read(&k->tx_submitted);
	c->tx_completed = atomic64_read(&k->tx_completed);
	c->event_overflows = atomic64_read(&k->event_overflows);
	c->dma_timeouts = atomic64_read(&k->dma_timeouts);

	/* Drops are counted by the FPGA, per stream: add the running one. */
	mutex_lock(&fdev->hw_lock);
	c->drops_no_slot = fdev->drops_no_slot_base;
	c->drops_fault = fdev->drops_fault_base;
	if (fdev->streaming && !fdev->hw_gone) {
		c->drops_no_slot += fp_urd(fdev, FP_UB_DROPS_NO_SLOT);
		c->drops_fault += fp_urd(fdev, FP_UB_DROPS_FAULT);
	}
	mutex_unlock(&fdev->hw_lock);
}

/* --- sysfs: /sys/class/fpga_p2p/fpga-p2pN/counters/ ---------------------- */

#define FP_COUNTER_ATTR(name)						\
static ssize_t name##_show(struct device *d, struct device_attribute *a, \
			   char *buf)					\
{									\
	struct fpga_p2p_counters c;					\
									\
	fp_counters_read(dev_get_drvdata(d), &c);			\
	return sysfs_emit(buf, "%llu\n", c.name);			\
}									\
static DEVICE_ATTR_RO(name)

FP_COUNTER_ATTR(frames);
FP_COUNTER_ATTR(chunks);
FP_COUNTER_ATTR(drops_no_slot);
FP_COUNTER_ATTR(drops_fault);
FP_COUNTER_ATTR(short_frames);
FP_COUNTER_ATTR(crc_errors);
FP_COUNTER_ATTR(desc_errors);
FP_COUNTER_ATTR(irqs);
FP_COUNTER_ATTR(revocations);
FP_COUNTER_ATTR(tx_submitted);
FP_COUNTER_ATTR(tx_completed);
FP_COUNTER_ATTR(event_overflows);
FP_COUNTER_ATTR(dma_timeouts);

static struct attribute *fp_counter_attrs[] = {
	&dev_attr_frames.attr,
	&dev_attr_chunks.attr,
	&dev_attr_drops_no_slot.attr,
	&dev_attr_drops_fault.attr,
	&dev_attr_short_frames.attr,
	&dev_attr_crc_errors.attr,
	&dev_attr_desc_errors.attr,
	&dev_attr_irqs.attr,
	&dev_attr_revocations.attr,
	&dev_attr_tx_submitted.attr,
	&dev_attr_tx_completed.attr,
	&dev_attr_event_overflows.attr,
	&dev_attr_dma_timeouts.attr,
	NULL
};

static const struct attribute_group fp_counter_group = {
	.name = "counters",
	.attrs = fp_counter_attrs,
};

static const struct attribute_group *fp_groups[] = {
	&fp_counter_group,
	NULL
};

/*
 * A card (or model instance) appeared: check it, take its interrupt and
 * create /dev/fpga-p2pN. @dev is the device that does the DMA.
 */
struct fp_dev *fp_dev_create(struct device *dev, int irq, bool irq_shared,
			     void __iomem * const *bars, struct fp_model *model)
{
	struct fp_dev *fdev;
	int minor, ret, i;

	ret = dma_set_max_seg_size(dev, UINT_MAX);
	if (!ret)
		ret = dma_set_seg_boundary(dev, ULONG_MAX);
	if (ret)
		return ERR_PTR(ret);

	fdev = kzalloc(sizeof(*fdev), GFP_KERNEL);
	if (!fdev)
		return ERR_PTR(-ENOMEM);
	kref_init(&fdev->ref);
	fdev->dev = get_device(dev);
	fdev->irq = irq;
	fdev->model = model;
	for (i = 0; bars && i < FP_BARS; i++)
		fdev->bar[i] = bars[i];
	mutex_init(&fdev->lock);
	mutex_init(&fdev->hw_lock);
	spin_lock_init(&fdev->irq_lock);
	INIT_LIST_HEAD(&fdev->files);
	init_waitqueue_head(&fdev->build_wq);

	ret = fp_hw_init(fdev);
	if (ret)
		goto put;
	ret = request_irq(irq, fp_irq, irq_shared ? IRQF_SHARED : 0, FP_NAME,
			  fdev);
	if (ret)
		goto shutdown;

	mutex_lock(&fp_devs_lock);
	for (minor = 0; minor < FP_MAX_DEVICES; minor++)
		if (!fp_devs[minor])
			break;
	if (minor == FP_MAX_DEVICES) {
		mutex_unlock(&fp_devs_lock);
		ret = -ENOSPC;
		goto free_irq;
	}
	fdev->minor = minor;
	fdev->node = device_create_with_groups(fp_class, dev,
					       MKDEV(MAJOR(fp_devt), minor),
					       fdev, fp_groups, "fpga-p2p%d",
					       minor);
	if (IS_ERR(fdev->node)) {
		mutex_unlock(&fp_devs_lock);
		ret = PTR_ERR(fdev->node);
		goto free_irq;
	}
	fp_devs[minor] = fdev;
	mutex_unlock(&fp_devs_lock);
	dev_info(dev, "fpga-p2p%d: user block %08x v%x.%x%s\n", minor,
		 fdev->hw_id, fdev->hw_version >> 16,
		 fdev->hw_version & 0xffff, model ? " (model)" : "");
	return fdev;

free_irq:
	free_irq(irq, fdev);
shutdown:
	fp_hw_shutdown(fdev);
put:
	fp_dev_put(fdev);
	return ERR_PTR(ret);
}

void fp_dev_destroy(struct fp_dev *fdev)
{
	struct fp_ring *rings[FP_DIRS] = { };
	struct fp_file *fp;
	int d;

	mutex_lock(&fp_devs_lock);
	fp_devs[fdev->minor] = NULL;
	mutex_unlock(&fp_devs_lock);

	/* No new rings; let registrations under way finish (bounded). */
	mutex_lock(&fdev->lock);
	fdev->dead = true;
	mutex_unlock(&fdev->lock);
	wait_event_timeout(fdev->build_wq, !READ_ONCE(fdev->building),
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
		fp_ring_release_memory(rings[d], FP_RELEASE_REMOVE);
		fp_ring_put(rings[d]);
	}

	fp_hw_shutdown(fdev);
	free_irq(fdev->irq, fdev);

	mutex_lock(&fdev->lock);
	list_for_each_entry(fp, &fdev->files, node)
		fp_file_wake(fp);
	mutex_unlock(&fdev->lock);

	device_destroy(fp_class, MKDEV(MAJOR(fp_devt), fdev->minor));
	fp_dev_put(fdev);
}

/* --- PCI ----------------------------------------------------------------- */

static int fp_pci_probe(struct pci_dev *pdev, const struct pci_device_id *id)
{
	void __iomem *bars[FP_BARS];
	struct fp_dev *fdev;
	bool shared;
	int ret, irq;

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
	pci_set_master(pdev);

	ret = pci_alloc_irq_vectors(pdev, 1, 1, PCI_IRQ_ALL_TYPES);
	if (ret < 0)
		return ret;
	irq = pci_irq_vector(pdev, 0);
	shared = !pdev->msi_enabled && !pdev->msix_enabled;

	fdev = fp_dev_create(&pdev->dev, irq, shared, bars, NULL);
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
	pci_free_irq_vectors(pdev);
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
};

/* --- module -------------------------------------------------------------- */

#ifdef FPGA_P2P_MODEL
static unsigned int model_devices;
module_param(model_devices, uint, 0444);
MODULE_PARM_DESC(model_devices, "software models of the card to create (test builds)");
#endif

static int __init fp_init(void)
{
	int ret;

	ret = alloc_chrdev_region(&fp_devt, 0, FP_MAX_DEVICES, FP_NAME);
	if (ret)
		return ret;
	cdev_init(&fp_cdev, &fp_fops);
	fp_cdev.owner = THIS_MODULE;
	ret = cdev_add(&fp_cdev, fp_devt, FP_MAX_DEVICES);
	if (ret)
		goto unregister_region;
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 4, 0)
	fp_class = class_create(FP_NAME);
#else
	fp_class = class_create(THIS_MODULE, FP_NAME);
#endif
	if (IS_ERR(fp_class)) {
		ret = PTR_ERR(fp_class);
		goto del_cdev;
	}
	ret = pci_register_driver(&fp_pci_driver);
	if (ret)
		goto destroy_class;
#ifdef FPGA_P2P_MODEL
	ret = fp_model_init(model_devices);
	if (ret) {
		pci_unregister_driver(&fp_pci_driver);
		goto destroy_class;
	}
#endif
	return 0;

destroy_class:
	class_destroy(fp_class);
del_cdev:
	cdev_del(&fp_cdev);
unregister_region:
	unregister_chrdev_region(fp_devt, FP_MAX_DEVICES);
	return ret;
}

static void __exit fp_exit(void)
{
#ifdef FPGA_P2P_MODEL
	fp_model_exit();
#endif
	pci_unregister_driver(&fp_pci_driver);
	class_destroy(fp_class);
	cdev_del(&fp_cdev);
	unregister_chrdev_region(fp_devt, FP_MAX_DEVICES);
}

module_init(fp_init);
module_exit(fp_exit);

MODULE_DESCRIPTION("Radar FPGA capture/transmit over XDMA into GPU-visible memory (Tegra nv-p2p)");
MODULE_LICENSE("GPL");
