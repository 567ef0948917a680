package check

import (
	"os"
	"path/filepath"
	"testing"
)

// TestKernelModulesRow: the modules a rootless node needs and cannot load
// (kind's rootless guide, kind #4204), and what could not be told.
func TestKernelModulesRow(t *testing.T) {
	const dir = "lib/modules/5.15.0-91-generic/"
	remove := func(p string) func(t *testing.T, dir string) {
		return func(t *testing.T, root string) {
			if err := os.Remove(filepath.Join(root, p)); err != nil {
				t.Fatal(err)
			}
		}
	}
	runRowCases(t, []rowCase{
		{
			name: "an untuned rootless host", host: "rootless-keys-modules",
			want: map[string]string{
				"kernel-modules": "warn:^ip_tables loaded, iptable_nat loaded; not loaded: ip6_tables, ip6table_nat, xt_recent$",
				"keys-maxkeys":   "warn:kernel.keys.maxkeys=200",
				"lib-modules":    "pass",
			},
			exit: ExitWarn,
		},
		{
			name: "loaded, built in, compressed and dashed names", host: "rootless-keys-modules",
			change: func(t *testing.T, root string) {
				write(t, root, "proc/sys/kernel/keys/maxkeys", "20000\n")
				write(t, root, dir+"modules.builtin", "kernel/net/ipv6/netfilter/ip6-tables.ko\nkernel/net/ipv6/netfilter/ip6table_nat.ko\n")
				write(t, root, "proc/modules", "xt_recent 24576 0 - Live 0x0\nip_tables 1 0 - Live 0x0\niptable_nat 1 0 - Live 0x0\n")
			},
			want: map[string]string{"kernel-modules": "pass:^ip_tables loaded, ip6_tables built in, iptable_nat loaded, ip6table_nat built in, xt_recent loaded$"},
			exit: ExitPass,
		},
		{
			name: "not in this kernel", host: "rootless-keys-modules",
			change: func(t *testing.T, root string) {
				write(t, root, dir+"modules.dep", "kernel/net/ipv6/netfilter/ip6_tables.ko.zst:\nkernel/net/ipv6/netfilter/ip6table_nat.ko.xz: x\n")
			},
			want: map[string]string{"kernel-modules": "warn:not loaded: ip6_tables, ip6table_nat; not in this kernel: xt_recent$"},
			exit: ExitWarn,
		},
		{
			name: "no modules.dep: what could not be told", host: "rootless-keys-modules", change: remove(dir + "modules.dep"),
			want: map[string]string{"kernel-modules": "pass:^ip_tables loaded, iptable_nat loaded; cannot tell ip6_tables, ip6table_nat, xt_recent \\(no /lib/modules/5.15.0-91-generic/modules.dep\\)$"},
			exit: ExitWarn, // keys-maxkeys
		},
		{
			name: "no kernel release", host: "rootless-keys-modules", change: remove("proc/sys/kernel/osrelease"),
			want: map[string]string{"kernel-modules": "pass:cannot tell ip6_tables, ip6table_nat, xt_recent \\(the running kernel \\(no /proc/sys/kernel/osrelease\\)"},
			exit: ExitWarn,
		},
		{
			name: "a rootless host captured without them", host: "rootless-v2-delegated",
			want: map[string]string{"kernel-modules": "pass:^cannot tell ip_tables, ip6_tables, iptable_nat, ip6table_nat, xt_recent \\(no /proc/modules; the running kernel"},
			exit: ExitPass,
		},
		{
			name: "rootful", host: "docker-v2-cgroupns",
			want: map[string]string{"kernel-modules": "pass:not rootless"},
			exit: ExitPass,
		},
	})
}
