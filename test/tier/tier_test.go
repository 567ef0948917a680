package tier

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kind-entrypoint/entrypoint/internal/system"
)

func TestEntrypointLines(t *testing.T) {
	log := "INFO: detected cgroup v1\nWelcome to Debian\nWARN: cgroupns not enabled!\n[certs] Using existing ca\nERROR: boom\nINFO:no space\n"
	if diff := cmp.Diff([]string{"INFO: detected cgroup v1", "WARN: cgroupns not enabled!", "ERROR: boom"}, EntrypointLines(log)); diff != "" {
		t.Errorf("EntrypointLines (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"INFO: detected cgroup v1", "WARN: cgroupns not enabled!", "[certs] Using existing ca", "ERROR: boom"}, EntrypointLines(log, "[certs]")); diff != "" {
		t.Errorf("EntrypointLines with [certs] (-want +got):\n%s", diff)
	}
}

func TestKindRunArgs(t *testing.T) {
	for _, tc := range []struct {
		engine     string
		node       KindNode
		want, lack []string
	}{
		{"docker", KindNode{Name: "n1", Network: "kind", Cgroupns: "private"},
			[]string{"--hostname n1", "--network kind", "--privileged", "--tmpfs /tmp", "--tmpfs /run", "--volume /var", "--volume /lib/modules:/lib/modules:ro", "--cgroupns=private", "--tty", "--restart=on-failure:1", "--init=false", "--security-opt seccomp=unconfined", "--security-opt apparmor=unconfined"},
			[]string{"container=podman"}},
		{"docker", KindNode{Name: "n1", Network: "kind", Cgroupns: "host", NoTTY: true},
			[]string{"--cgroupns=host"}, []string{"--tty"}},
		{"podman", KindNode{Name: "n2", Network: "net", Cgroupns: "private", Cluster: "c", Volume: "vol"},
			[]string{"--hostname n2", "--network net", "--privileged", "--volume vol:/var:suid,exec,dev", "--label io.x-k8s.kind.cluster=c", "--label io.x-k8s.kind.role=worker", "-e container=podman", "--tty"},
			[]string{"--volume /var", "--restart"}},
	} {
		args := " " + strings.Join(KindRunArgs(tc.engine, tc.node), " ") + " "
		for _, w := range tc.want {
			if !strings.Contains(args, " "+w+" ") {
				t.Errorf("%s %+v: no %q in%s", tc.engine, tc.node, w, args)
			}
		}
		for _, l := range tc.lack {
			if strings.Contains(args, " "+l) {
				t.Errorf("%s %+v: %q in%s", tc.engine, tc.node, l, args)
			}
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("KindRunArgs of an engine kind has no provider for: no panic")
		}
	}()
	KindRunArgs("lxc", KindNode{})
}

func TestCgroupV1Hierarchies(t *testing.T) {
	ms, err := system.ParseMountinfo([]byte(`25 1 0:23 / /sys rw - sysfs sysfs rw
30 25 0:26 / /sys/fs/cgroup ro - tmpfs tmpfs ro
31 30 0:27 / /sys/fs/cgroup/systemd rw - cgroup cgroup rw,name=systemd
32 30 0:28 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct
33 32 0:28 /kubelet /sys/fs/cgroup/cpu,cpuacct/kubelet rw - cgroup cgroup rw,cpu,cpuacct
34 30 0:29 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw
`))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"systemd", "cpu,cpuacct"}, cgroupV1Hierarchies(ms)); diff != "" {
		t.Errorf("cgroupV1Hierarchies (-want +got):\n%s", diff)
	}
}

func TestCRISettings(t *testing.T) {
	for _, tc := range []struct {
		name, dump, snapshotter string
		restrict                bool
		err                     string
	}{
		{"version 2", "version = 2\n[plugins]\n  [plugins.\"io.containerd.grpc.v1.cri\"]\n    restrict_oom_score_adj = true\n    [plugins.\"io.containerd.grpc.v1.cri\".containerd]\n      snapshotter = \"fuse-overlayfs\"\n",
			"fuse-overlayfs", true, ""},
		{"version 3", "version = 3\n[plugins.'io.containerd.cri.v1.images']\n  snapshotter = 'native'\n[plugins.'io.containerd.cri.v1.runtime']\n  restrict_oom_score_adj = false\n",
			"native", false, ""},
		{"version 4", "version = 4\n[plugins.'io.containerd.cri.v1.images']\n  snapshotter = 'overlayfs'\n[plugins.'io.containerd.cri.v1.runtime']\n  restrict_oom_score_adj = true\n",
			"overlayfs", true, ""},
		// the version 2 keys in a version 3 dump are not what containerd reads
		{"version 3 with version 2 keys", "version = 3\n[plugins.\"io.containerd.grpc.v1.cri\".containerd]\n  snapshotter = \"native\"\n", "", false, "no plugins.io.containerd.cri.v1.images.snapshotter"},
		// kind's own file leaves it out: containerd's default
		{"no restrict", "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".containerd]\n  snapshotter = \"overlayfs\"\n", "overlayfs", false, ""},
		{"restrict no boolean", "version = 4\n[plugins.'io.containerd.cri.v1.images']\n  snapshotter = 'overlayfs'\n[plugins.'io.containerd.cri.v1.runtime']\n  restrict_oom_score_adj = 'yes'\n", "", false, "is no boolean"},
		{"version 1", "version = 1\n", "", false, "version 1"},
		{"no TOML", "version = [", "", false, "no TOML"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			snap, restrict, err := CRISettings(tc.dump)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("CRISettings: err %v, want one with %q", err, tc.err)
				}
				return
			}
			if err != nil || snap != tc.snapshotter || restrict != tc.restrict {
				t.Errorf("CRISettings = %q, %v, %v; want %q, %v", snap, restrict, err, tc.snapshotter, tc.restrict)
			}
		})
	}
}
