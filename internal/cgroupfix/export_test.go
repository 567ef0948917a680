package cgroupfix

// IsCpusetMount lets the privileged tests (package cgroupfix_test) pick
// the cpuset hierarchy as DetectV1 does, without a copy of the option test.
var IsCpusetMount = isCpusetMount
