//! `crash`: a child process streams and is SIGKILLed at a random moment
//! (opening, registering, streaming, holding slots). After each kill the
//! device works for the parent and nothing stays registered.

use std::time::Duration;

use tegra_p2p::{FrameSource, SequenceTracker, StartParams};

use crate::common::{self, Check, Ctx, Outcome, Rng};
use crate::{Env, ensure};

#[derive(clap::Args, Debug)]
pub struct Opts {
    #[arg(long, default_value_t = 1000)]
    pub cycles: u32,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Longest time the child streams before the kill, ms.
    #[arg(long, default_value_t = 60)]
    pub max_delay_ms: u64,
    /// Frames the parent verifies after each kill.
    #[arg(long, default_value_t = 3)]
    pub check_frames: u64,
}

const SLOT: usize = 16 << 10;
const CHUNK: usize = 4 << 10;
/// The child's and the parent's rings are 4 slots each.
const RING_BYTES: usize = 4 * SLOT;

/// The child: stream forever (holding a slot now and then) until killed.
fn child(env: &Env) -> ! {
    let r = (|| -> Check {
        let mut src = common::open_source(&env.device, 4, SLOT, CHUNK)?;
        src.start(&StartParams::test_pattern().with_chunk_period(Duration::from_micros(20)))
            .ctx("start")?;
        let mut t = SequenceTracker::new();
        let mut held = None;
        loop {
            let f = src.next_frame(None).ctx("wait")?;
            common::verify_frame(&f, CHUNK, &mut t)?;
            // Keep every 5th frame until the next one: slots are owned at the kill too.
            if f.sequence() % 5 == 0 {
                held = Some(f);
            } else if held.is_some() {
                held = None;
            }
        }
    })();
    eprintln!("crash child: {}", r.err().unwrap_or_default());
    // SAFETY: leaves the forked child without running the parent's destructors.
    unsafe { libc::_exit(2) }
}

pub fn run(env: &Env, o: &Opts, out: &mut Outcome) -> Check {
    let mut rng = Rng::new(o.seed);
    eprintln!("crash: seed {}", o.seed);
    out.note("seed", o.seed);
    common::p2p_clean(env, "before the first cycle")?;
    let mem0 = common::mem_available()?;
    for cycle in 0..o.cycles {
        let delay = Duration::from_micros(rng.below(o.max_delay_ms * 1000 + 1));
        // SAFETY: this program is single-threaded here; the child only runs
        // `child`, which ends in _exit.
        let pid = unsafe { libc::fork() };
        ensure!(pid >= 0, "fork: {}", nix::errno::Errno::last());
        if pid == 0 {
            child(env);
        }
        std::thread::sleep(delay);
        // SAFETY: signals our own child.
        unsafe { libc::kill(pid, libc::SIGKILL) };
        let mut status = 0;
        // SAFETY: reaps our own child into a local.
        let w = unsafe { libc::waitpid(pid, &mut status, 0) };
        ensure!(w == pid, "waitpid: {}", nix::errno::Errno::last());
        ensure!(
            libc::WIFSIGNALED(status) && libc::WTERMSIG(status) == libc::SIGKILL,
            "cycle {cycle}: child ended on its own (status {status:#x}) before the kill"
        );
        out.kill_cycles += 1;
        common::p2p_clean(env, &format!("cycle {cycle}: after SIGKILL"))?;
        // The device works for the next process.
        let mut src = common::open_source(&env.device, 4, SLOT, CHUNK)
            .map_err(|e| format!("cycle {cycle}: after kill: {e}"))?;
        src.start(&StartParams::test_pattern().with_chunk_period(Duration::from_micros(20)))
            .map_err(|e| format!("cycle {cycle}: start after kill: {e}"))?;
        let mut t = SequenceTracker::new();
        for _ in 0..o.check_frames {
            let f = src.next_frame(None).ctx("wait after kill")?;
            common::verify_frame(&f, CHUNK, &mut t)?;
            out.frames_verified += 1;
        }
        out.frames_dropped += t.dropped;
        drop(src);
        common::p2p_clean(env, &format!("cycle {cycle}: after close"))?;
        if cycle % 20 == 0 {
            eprintln!("crash: {} kill cycles ok", cycle + 1);
        }
    }
    let mem = common::mem_kept(
        mem0,
        out.kill_cycles,
        2 * RING_BYTES as u64,
        "SIGKILL cycles",
    )?;
    out.detail = format!(
        "{} SIGKILLs of a streaming process: each time nothing left pinned or mapped \
         ({}; {mem}), and the next process streamed {} verified frames",
        out.kill_cycles,
        common::leak_source(env),
        o.check_frames
    );
    Ok(())
}
