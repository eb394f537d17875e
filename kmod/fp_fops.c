// SPDX-License-Identifier: GPL-2.0
/*
 * fpga_p2p: the character device. Every open file has its own rings and its
 * own event queue (a preallocated ring of struct fpga_p2p_event, sized at
 * REGISTER for everything the file's rings can queue); read() and the WAIT
 * ioctl consume it.
 */
#include <linux/fs.h>
#include <linux/poll.h>
#include <linux/sched/signal.h>
#include <linux/slab.h>
#include <linux/uaccess.h>

#include "fpga_p2p_drv.h"

/* Events copied out per read() call at most (stack buffer). */
#define FP_READ_BATCH	8
#define FP_EV_INITIAL	16

/* Some ring of the file can no longer deliver, or the device is gone. */
static bool fp_file_error(struct fp_file *fp, bool *gone)
{
	bool err = false;
	int d;

	*gone = READ_ONCE(fp->fdev->dead);
	spin_lock(&fp->rings_lock);
	for (d = 0; d < FP_DIRS; d++) {
		struct fp_ring *ring = fp->ring[d];

		if (!ring)
			continue;
		switch (READ_ONCE(ring->state)) {
		case FP_RING_FAULTED:
			err = true;
			break;
		case FP_RING_REVOKED:
		case FP_RING_DEAD:
			/*
			 * The state changes when the teardown begins, its
			 * event is queued when it ends: until then the ring
			 * is not done talking.
			 */
			if (completion_done(&ring->torn_down))
				err = true;
			break;
		default:
			break;
		}
	}
	spin_unlock(&fp->rings_lock);
	return err || *gone;
}

static bool fp_events_ready(struct fp_file *fp)
{
	return READ_ONCE(fp->ev_count) || READ_ONCE(fp->ev_lost);
}

/*
 * Copy up to @max queued events into @out without consuming them; an
 * overflow marker comes once the queue has drained. read_lock held.
 */
static u32 fp_events_peek(struct fp_file *fp, struct fpga_p2p_event *out,
			  u32 max)
{
	unsigned long flags;
	u32 n = 0;

	spin_lock_irqsave(&fp->ev_lock, flags);
	while (n < max && n < fp->ev_count) {
		out[n] = fp->ev[(fp->ev_head + n) & (fp->ev_cap - 1)];
		n++;
	}
	if (n < max && n == fp->ev_count && fp->ev_lost) {
		memset(&out[n], 0, sizeof(out[n]));
		out[n].type = FPGA_P2P_EV_OVERFLOW;
		out[n].slot = FPGA_P2P_NO_SLOT;
		out[n].dropped = fp->ev_lost;
		n++;
	}
	spin_unlock_irqrestore(&fp->ev_lock, flags);
	return n;
}

static void fp_events_consume(struct fp_file *fp, u32 n)
{
	unsigned long flags;
	u32 q;

	spin_lock_irqsave(&fp->ev_lock, flags);
	q = min(n, fp->ev_count);
	fp->ev_head = (fp->ev_head + q) & (fp->ev_cap - 1);
	fp->ev_count -= q;
	if (n > q)
		fp->ev_lost = 0;	/* the overflow marker was delivered */
	spin_unlock_irqrestore(&fp->ev_lock, flags);
}

/*
 * Wait for events (bounded) and copy up to @max of them to @ubuf.
 * Returns the number copied or a negative errno.
 */
static long fp_events_get(struct fp_file *fp, void __user *ubuf, u32 max,
			  bool nonblock, u32 timeout_ms)
{
	struct fpga_p2p_event ev[FP_READ_BATCH];
	long left = msecs_to_jiffies(timeout_ms);
	bool gone;
	long ret;
	u32 n;

	max = min_t(u32, max, FP_READ_BATCH);
	for (;;) {
		if (mutex_lock_interruptible(&fp->read_lock))
			return -EINTR;
		n = fp_events_peek(fp, ev, max);
		if (n) {
			if (copy_to_user(ubuf, ev, n * sizeof(ev[0]))) {
				mutex_unlock(&fp->read_lock);
				return -EFAULT;
			}
			fp_events_consume(fp, n);
			mutex_unlock(&fp->read_lock);
			return n;
		}
		mutex_unlock(&fp->read_lock);

		if (fp_file_error(fp, &gone)) {
			/*
			 * A ring's last event (REVOKED, FAULT) is queued
			 * before its state says so: look once more, so that
			 * the caller gets the event, not a bare EIO.
			 */
			smp_rmb();	/* pairs with fp_ring_fault()'s smp_wmb() */
			if (READ_ONCE(fp->ev_count))
				continue;
			return gone ? -ENODEV : -EIO;
		}
		if (nonblock)
			return -EAGAIN;
		if (left <= 0)
			return -ETIMEDOUT;
		ret = wait_event_interruptible_timeout(fp->wq,
						       fp_events_ready(fp) ||
						       fp_file_error(fp, &gone),
						       left);
		if (ret < 0)
			return -EINTR;
		if (ret == 0)
			left = 0;
		else
			left = ret;
	}
}

static ssize_t fp_read(struct file *file, char __user *buf, size_t count,
		       loff_t *ppos)
{
	struct fp_file *fp = file->private_data;
	long n;

	if (count < sizeof(struct fpga_p2p_event))
		return -EINVAL;
	n = fp_events_get(fp, buf, count / sizeof(struct fpga_p2p_event),
			  file->f_flags & O_NONBLOCK,
			  READ_ONCE(fp->event_timeout_ms));
	return n < 0 ? n : n * sizeof(struct fpga_p2p_event);
}

static __poll_t fp_poll(struct file *file, poll_table *wait)
{
	struct fp_file *fp = file->private_data;
	__poll_t mask = 0;
	bool gone;

	poll_wait(file, &fp->wq, wait);
	if (fp_events_ready(fp))
		mask |= EPOLLIN | EPOLLRDNORM;
	if (fp_file_error(fp, &gone))
		mask |= EPOLLERR;
	if (gone)
		mask |= EPOLLHUP;
	return mask;
}

static int fp_open(struct inode *inode, struct file *file)
{
	struct miscdevice *misc = file->private_data;
	struct fp_dev *fdev = container_of(misc, struct fp_dev, misc);
	struct fp_file *fp;

	/* misc_open() holds misc_mtx: fp_dev_destroy() cannot run now. */
	if (READ_ONCE(fdev->dead))
		return -ENODEV;
	kref_get(&fdev->ref);
	fp = kzalloc(sizeof(*fp), GFP_KERNEL);
	if (!fp)
		goto nomem;
	fp->ev = kcalloc(FP_EV_INITIAL, sizeof(*fp->ev), GFP_KERNEL);
	if (!fp->ev)
		goto nomem;
	fp->ev_cap = FP_EV_INITIAL;
	fp->fdev = fdev;
	fp->event_timeout_ms = FP_DEFAULT_EVENT_TIMEOUT_MS;
	mutex_init(&fp->lock);
	mutex_init(&fp->read_lock);
	spin_lock_init(&fp->rings_lock);
	spin_lock_init(&fp->ev_lock);
	init_waitqueue_head(&fp->wq);

	mutex_lock(&fdev->lock);
	if (fdev->dead) {
		mutex_unlock(&fdev->lock);
		kfree(fp->ev);
		kfree(fp);
		fp_dev_put(fdev);
		return -ENODEV;
	}
	list_add(&fp->node, &fdev->files);
	mutex_unlock(&fdev->lock);

	file->private_data = fp;
	return stream_open(inode, file);

nomem:
	if (fp)
		kfree(fp->ev);
	kfree(fp);
	fp_dev_put(fdev);
	return -ENOMEM;
}

static int fp_release(struct inode *inode, struct file *file)
{
	struct fp_file *fp = file->private_data;
	struct fp_dev *fdev = fp->fdev;
	struct fp_ring *ring;
	int d;

	mutex_lock(&fp->lock);
	for (d = 0; d < FP_DIRS; d++) {
		spin_lock(&fp->rings_lock);
		ring = fp->ring[d];
		fp->ring[d] = NULL;
		spin_unlock(&fp->rings_lock);
		if (ring)
			fp_ring_destroy(ring);
	}
	mutex_unlock(&fp->lock);

	mutex_lock(&fdev->lock);
	list_del(&fp->node);
	mutex_unlock(&fdev->lock);
	kvfree(fp->ev);
	kfree(fp);
	fp_dev_put(fdev);
	return 0;
}

static int fp_ioctl_info(struct fp_file *fp, void __user *arg)
{
	struct fp_dev *fdev = fp->fdev;
	struct fpga_p2p_info info = {
		.uapi_version = FPGA_P2P_UAPI_VERSION,
		.caps = FPGA_P2P_CAP_CAPTURE | FPGA_P2P_CAP_TRANSMIT |
			FPGA_P2P_CAP_CHUNK_EVENTS,
		.hw_id = fdev->hw_id,
		.hw_version = fdev->hw_version,
		.max_slots = fdev->max_slots,
		.max_chunks_per_frame = FP_MAX_CHUNKS,
		.max_slot_bytes = min_t(u64, FP_MAX_SLOT_BYTES,
					fdev->max_frame_bytes),
		.slot_align = FPGA_P2P_SLOT_ALIGN,
		.event_bytes = sizeof(struct fpga_p2p_event),
		.max_playback_frames = fdev->pb_frames,
	};

	if (fdev->hw_caps & FP_UB_CAP_TEST_PATTERN)
		info.caps |= FPGA_P2P_CAP_TEST_PATTERN;
	if (fdev->hw_caps & FP_UB_CAP_PLAYBACK)
		info.caps |= FPGA_P2P_CAP_PLAYBACK;
	if (fdev->hw_caps & FP_UB_CAP_COMPLETION)
		info.caps |= FPGA_P2P_CAP_COMPLETION;
	return copy_to_user(arg, &info, sizeof(info)) ? -EFAULT : 0;
}

static int fp_ioctl_register(struct fp_file *fp, void __user *arg)
{
	struct fpga_p2p_ring r;
	int ret;

	if (copy_from_user(&r, arg, sizeof(r)))
		return -EFAULT;
	if (READ_ONCE(fp->fdev->dead))
		return -ENODEV;
	ret = fp_ring_register(fp, &r);
	if (ret)
		return ret;
	if (copy_to_user(arg, &r, sizeof(r))) {
		fp_ring_unregister(fp, r.handle);
		return -EFAULT;
	}
	return 0;
}

static int fp_ioctl_start(struct fp_file *fp, void __user *arg)
{
	struct fp_dev *fdev = fp->fdev;
	struct fpga_p2p_start s;
	struct fp_ring *ring;
	int ret;

	if (copy_from_user(&s, arg, sizeof(s)))
		return -EFAULT;
	if (s.reserved[0] || s.reserved[1] ||
	    (s.flags & ~FPGA_P2P_START_CHUNK_EVENTS) ||
	    s.event_timeout_ms > FP_MAX_EVENT_TIMEOUT_MS)
		return -EINVAL;
	switch (s.source) {
	case FPGA_P2P_SRC_ADC:
		if (!(fdev->hw_caps & FP_UB_CAP_ADC) || s.playback_frames)
			return -EINVAL;
		break;
	case FPGA_P2P_SRC_TEST_PATTERN:
		if (!(fdev->hw_caps & FP_UB_CAP_TEST_PATTERN) ||
		    s.playback_frames)
			return -EINVAL;
		break;
	case FPGA_P2P_SRC_PLAYBACK:
		if (!(fdev->hw_caps & FP_UB_CAP_PLAYBACK) ||
		    !s.playback_frames || s.playback_frames > fdev->pb_frames)
			return -EINVAL;
		break;
	default:
		return -EINVAL;
	}

	mutex_lock(&fp->lock);
	ring = fp_ring_get(fp, s.handle);
	if (!ring) {
		ret = -ENOENT;
	} else if (ring->dir != FP_C2H) {
		ret = -EINVAL;
	} else if (s.source == FPGA_P2P_SRC_PLAYBACK &&
		   ring->slot_bytes > fdev->pb_frame_bytes) {
		ret = -EINVAL;
	} else {
		ret = fp_c2h_start(ring, &s);
		if (!ret)
			WRITE_ONCE(fp->event_timeout_ms, s.event_timeout_ms ?
				   s.event_timeout_ms :
				   FP_DEFAULT_EVENT_TIMEOUT_MS);
	}
	if (ring)
		fp_ring_put(ring);
	mutex_unlock(&fp->lock);
	return ret;
}

static int fp_ioctl_stop(struct fp_file *fp, void __user *arg)
{
	struct fp_ring *ring;
	u32 handle;
	int ret;

	if (copy_from_user(&handle, arg, sizeof(handle)))
		return -EFAULT;
	mutex_lock(&fp->lock);
	ring = fp_ring_get(fp, handle);
	if (!ring)
		ret = -ENOENT;
	else if (ring->dir != FP_C2H)
		ret = -EINVAL;
	else
		ret = fp_c2h_stop(ring);
	if (ring)
		fp_ring_put(ring);
	mutex_unlock(&fp->lock);
	return ret;
}

static int fp_release_one(struct fp_file *fp, u32 handle, u32 slot)
{
	struct fp_ring *ring = fp_ring_get(fp, handle);
	int ret;

	if (!ring)
		return -ENOENT;
	ret = fp_release_slot(ring, slot);
	fp_ring_put(ring);
	return ret;
}

static int fp_ioctl_release(struct fp_file *fp, void __user *arg)
{
	struct fpga_p2p_release rel;

	if (copy_from_user(&rel, arg, sizeof(rel)))
		return -EFAULT;
	return fp_release_one(fp, rel.handle, rel.slot);
}

static int fp_ioctl_tx(struct fp_file *fp, void __user *arg)
{
	struct fp_ring *ring;
	struct fpga_p2p_tx tx;
	int ret;

	if (copy_from_user(&tx, arg, sizeof(tx)))
		return -EFAULT;
	if (tx.reserved0 || tx.target > FPGA_P2P_TX_PLAYBACK)
		return -EINVAL;
	ring = fp_ring_get(fp, tx.handle);
	if (!ring)
		return -ENOENT;
	ret = fp_tx_submit(ring, &tx);
	fp_ring_put(ring);
	return ret;
}

static int fp_ioctl_wait(struct fp_file *fp, struct fpga_p2p_wait __user *arg)
{
	struct fpga_p2p_wait w;
	long n;
	int ret;

	if (copy_from_user(&w, arg, offsetof(struct fpga_p2p_wait, event)))
		return -EFAULT;
	if (w.reserved0 || w.timeout_ms > FP_MAX_EVENT_TIMEOUT_MS)
		return -EINVAL;
	if (w.release_slot != FPGA_P2P_NO_SLOT) {
		ret = fp_release_one(fp, w.release_handle, w.release_slot);
		/*
		 * A revoked or faulted ring refuses the release with EIO: the
		 * event that says why is still queued and is what the caller
		 * must get (it would never see it otherwise).
		 */
		if (ret && ret != -EIO)
			return ret;
	}
	n = fp_events_get(fp, &arg->event, 1, false,
			  w.timeout_ms ? w.timeout_ms :
			  READ_ONCE(fp->event_timeout_ms));
	return n < 0 ? n : 0;
}

static int fp_ioctl_counters(struct fp_file *fp, void __user *arg)
{
	struct fpga_p2p_counters c;

	fp_counters_read(fp->fdev, &c);
	return copy_to_user(arg, &c, sizeof(c)) ? -EFAULT : 0;
}

static long fp_ioctl(struct file *file, unsigned int cmd, unsigned long arg)
{
	struct fp_file *fp = file->private_data;
	void __user *uarg = (void __user *)arg;

	switch (cmd) {
	case FPGA_P2P_IOC_INFO:
		return fp_ioctl_info(fp, uarg);
	case FPGA_P2P_IOC_REGISTER:
		return fp_ioctl_register(fp, uarg);
	case FPGA_P2P_IOC_UNREGISTER: {
		u32 handle;

		if (copy_from_user(&handle, uarg, sizeof(handle)))
			return -EFAULT;
		return fp_ring_unregister(fp, handle);
	}
	case FPGA_P2P_IOC_START:
		return fp_ioctl_start(fp, uarg);
	case FPGA_P2P_IOC_STOP:
		return fp_ioctl_stop(fp, uarg);
	case FPGA_P2P_IOC_RELEASE:
		return fp_ioctl_release(fp, uarg);
	case FPGA_P2P_IOC_COUNTERS:
		return fp_ioctl_counters(fp, uarg);
	case FPGA_P2P_IOC_TX_SUBMIT:
		return fp_ioctl_tx(fp, uarg);
	case FPGA_P2P_IOC_WAIT:
		return fp_ioctl_wait(fp, uarg);
	default:
		return -ENOTTY;
	}
}

const struct file_operations fp_fops = {
	.owner = THIS_MODULE,
	.open = fp_open,
	.release = fp_release,
	.read = fp_read,
	.poll = fp_poll,
	.unlocked_ioctl = fp_ioctl,
	.compat_ioctl = compat_ptr_ioctl,
	.llseek = no_llseek,
};
