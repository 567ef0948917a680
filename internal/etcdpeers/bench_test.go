package etcdpeers

import (
	"testing"
)

// BenchmarkReadMembers: the membership of a file bbolt wrote (128 KiB,
// 500 keys besides the members). The reader visits the root bucket's
// page and the two membership buckets only, so the time does not grow
// with the keys.
func BenchmarkReadMembers(b *testing.B) {
	db := fixture(b, "three-members")
	b.SetBytes(int64(len(db)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ReadMembers(db); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReadMembersLarge: the same membership in a file of 64 MiB
// more (pages past the high-water mark, as in a file etcd grew): what
// step 10 pays beyond reading the file is what it pays above.
func BenchmarkReadMembersLarge(b *testing.B) {
	db := append(fixture(b, "three-members"), make([]byte, 64<<20)...)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ReadMembers(db); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDetectLarge: step 10's whole read of a 64 MiB backend file
// through the System seam: the cost is reading the file (ReadFile reads
// it whole, under LimitDB), not parsing it.
func BenchmarkDetectLarge(b *testing.B) {
	db := append(fixture(b, "three-members"), make([]byte, 64<<20)...)
	tree := hostTree(b, map[string]string{
		"etc/kubernetes/manifests/etcd.yaml": manifest,
		"var/lib/etcd/member/snap/db":        string(db),
	})
	b.SetBytes(int64(len(db)))
	b.ReportAllocs()
	for b.Loop() {
		if f := Detect(tree, "kind-control-plane"); f.Err != nil || len(f.Members) != 3 {
			b.Fatalf("%+v", f)
		}
	}
}
