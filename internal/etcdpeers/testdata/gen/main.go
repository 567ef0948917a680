// Command gen writes the bbolt fixtures of internal/etcdpeers with bbolt
// itself, laid out as etcd v3.6 lays out its backend: a "members" bucket
// of JSON records keyed by the hex member ID, a "members_removed"
// bucket, and, for realism, a "key" bucket of revisions that pushes the
// file past one page. See ../README.md.
package main

import (
	"encoding/json"
	"fmt"
	"log"
	"os"
	"strconv"

	bolt "go.etcd.io/bbolt"
)

type member struct {
	ID         uint64   `json:"id"`
	PeerURLs   []string `json:"peerURLs"`
	IsLearner  bool     `json:"isLearner,omitempty"`
	Name       string   `json:"name,omitempty"`
	ClientURLs []string `json:"clientURLs,omitempty"`
}

func cp(id uint64, name, ip string) member {
	return member{ID: id, Name: name, PeerURLs: []string{"https://" + ip + ":2380"}, ClientURLs: []string{"https://" + ip + ":2379"}}
}

func write(file string, members []member, removed []uint64, keys int) {
	os.Remove(file)
	db, err := bolt.Open(file, 0o600, nil)
	if err != nil {
		log.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, name := range []string{"alarm", "auth", "authRoles", "authUsers", "cluster", "key", "lease", "members", "members_removed", "meta"} {
			if _, err := tx.CreateBucket([]byte(name)); err != nil {
				return err
			}
		}
		mb := tx.Bucket([]byte("members"))
		for _, m := range members {
			v, _ := json.Marshal(m)
			if err := mb.Put([]byte(strconv.FormatUint(m.ID, 16)), v); err != nil {
				return err
			}
		}
		rb := tx.Bucket([]byte("members_removed"))
		for _, id := range removed {
			if err := rb.Put([]byte(strconv.FormatUint(id, 16)), []byte("removed")); err != nil {
				return err
			}
		}
		kb := tx.Bucket([]byte("key"))
		for i := range keys {
			if err := kb.Put(fmt.Appendf(nil, "%016x_%08x", i, 0), fmt.Appendf(nil, "/registry/configmaps/default/cm-%d", i)); err != nil {
				return err
			}
		}
		return tx.Bucket([]byte("cluster")).Put([]byte("clusterVersion"), []byte("3.6.0"))
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := db.Close(); err != nil {
		log.Fatal(err)
	}
}

func main() {
	write("../one-member.db", []member{cp(0x8e9e05c52164694d, "kind-control-plane", "172.18.0.3")}, nil, 10)
	three := []member{
		cp(0x2d1b3f2a0c0e4a11, "kind-control-plane", "172.18.0.3"),
		cp(0x5a8e0b1f3c2d4e22, "kind-control-plane2", "172.18.0.5"),
		cp(0x7c3d2e1f0a9b8c33, "kind-control-plane3", "172.18.0.4"),
	}
	// A fourth member, removed: its record is gone, its ID listed.
	write("../three-members.db", three, []uint64{0x1111111111111111}, 500)
	learner := append([]member{}, three...)
	learner[2].IsLearner = true
	// A member added but never started: no name yet.
	learner = append(learner, member{ID: 0x9d4e3f2a1b0c0d44, PeerURLs: []string{"https://172.18.0.7:2380"}})
	write("../learner.db", learner, nil, 10)
	var many []member
	for i := range 64 {
		many = append(many, cp(uint64(0x1000+i), fmt.Sprintf("cp%02d", i), fmt.Sprintf("10.0.%d.%d", i/200, i%200+2)))
	}
	write("../many-members.db", many, nil, 10)
	v6 := []member{
		cp(0x2d1b3f2a0c0e4a11, "kind-control-plane", "[fc00:f853:ccd:e793::3]"),
		cp(0x5a8e0b1f3c2d4e22, "kind-control-plane2", "[fc00:f853:ccd:e793::5]"),
		cp(0x7c3d2e1f0a9b8c33, "kind-control-plane3", "[fc00:f853:ccd:e793::4]"),
	}
	write("../ipv6.db", v6, nil, 10)
}
