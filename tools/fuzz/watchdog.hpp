#pragma once
// A per-input time limit: a thread watches the input the crash guard has
// armed, and when one input has run longer than the limit (a hang, or a
// reader gone quadratic), saves it to the crash dir as
// timeout-READER-seedS-inputI, says which input it was, and ends the
// process with status 1. The limit is far above any input's time (inputs
// take microseconds to milliseconds), so which inputs run and what a run
// reports never depend on the clock; only a hang is cut short.
namespace twin::fuzz {

// Starts the watchdog once; seconds <= 0: none.
void start_watchdog(double seconds);

// Arms an input that never ends (for the watchdog's own test).
[[noreturn]] void hang_for_watchdog_test();

}  // namespace twin::fuzz
