//! Releasing the GIL around an engine call, and taking it back without a futex sleep: a
//! thread whose work is done waits in user space, briefly, while another thread that came
//! back through here holds the GIL, and only then asks CPython for it (`kura::binding::Handover`,
//! shared with the Ruby binding, says why and how).

use kura::binding::Handover;
use pyo3::prelude::*;

/// The GIL's handover among the threads of this binding.
static HANDOVER: Handover = Handover::new();

/// Runs `work` with the GIL released, like `Python::detach`, and takes the GIL back without
/// sleeping in the kernel when another thread of this binding holds it only briefly.
pub fn detach<T: Send>(py: Python<'_>, work: impl FnOnce() -> T + Send) -> T {
    let outcome = py.detach(|| HANDOVER.run_released(work));
    // The GIL is held again, by this thread.
    HANDOVER.retaken();
    outcome
}
