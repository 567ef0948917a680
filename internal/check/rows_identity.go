package check

// This file holds the rows about the node's identity files: the DMI
// product name and uuid.

import (
	"cmp"
	"fmt"
	"strings"

	"github.com/kind-entrypoint/entrypoint/internal/identity"
)

func (c *checker) dmi() Row {
	const name = "dmi"
	pn, nameErr := c.st.ProductName.Get()
	pu, uuidErr := c.st.ProductUUID.Get()
	if err := cmp.Or(nameErr, uuidErr); err != nil {
		return Row{name, Fail, err.Error(), unreadableHint}
	}
	var parts []string
	found := false
	for _, d := range append([]identity.DMIFile{pn.DMI}, pu.DMI...) {
		v := "absent"
		if d.Exists {
			found = true
			v = "present"
			if d.Target != d.Path {
				v += " (-> " + d.Target + ")"
			}
			if d.Bound {
				v += ", faked already"
			}
		}
		parts = append(parts, d.Path+" "+v)
	}
	obs := strings.Join(parts, "; ")
	if pu.Current != nil && pu.NewUUID != "" {
		return Row{name, Warn, obs + fmt.Sprintf("; %s is not a UUID", identity.ProductUUID),
			"fix_product_uuid replaces it with a new UUID: the node's system UUID changes"}
	}
	if !found {
		return Row{name, Pass, "no DMI files (WSL2, some VMs): nothing to fake", ""}
	}
	return Row{name, Pass, obs, ""}
}
