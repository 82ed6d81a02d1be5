// Package tests holds the process-level tests of Strata's public API, as bbolt's tests/: tests
// whose subject is the process itself rather than a package's logic. They measure the peak
// resident memory of a process (VmHWM, VmRSS from /proc/self/status) or re-execute the test
// binary as a child process, which is why they do not share a process with the root package's
// many tests: a test run before them would count in the peak, and their children pay for no
// other test's set-up.
//
//   - TestBoundedMemory (memory_test.go): 640 MiB of value, list and map state through a 64 MiB
//     budget within the budget plus 96 MiB of VmRSS and VmHWM, and a small Go heap.
//   - TestMemoryShapes (memshape_test.go): a 1 GiB list, a 5 M-entry map and 2 M namespaces,
//     each written and read back by a child process whose VmHWM stays within the budget plus
//     96 MiB.
//
// They import the public API only (the root package). scripts/test.sh runs them in its
// bounded-memory step, without -race (whose shadow memory the store does not control); the
// race step runs them at their reduced sizes or skips them, as each test's comment says.
//
// Two process-level tests stay in the root package because they need what only its own tests
// can reach: TestAttackCrashKill (crash_kill_test.go: the SIGKILL child runs the model test's
// workload and checks against its model) and TestOpenFilesLimit (openfiles_linux_test.go: the
// child sizes its tables through an engine option the public Options does not have).
package tests
