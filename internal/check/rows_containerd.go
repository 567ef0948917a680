package check

// This file holds the row about containerd.service's open-file limit, which
// every container of the node inherits (kind #4244).

import (
	"fmt"

	"github.com/kind-entrypoint/entrypoint/internal/containerd"
)

const (
	// fixedNofile is the limit kind's images set before they used
	// infinity (kind PR #760), upstream containerd's until 2.0.
	fixedNofile = 1 << 20
	// nrOpenBumpSystemd is the first systemd that raises fs.nr_open to
	// its maximum when it boots in kind's node (kind #4244: the trixie
	// images of kind v0.32+, systemd 257; the bookworm ones, 252, did not).
	nrOpenBumpSystemd = 256
	nrOpen            = "/proc/sys/fs/nr_open"
)

func (c *checker) containerdNofile() Row {
	const name = "containerd-nofile"
	fix := fmt.Sprintf("containerd hands its limit to every container, and programs that walk every descriptor (closing them at start) take minutes: "+
		"in the image, a drop-in /etc/systemd/system/%s.d/nofile.conf with [Service] LimitNOFILE=%d (kind #4244)", containerd.Unit, fixedNofile)
	n, err := containerd.ReadNofile(c.sys)
	switch {
	case err != nil:
		return Row{name, Warn, "cannot be read: " + err.Error(), fix}
	case n.UnitPath == "":
		return Row{name, Pass, "no " + containerd.Unit + " in the image", ""}
	case n.Value == "":
		return Row{name, Pass, "LimitNOFILE not set in " + n.UnitPath + ": systemd's default", ""}
	}
	set := "LimitNOFILE=" + n.Value + " (" + n.From + ")"
	if hard, ok := n.Hard(); ok {
		if hard > fixedNofile {
			return Row{name, Warn, fmt.Sprintf("%s: above %d", set, fixedNofile), fix}
		}
		return Row{name, Pass, set, ""}
	}
	if !n.Infinite() {
		return Row{name, Pass, set, ""}
	}
	// infinity is fs.nr_open when containerd starts: what it is now, and
	// whether the image's systemd will raise it first.
	open := c.readSysctl(nrOpen, 0)
	sd := containerd.SystemdVersion(c.sys)
	sdText := "the image's systemd version is unknown"
	if sd > 0 {
		sdText = fmt.Sprintf("the image's systemd is %d", sd)
	}
	switch {
	case open.err == nil && open.n > fixedNofile:
		return Row{name, Warn, fmt.Sprintf("%s: containerd gets fs.nr_open, %d", set, open.n), fix}
	case sd >= nrOpenBumpSystemd:
		return Row{name, Warn, fmt.Sprintf("%s, and %s: systemd %d+ raises fs.nr_open to about a billion when the node boots, which containerd then gets", set, sdText, nrOpenBumpSystemd), fix}
	case sd == 0:
		return Row{name, Warn, fmt.Sprintf("%s, and %s: under systemd %d+ (kind v0.32+ images) containerd gets about a billion", set, sdText, nrOpenBumpSystemd), fix}
	}
	return Row{name, Pass, fmt.Sprintf("%s: fs.nr_open, which %s leaves as it is", set, sdText), ""}
}
