// SPDX-License-Identifier: GPL-2.0
/*
 * fpga_p2p: the card's clock as a PTP hardware clock (/dev/ptpN).
 *
 * The card counts nanoseconds in a 64-bit register pair whose rate the
 * driver trims with a frequency word, that it sets and steps in one
 * operation, and that it reads through a latch (board/fpga/registers.md,
 * "Time"). Each frame's metadata timestamp is this clock at the frame's
 * first sample. The driver registers it with the kernel's PTP layer, so
 * linuxptp disciplines it like a network card's clock: phc2sys from the
 * system clock (or from the Ethernet PHC that ptp4l keeps), ts2phc from a
 * GNSS receiver's PPS wired to the card's PPS input. By convention the
 * clock keeps TAI, as PTP does; at probe an unset clock (below the year
 * 2000) starts from the system's TAI.
 *
 * The PPS input latches the clock at each rising edge into a small FIFO.
 * The PTP layer's worker thread polls it while external time stamps are
 * enabled (every FP_PTP_POLL_MS) and reports each as a PTP_CLOCK_EXTTS
 * event: the time is the card's latch, so the polling delays only the
 * report. Nothing of this runs in the capture interrupt but
 * fp_ptp_host_ns(), one latched read.
 *
 * The time lock (fp_ptp.lock) serialises the latch and the command
 * registers. It is a leaf: taken in the interrupt handler under irq_lock
 * and ring->lock, and alone everywhere else, always with interrupts off.
 */
#include <linux/math64.h>
#include <linux/ptp_clock_kernel.h>
#include <linux/timekeeping.h>

#include "fpga_p2p_drv.h"

/* Largest trim offered to the PTP layer, ppb (the register takes +-0.5). */
#define FP_PTP_MAX_ADJ_PPB	500000
/* How often the PPS FIFO is looked at while external time stamps are on. */
#define FP_PTP_POLL_MS		50
/* A clock below this (2000-01-01 TAI) was never set since power-on. */
#define FP_PTP_UNSET_NS		(946684800ULL * NSEC_PER_SEC)

static struct fp_dev *fp_ptp_dev(struct ptp_clock_info *info)
{
	return container_of(info, struct fp_dev, ptp.info);
}

/*
 * The clock through its latch: the NOW_LO read latches the whole count.
 * @sts, when given, gets the system clock read just before and just after
 * that read. Time lock held. Returns -EIO when the card answers all ones.
 */
static int fp_ptp_latch(struct fp_dev *fdev, u64 *ns,
			struct ptp_system_timestamp *sts)
{
	u32 lo, hi;

	ptp_read_system_prets(sts);
	lo = fp_urd(fdev, FP_UB_TIME_NOW_LO);
	ptp_read_system_postts(sts);
	hi = fp_urd(fdev, FP_UB_TIME_NOW_HI);
	if (lo == U32_MAX && hi == U32_MAX)
		return -EIO;
	*ns = (u64)hi << 32 | lo;
	return 0;
}

static int fp_ptp_gettimex64(struct ptp_clock_info *info,
			     struct timespec64 *ts,
			     struct ptp_system_timestamp *sts)
{
	struct fp_dev *fdev = fp_ptp_dev(info);
	unsigned long flags;
	u64 ns;
	int ret;

	if (fp_card_gone(fdev))
		return -ENODEV;
	spin_lock_irqsave(&fdev->ptp.lock, flags);
	ret = fp_ptp_latch(fdev, &ns, sts);
	spin_unlock_irqrestore(&fdev->ptp.lock, flags);
	if (!ret)
		*ts = ns_to_timespec64(ns);
	return ret;
}

/* Writes a 64-bit value to a LO/HI pair and issues @cmd. Time lock held. */
static void fp_ptp_command(struct fp_dev *fdev, u32 lo_reg, u64 value, u32 cmd)
{
	fp_uwr(fdev, lo_reg, lower_32_bits(value));
	fp_uwr(fdev, lo_reg + 4, upper_32_bits(value));
	fp_uwr(fdev, FP_UB_TIME_CMD, cmd);
}

static int fp_ptp_settime64(struct ptp_clock_info *info,
			    const struct timespec64 *ts)
{
	struct fp_dev *fdev = fp_ptp_dev(info);
	s64 ns = timespec64_to_ns(ts);
	unsigned long flags;

	if (ns < 0)
		return -EINVAL;
	if (fp_card_gone(fdev))
		return -ENODEV;
	spin_lock_irqsave(&fdev->ptp.lock, flags);
	fp_ptp_command(fdev, FP_UB_TIME_SET_LO, ns, FP_TIME_CMD_SET);
	spin_unlock_irqrestore(&fdev->ptp.lock, flags);
	return 0;
}

static int fp_ptp_adjtime(struct ptp_clock_info *info, s64 delta)
{
	struct fp_dev *fdev = fp_ptp_dev(info);
	unsigned long flags;

	if (fp_card_gone(fdev))
		return -ENODEV;
	spin_lock_irqsave(&fdev->ptp.lock, flags);
	fp_ptp_command(fdev, FP_UB_TIME_STEP_LO, (u64)delta, FP_TIME_CMD_STEP);
	spin_unlock_irqrestore(&fdev->ptp.lock, flags);
	return 0;
}

/**
 * fp_ptp_freq_word() - the card's frequency word for a trim
 * @scaled_ppm: the trim in ppm with a 16-bit binary fraction (adjfine)
 *
 * One unit of the word is 2^-32 ns per ns, so the word is
 * scaled_ppm * 2^32 / (10^6 * 2^16) = scaled_ppm * 2^16 / 10^6.
 *
 * Return: the word, rounded toward zero.
 */
static s32 fp_ptp_freq_word(long scaled_ppm)
{
	return (s32)div_s64((s64)scaled_ppm << 16, 1000000);
}

static int fp_ptp_adjfine(struct ptp_clock_info *info, long scaled_ppm)
{
	struct fp_dev *fdev = fp_ptp_dev(info);
	unsigned long flags;

	if (fp_card_gone(fdev))
		return -ENODEV;
	spin_lock_irqsave(&fdev->ptp.lock, flags);
	fp_uwr(fdev, FP_UB_TIME_FREQ, (u32)fp_ptp_freq_word(scaled_ppm));
	spin_unlock_irqrestore(&fdev->ptp.lock, flags);
	return 0;
}

static int fp_ptp_enable(struct ptp_clock_info *info,
			 struct ptp_clock_request *rq, int on)
{
	struct fp_dev *fdev = fp_ptp_dev(info);
	unsigned long flags;

	if (rq->type != PTP_CLK_REQ_EXTTS || rq->extts.index != 0)
		return -EOPNOTSUPP;
	/* The input latches rising edges only. */
	if (on && (rq->extts.flags & PTP_STRICT_FLAGS) &&
	    (rq->extts.flags & PTP_FALLING_EDGE))
		return -EOPNOTSUPP;
	if (fp_card_gone(fdev))
		return -ENODEV;
	spin_lock_irqsave(&fdev->ptp.lock, flags);
	fp_uwr(fdev, FP_UB_TIME_PPS_CTRL, on ? FP_TIME_PPS_ENABLE : 0);
	WRITE_ONCE(fdev->ptp.extts_on, !!on);
	fdev->ptp.pps_lost = 0;
	spin_unlock_irqrestore(&fdev->ptp.lock, flags);
	if (on)
		ptp_schedule_worker(fdev->ptp.clock, 0);
	return 0;
}

static int fp_ptp_verify(struct ptp_clock_info *info, unsigned int pin,
			 enum ptp_pin_function func, unsigned int chan)
{
	if (pin == 0 && (func == PTP_PF_NONE ||
			 (func == PTP_PF_EXTTS && chan == 0)))
		return 0;
	return -EOPNOTSUPP;
}

/*
 * The PTP layer's worker: report the PPS input's latched times. Returns
 * the delay to the next look, or a negative number to stop looking.
 */
static long fp_ptp_aux_work(struct ptp_clock_info *info)
{
	struct fp_dev *fdev = fp_ptp_dev(info);
	struct ptp_clock_event ev = { .type = PTP_CLOCK_EXTTS, .index = 0 };
	unsigned long flags;
	u32 n, i, lost = 0;
	u64 ts[FP_PTP_PPS_MAX];

	if (!READ_ONCE(fdev->ptp.extts_on) || fp_card_gone(fdev))
		return -1;
	spin_lock_irqsave(&fdev->ptp.lock, flags);
	n = min_t(u32, fp_urd(fdev, FP_UB_TIME_PPS_LEVEL), FP_PTP_PPS_MAX);
	for (i = 0; i < n; i++) {
		ts[i] = fp_urd(fdev, FP_UB_TIME_PPS_TS_LO);
		ts[i] |= (u64)fp_urd(fdev, FP_UB_TIME_PPS_TS_HI) << 32;
		fp_uwr(fdev, FP_UB_TIME_PPS_POP, 1);
	}
	if (n) {
		u32 l = fp_urd(fdev, FP_UB_TIME_PPS_LOST);

		lost = l - fdev->ptp.pps_lost;
		fdev->ptp.pps_lost = l;
	}
	spin_unlock_irqrestore(&fdev->ptp.lock, flags);
	for (i = 0; i < n; i++) {
		ev.timestamp = ts[i];
		ptp_clock_event(fdev->ptp.clock, &ev);
	}
	if (lost)
		dev_warn_ratelimited(fdev->dev, "%s: %u PPS edges lost (FIFO full)\n",
				     fdev->name, lost);
	return msecs_to_jiffies(FP_PTP_POLL_MS);
}

/**
 * fp_ptp_register() - register the card's clock as a PTP hardware clock
 * @fdev: the device, its misc device registered (the clock takes its name)
 *
 * A card whose time block says it has no clock gets none. The frequency
 * trim starts at zero (what the PTP layer reports to a new reader); an
 * unset clock starts from the system's TAI. A failure to register leaves
 * the card without a clock and capture working: the reason is logged.
 */
void fp_ptp_register(struct fp_dev *fdev)
{
	struct ptp_clock_info *info = &fdev->ptp.info;
	struct ptp_clock *clock;
	unsigned long flags;
	u32 caps = fp_urd(fdev, FP_UB_TIME_CAPS);
	u64 now;

	spin_lock_init(&fdev->ptp.lock);
	if (caps == U32_MAX || !(caps & FP_TIME_CAP_CLOCK))
		return;
	*info = (struct ptp_clock_info) {
		.owner = THIS_MODULE,
		.max_adj = FP_PTP_MAX_ADJ_PPB,
		.adjfine = fp_ptp_adjfine,
		.adjtime = fp_ptp_adjtime,
		.gettimex64 = fp_ptp_gettimex64,
		.settime64 = fp_ptp_settime64,
		.do_aux_work = fp_ptp_aux_work,
	};
	strscpy(info->name, fdev->name, sizeof(info->name));
	if (caps & FP_TIME_CAP_PPS_IN) {
		fdev->ptp.pin = (struct ptp_pin_desc) {
			.index = 0,
			.func = PTP_PF_EXTTS,
			.chan = 0,
		};
		strscpy(fdev->ptp.pin.name, "PPS_IN", sizeof(fdev->ptp.pin.name));
		info->n_ext_ts = 1;
		info->n_pins = 1;
		info->pin_config = &fdev->ptp.pin;
		info->enable = fp_ptp_enable;
		info->verify = fp_ptp_verify;
	}

	spin_lock_irqsave(&fdev->ptp.lock, flags);
	fp_uwr(fdev, FP_UB_TIME_PPS_CTRL, 0);
	fp_uwr(fdev, FP_UB_TIME_FREQ, 0);
	if (!fp_ptp_latch(fdev, &now, NULL) && now < FP_PTP_UNSET_NS)
		fp_ptp_command(fdev, FP_UB_TIME_SET_LO, ktime_get_clocktai_ns(),
			       FP_TIME_CMD_SET);
	spin_unlock_irqrestore(&fdev->ptp.lock, flags);

	clock = ptp_clock_register(info, fdev->dev);
	if (IS_ERR_OR_NULL(clock)) {
		dev_warn(fdev->dev, "%s: no PTP clock for the card's clock (%d)\n",
			 fdev->name, clock ? (int)PTR_ERR(clock) : -EOPNOTSUPP);
		return;
	}
	fdev->ptp.clock = clock;
	dev_info(fdev->dev, "%s: the card's clock is /dev/ptp%d%s\n", fdev->name,
		 ptp_clock_index(clock),
		 info->n_ext_ts ? ", PPS input on pin PPS_IN (extts 0)" : "");
}

/**
 * fp_ptp_unregister() - remove the card's PTP clock
 * @fdev: the device
 *
 * After this no clock operation runs or starts (the PTP layer waits for
 * those under way), so the registers may go; the PPS input is turned off
 * when the card still answers.
 */
void fp_ptp_unregister(struct fp_dev *fdev)
{
	unsigned long flags;

	if (!fdev->ptp.clock)
		return;
	ptp_clock_unregister(fdev->ptp.clock);
	fdev->ptp.clock = NULL;
	WRITE_ONCE(fdev->ptp.extts_on, false);
	if (!fp_card_gone(fdev)) {
		spin_lock_irqsave(&fdev->ptp.lock, flags);
		fp_uwr(fdev, FP_UB_TIME_PPS_CTRL, 0);
		spin_unlock_irqrestore(&fdev->ptp.lock, flags);
	}
}

/**
 * fp_ptp_host_ns() - a time of the card's clock on the host's CLOCK_MONOTONIC
 * @fdev: the device
 * @card_ns: a past time of the card's clock (a frame's first sample)
 *
 * Reads the card's clock and CLOCK_MONOTONIC back to back and takes the
 * card's elapsed time off the host's reading: exact to the card's rate
 * error over the elapsed time, and unaffected by steps of either clock
 * before @card_ns. Any context; one latched read under the time lock.
 *
 * Return: the host time in ns, or 0 when the card has no clock, did not
 * answer, or its clock reads before @card_ns (stepped back since).
 */
u64 fp_ptp_host_ns(struct fp_dev *fdev, u64 card_ns)
{
	unsigned long flags;
	u64 now, host;
	int ret;

	if (!fdev->ptp.clock)
		return 0;
	spin_lock_irqsave(&fdev->ptp.lock, flags);
	ret = fp_ptp_latch(fdev, &now, NULL);
	host = ktime_get_ns();
	spin_unlock_irqrestore(&fdev->ptp.lock, flags);
	if (ret || now < card_ns || now - card_ns > host)
		return 0;
	return host - (now - card_ns);
}
