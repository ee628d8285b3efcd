//! Running an engine call with Ruby's GVL (global VM lock) released.
//!
//! A read that decompresses a record, a write that waits for the engine's lock, a sync or
//! a rebuild can take long enough that other Ruby threads should run meanwhile; with the GVL
//! held they could not. The closure runs on this same thread, so it needs no `Send`, but it
//! must not touch any Ruby object: callers copy keys and values out before and build Ruby
//! strings after.
//!
//! `rb_thread_call_without_gvl2` is used rather than `rb_thread_call_without_gvl`: the latter
//! checks for pending interrupts (`Thread#raise`, `Thread#kill`) after the call and may
//! `longjmp` out through this Rust frame, skipping its destructors. The `2` variant never
//! does; when an interrupt is already pending it does not call the function at all, and then
//! the work runs here with the GVL held (Ruby handles the interrupt at its next check).
//!
//! Taking the GVL back: if another thread holds it at that moment, Ruby puts this thread to
//! sleep on a condition variable and the holder wakes it through the kernel when it lets go;
//! on a virtual machine that sleep and wake-up costs more than a decompressed read, and two
//! reading threads end up slower than one. So, as the Python binding does for the GIL
//! (crates/kura-python/src/gil.rs), a thread finishing its work first waits in user space,
//! briefly, while another thread that came back through here still holds the GVL, and only
//! then returns to Ruby, which then finds the GVL free. `HOLDER` marks the thread that took
//! the GVL back here last and has not released it here since; a stale mark (that thread
//! released the GVL elsewhere) costs one bounded spin (`MAX_SPIN`). The GVL itself is
//! always taken by Ruby, so the spin can delay a thread but never deadlock it.

use std::any::Any;
use std::ffi::c_void;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How long a thread waits in user space for the holder to let go of the GVL: several times
/// the Ruby half of a `db[k]` loop iteration, well below a sleep and wake-up.
const MAX_SPIN: Duration = Duration::from_micros(20);

/// The thread that took the GVL back through `without_gvl` and has not released it through
/// `without_gvl` since (as far as this binding knows); 0 when none.
static HOLDER: AtomicU64 = AtomicU64::new(0);

std::thread_local! {
    /// This thread's `HOLDER` mark: the address of a thread-local, unique among live threads.
    static MARK: u8 = const { 0 };
}

fn this_thread() -> u64 {
    MARK.with(|mark| std::ptr::from_ref(mark) as usize as u64)
}

/// Spins while another marked thread still holds the GVL, for at most `MAX_SPIN`.
fn wait_for_release(me: u64) {
    let holder = HOLDER.load(Ordering::Acquire);
    if holder == 0 || holder == me {
        return;
    }
    let start = Instant::now();
    loop {
        for _ in 0..32 {
            std::hint::spin_loop();
            if HOLDER.load(Ordering::Acquire) != holder {
                return;
            }
        }
        if start.elapsed() >= MAX_SPIN {
            return;
        }
    }
}

/// The work and its outcome, shared with the trampoline through a raw pointer.
struct Call<F, R> {
    work: Option<F>,
    outcome: Option<Result<R, Box<dyn Any + Send>>>,
}

/// Called by Ruby without the GVL: runs the work, catching a panic (unwinding through the C
/// frames of Ruby would abort) to resume it once back in Rust.
unsafe extern "C" fn trampoline<F: FnOnce() -> R, R>(data: *mut c_void) -> *mut c_void {
    // SAFETY: `data` is the `&mut Call<F, R>` that `without_gvl` passed, alive and not
    // otherwise borrowed until `rb_thread_call_without_gvl2` returns.
    let call = unsafe { &mut *data.cast::<Call<F, R>>() };
    if let Some(work) = call.work.take() {
        call.outcome = Some(catch_unwind(AssertUnwindSafe(work)));
    }
    std::ptr::null_mut()
}

/// Runs `work` with the GVL released (see the file header for what `work` may touch).
pub fn without_gvl<R>(work: impl FnOnce() -> R) -> R {
    let me = this_thread();
    let outcome = run(|| {
        // The GVL is released now: this thread no longer holds it.
        let _ = HOLDER.compare_exchange(me, 0, Ordering::Release, Ordering::Relaxed);
        let outcome = work();
        wait_for_release(me);
        outcome
    });
    // The GVL is held again, by this thread.
    HOLDER.store(me, Ordering::Release);
    outcome
}

fn run<F: FnOnce() -> R, R>(work: F) -> R {
    let mut call = Call::<F, R> { work: Some(work), outcome: None };
    // SAFETY: the function pointer matches the data's type; `call` outlives the call, which
    // runs the trampoline (if at all) on this thread before returning. No unblocking
    // function is given: engine calls are bounded and finish on their own.
    unsafe {
        rb_sys::rb_thread_call_without_gvl2(
            Some(trampoline::<F, R>),
            std::ptr::addr_of_mut!(call).cast::<c_void>(),
            None,
            std::ptr::null_mut(),
        );
    }
    match (call.outcome, call.work) {
        (Some(Ok(value)), _) => value,
        (Some(Err(panic)), _) => resume_unwind(panic),
        // An interrupt was pending, so Ruby did not run it: run it with the GVL held.
        (None, Some(work)) => work(),
        (None, None) => unreachable!("the trampoline took the work without recording an outcome"),
    }
}
