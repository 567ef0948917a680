package etcdpeers

import (
	"fmt"
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

// BenchmarkDetect: step 10's detection of a control plane's membership
// (the manifest, the database, the peers file and the unit) through the
// System seam, with a database of 1, 64 and 128 MiB: a valid file that
// bbolt wrote, padded with free pages (beyond its high-water mark, as in
// a file etcd grew), written to the benchmark's temp dir. Read by pages,
// the cost is the same for each size (issue 53: it was the file's size).
func BenchmarkDetect(b *testing.B) {
	for _, mib := range []int{1, 64, 128} {
		b.Run(fmt.Sprintf("%dMiB", mib), func(b *testing.B) {
			db := fixture(b, "three-members")
			db = append(db, make([]byte, mib<<20-len(db))...)
			tree := hostTree(b, map[string]string{
				"etc/kubernetes/manifests/etcd.yaml": manifest,
				"var/lib/etcd/member/snap/db":        string(db),
			})
			db = nil
			b.ReportAllocs()
			for b.Loop() {
				if f := Detect(tree, "kind-control-plane"); f.Err != nil || len(f.Members) != 3 {
					b.Fatalf("%+v", f)
				}
			}
		})
	}
}

// BenchmarkDetectReadCap: the most a corrupt database can cost step 10:
// a walk led through more than LimitDB of pages (wideDB), which stops
// there.
func BenchmarkDetectReadCap(b *testing.B) {
	tree := hostTree(b, map[string]string{
		"etc/kubernetes/manifests/etcd.yaml": manifest,
		"var/lib/etcd/member/snap/db":        string(wideDB(LimitDB>>20 + 4)),
	})
	b.ReportAllocs()
	for b.Loop() {
		if f := Detect(tree, "kind-control-plane"); f.Err == nil {
			b.Fatal("no error")
		}
	}
}
