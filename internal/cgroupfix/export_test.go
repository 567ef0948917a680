package cgroupfix

// IsCpusetMount lets the privileged tests (package cgroupfix_test) pick
// the cpuset hierarchy as DetectV1 does, without a copy of the option test.
var IsCpusetMount = isCpusetMount

// FilterProcCgroups drops the misc controller's line from /proc/cgroups:
// the line whose first field is "misc", however the fields are separated
// (the kernel uses tabs; a capture may have spaces), keeping every other
// line byte for byte.
func FilterProcCgroups(b []byte) []byte { return dropControllers(b, nil) }

// ParseSelfCgroup is a SelfCgroup of the given content.
func ParseSelfCgroup(data []byte) SelfCgroup { return SelfCgroup(data) }
