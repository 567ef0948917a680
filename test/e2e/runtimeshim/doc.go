// Command runtimeshim is an OCI runtime wrapper for hosts whose capability
// bounding set is smaller than the full set Docker and podman grant
// --privileged containers.
//
// Why: runc asks the kernel for every capability listed in the container's
// config.json. When the host (here: a sandboxed VM whose bounding set lacks
// CAP_SYS_RESOURCE) cannot hold one of them, `docker run --privileged` fails
// with "unable to apply caps: operation not permitted". Docker has no knob to
// say "privileged, minus what the host lacks", so this wrapper drops from the
// OCI spec every capability that its own bounding set lacks and then execs the
// real runc with the original arguments.
//
// Without CAP_SYS_RESOURCE a process cannot raise a hard rlimit either.
// podman asks for RLIMIT_NOFILE 1048576 on create and on every exec, above
// this host's hard limit, and runc then fails with "error setting rlimit
// type 7: operation not permitted". So, when CAP_SYS_RESOURCE is missing,
// every rlimit of the spec is lowered to the wrapper's own hard limit of
// that resource: the most the container could get on this host.
//
// test/e2e/run.sh registers it in /etc/docker/daemon.json under "runtimes"
// and makes it Docker's "default-runtime"; test/podman/run.sh makes it
// podman's default runtime in /etc/containers/containers.conf. Both do so
// only on hosts that need it.
//
// Rewritten documents:
//   - create/run: BUNDLE/config.json, keys process.capabilities and
//     process.rlimits.
//   - exec --process FILE: FILE, keys capabilities and rlimits (a bare OCI
//     Process).
package main
