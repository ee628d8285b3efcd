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
//! Taking the GVL back without a kernel sleep: a thread whose work is done waits in user
//! space, briefly, while another thread that came back through here holds the GVL, and only
//! then returns to Ruby (`kura::binding::Handover`, shared with the Python binding, says why
//! and how).

use std::any::Any;
use std::ffi::c_void;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};

use kura::binding::Handover;

/// The GVL's handover among the threads of this binding.
static HANDOVER: Handover = Handover::new();

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
    let outcome = run(|| HANDOVER.run_released(work));
    // The GVL is held again, by this thread.
    HANDOVER.retaken();
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
