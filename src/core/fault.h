#pragma once
// Fault points (DESIGN section 7, "Run folders and outputs are crash-consistent"; docs/testing.md, "The fault
// sweep"). Every durable effect on a user's files — a rename that makes a file current, a removal, an append to
// a log or an output — calls fault_point() just before it happens. Normally that is one relaxed counter
// increment. Two environment variables, read once, turn it into a test hook:
//   MLALPHA_FAULT_AT=k     the k-th fault point of this process (counted from 1) kills the process with SIGKILL
//                          before its effect: the same as a power cut or `kill -9` at that instant;
//   MLALPHA_FAULT_LOG=f    every fault point appends "k<TAB>what<NEWLINE>" to file f (a sweep counts a run's
//                          points with it, then kills it at each one in turn).
// The count is process-wide on purpose: a sweep names "the k-th durable write of this run", whoever makes it.
namespace mlalpha {

// `what` names the effect for the log ("rename run/last.safetensors", "append run/metrics.jsonl").
void fault_point(const char* what);

// How many fault points this process has passed (a test's check that a path has them at all).
long fault_points_passed();

}  // namespace mlalpha
