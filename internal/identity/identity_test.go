package identity

import (
	"bytes"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kind-entrypoint/entrypoint/internal/plan"
	"github.com/kind-entrypoint/entrypoint/internal/system"
	"github.com/kind-entrypoint/entrypoint/internal/system/hosttest"
)

func TestNewMachineID(t *testing.T) {
	seq := bytes.NewReader([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15})
	got, err := NewMachineID(seq)
	if err != nil {
		t.Fatal(err)
	}
	// Version nibble 4 at byte 6, variant 10xx at byte 8.
	if want := "00010203040546078809" + "0a0b0c0d0e0f\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	zeros, err := NewMachineID(bytes.NewReader(make([]byte, 16)))
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^[0-9a-f]{32}\n$`).MatchString(zeros) || zeros == strings.Repeat("0", 32)+"\n" {
		t.Errorf("machine-id from zero bytes %q: want 32 lowercase hex digits, not all zero", zeros)
	}
	if _, err := NewMachineID(bytes.NewReader(make([]byte, 15))); err == nil {
		t.Error("a short random source must be an error, not a weak id")
	}
}

func TestNewUUID(t *testing.T) {
	got, err := NewUUID(bytes.NewReader(bytes.Repeat([]byte{0xff}, 16)))
	if err != nil {
		t.Fatal(err)
	}
	if want := "ffffffff-ffff-4fff-bfff-ffffffffffff\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if !IsUUID(got) {
		t.Errorf("IsUUID(%q) = false", got)
	}
}

func TestIsUUID(t *testing.T) {
	for s, want := range map[string]bool{
		"0b6f8f1e-58a4-4c4e-8d7a-3e2f1c9b6a50\n": true,
		"0B6F8F1E-58A4-4C4E-8D7A-3E2F1C9B6A50":   true,
		"":                                       false,
		"\n":                                     false,
		"0b6f8f1e58a44c4e8d7a3e2f1c9b6a50":       false,
		"0b6f8f1e-58a4-4c4e-8d7a-3e2f1c9b6a5g":   false,
		"0b6f8f1e-58a4-4c4e-8d7a-3e2f1c9b6a50-0": false,
	} {
		if got := IsUUID(s); got != want {
			t.Errorf("IsUUID(%q) = %t, want %t", s, got, want)
		}
	}
}

func TestPlanMachineID(t *testing.T) {
	id := "0123456789abcdef0123456789abcdef\n"
	// Every boot, whatever D-Bus has: a new machine-id.
	regenerate := []string{
		"log INFO: clearing and regenerating /etc/machine-id",
		`write /etc/machine-id 0444 "0123456789abcdef0123456789abcdef\n" [every boot]  # nodes of one image must not share a machine-id`,
	}
	tests := []struct {
		dbus string
		want []string
	}{
		{"absent", regenerate},
		{"symlink", regenerate},
		{"file", append(slices.Clone(regenerate),
			"remove /var/lib/dbus/machine-id  # an image-baked D-Bus machine-id would be every node's",
			"symlink /var/lib/dbus/machine-id -> /etc/machine-id",
		)},
	}
	for _, tt := range tests {
		got := plan.Strings(PlanMachineID(MachineIDFacts{NewID: id, DBus: tt.dbus}))
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("dbus %s (-want +got):\n%s", tt.dbus, diff)
		}
	}
}

func TestPlanProductName(t *testing.T) {
	const info = `log INFO: faking /sys/class/dmi/id/product_name to be "kind"`
	dmi := DMIFile{Path: DMIProductName, Exists: true, Target: "/sys/devices/virtual/dmi/id/product_name"}
	bound := dmi
	bound.Bound = true
	tests := []struct {
		name string
		f    ProductNameFacts
		want []string
	}{
		{"no DMI", ProductNameFacts{DMI: DMIFile{Path: DMIProductName, Target: DMIProductName}}, nil},
		{"first boot", ProductNameFacts{DMI: dmi, Inherit: system.RelAtime}, []string{
			info,
			`write /kind/product_name 0644 "kind\n"`,
			"mount /kind/product_name on /sys/devices/virtual/dmi/id/product_name (bind)",
			"mount none on /sys/devices/virtual/dmi/id/product_name (remount,bind,ro,relatime)",
		}},
		{"restart", ProductNameFacts{DMI: dmi, Current: []byte("kind\n"), Inherit: system.NoSuid}, []string{
			info,
			"mount /kind/product_name on /sys/devices/virtual/dmi/id/product_name (bind)",
			"mount none on /sys/devices/virtual/dmi/id/product_name (remount,bind,ro,nosuid)",
		}},
		{"already bound", ProductNameFacts{DMI: bound, Current: []byte("kind\n")}, []string{info}},
		{"bound, wrong content", ProductNameFacts{DMI: bound, Current: []byte("KVM\n")}, []string{
			info,
			`write-in-place /kind/product_name "kind\n"`,
		}},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, plan.Strings(PlanProductName(tt.f))); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tt.name, diff)
		}
	}
}

func TestPlanProductUUID(t *testing.T) {
	const newUUID = "ffffffff-ffff-4fff-bfff-ffffffffffff\n"
	class := DMIFile{Path: DMIProductUUID, Exists: true, Target: DMIVirtualProductUUID}
	virtual := DMIFile{Path: DMIVirtualProductUUID, Exists: true, Target: DMIVirtualProductUUID}
	copied := DMIFile{Path: DMIProductUUID, Exists: true, Target: DMIProductUUID}
	absent := func(p string) DMIFile { return DMIFile{Path: p, Target: p} }
	const (
		infoClass   = "log INFO: faking /sys/class/dmi/id/product_uuid to be random"
		infoVirtual = "log INFO: faking /sys/devices/virtual/dmi/id/product_uuid as well"
	)
	tests := []struct {
		name string
		f    ProductUUIDFacts
		want []string
	}{
		{"no DMI, first boot", ProductUUIDFacts{NewUUID: newUUID, DMI: []DMIFile{absent(DMIProductUUID), absent(DMIVirtualProductUUID)}}, []string{
			`write /kind/product_uuid 0644 "ffffffff-ffff-4fff-bfff-ffffffffffff\n"  # a random UUID of this node's own, kept across restarts`,
		}},
		{"sysfs link: one file, bound once", ProductUUIDFacts{NewUUID: newUUID, DMI: []DMIFile{class, virtual}}, []string{
			`write /kind/product_uuid 0644 "ffffffff-ffff-4fff-bfff-ffffffffffff\n"  # a random UUID of this node's own, kept across restarts`,
			infoClass,
			"mount /kind/product_uuid on /sys/devices/virtual/dmi/id/product_uuid (bind)",
			"mount none on /sys/devices/virtual/dmi/id/product_uuid (remount,bind,ro)",
			infoVirtual,
		}},
		{"kept, two files", ProductUUIDFacts{Current: []byte("0b6f8f1e-58a4-4c4e-8d7a-3e2f1c9b6a50\n"), DMI: []DMIFile{copied, virtual}}, []string{
			infoClass,
			"mount /kind/product_uuid on /sys/class/dmi/id/product_uuid (bind)",
			"mount none on /sys/class/dmi/id/product_uuid (remount,bind,ro)",
			infoVirtual,
			"mount /kind/product_uuid on /sys/devices/virtual/dmi/id/product_uuid (bind)",
			"mount none on /sys/devices/virtual/dmi/id/product_uuid (remount,bind,ro)",
		}},
		{"garbage replaced", ProductUUIDFacts{Current: []byte("\x00\x01"), NewUUID: newUUID, DMI: []DMIFile{absent(DMIProductUUID), absent(DMIVirtualProductUUID)}}, []string{
			`log WARN: /kind/product_uuid holds "\x00\x01", not a UUID; replacing it`,
			`write /kind/product_uuid 0644 "ffffffff-ffff-4fff-bfff-ffffffffffff\n"`,
		}},
		{"already bound", ProductUUIDFacts{Current: []byte("0b6f8f1e-58a4-4c4e-8d7a-3e2f1c9b6a50\n"), DMI: []DMIFile{
			{Path: DMIProductUUID, Exists: true, Target: DMIVirtualProductUUID, Bound: true},
			{Path: DMIVirtualProductUUID, Exists: true, Target: DMIVirtualProductUUID, Bound: true},
		}}, []string{infoClass, infoVirtual}},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, plan.Strings(PlanProductUUID(tt.f))); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tt.name, diff)
		}
	}
}

const mountinfoText = "1 0 0:1 / / rw,relatime shared:1 - overlay overlay rw\n" +
	"2 1 0:2 / /sys ro,nosuid,nodev,noexec,relatime - sysfs sysfs rw\n"

func TestDetect(t *testing.T) {
	tr := hosttest.Tree(t, map[string]string{
		"proc/self/mountinfo":                     mountinfoText,
		"var/lib/dbus/machine-id":                 "3f1c0a0e5b7d4c2e9a8b6d5c4e3f2a1b\n",
		"sys/devices/virtual/dmi/id/product_name": "KVM\n",
		"sys/devices/virtual/dmi/id/product_uuid": "7a3e0c52-1f4d-4d8b-9b6e-2c1d5e8f9a40\n",
		"sys/class/dmi/id":                        "->../../devices/virtual/dmi/id",
		"kind/product_uuid":                       "0b6f8f1e-58a4-4c4e-8d7a-3e2f1c9b6a50\n",
	})
	rand := bytes.NewReader(bytes.Repeat([]byte{0xaa}, 64))

	m, err := DetectMachineID(tr, rand)
	if err != nil {
		t.Fatal(err)
	}
	if m.DBus != "file" || m.NewID != "aaaaaaaaaaaa4aaaaaaaaaaaaaaaaaaa\n" {
		t.Errorf("machine-id facts %+v", m)
	}

	n, err := DetectProductName(tr, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := ProductNameFacts{
		DMI:     DMIFile{Path: DMIProductName, Exists: true, Target: "/sys/devices/virtual/dmi/id/product_name"},
		Inherit: system.RelAtime,
	}
	if diff := cmp.Diff(want, n); diff != "" {
		t.Errorf("product_name facts (-want +got):\n%s", diff)
	}

	u, err := DetectProductUUID(tr, rand, nil)
	if err != nil {
		t.Fatal(err)
	}
	if u.NewUUID != "" {
		t.Errorf("a node with a product_uuid drew a new one: %q", u.NewUUID)
	}
	if len(u.DMI) != 2 || u.DMI[0].Target != DMIVirtualProductUUID || !u.DMI[1].Exists {
		t.Errorf("product_uuid DMI facts %+v", u.DMI)
	}

	// Applying the plans and detecting again: bound, nothing left to do.
	var actions []plan.Action
	actions = append(actions, PlanProductName(n)...)
	actions = append(actions, PlanProductUUID(u)...)
	if err := plan.Apply(t.Context(), tr, nil, actions, false); err != nil {
		t.Fatal(err)
	}
	n, _ = DetectProductName(tr, nil)
	u, _ = DetectProductUUID(tr, rand, nil)
	if again := plan.Changes(append(PlanProductName(n), PlanProductUUID(u)...)); len(again) != 0 {
		t.Errorf("after applying, still plans %v", again)
	}
	// Through the link target: the Tree follows a file bind only at the
	// path it was mounted on.
	if b, _ := tr.ReadFile(n.DMI.Target, system.LimitTable); string(b) != ProductNameValue {
		t.Errorf("%s reads %q after the bind", n.DMI.Target, b)
	}
}
