package userns

import (
	"slices"
	"strings"
	"testing"
)

// FuzzMissing: for any cgroup.controllers content, a required controller
// is reported missing exactly when it is not one of the blank-separated
// words (never a prefix: "cpuset" is not "cpu"); the list keeps Required's
// order; the error names every missing controller and nothing else; and
// once the missing ones are added, none is missing.
func FuzzMissing(f *testing.F) {
	for _, s := range []string{
		"cpuset cpu io memory pids\n", "cpuset cpu io memory hugetlb pids rdma misc\n",
		"cpuset io memory\n", "", "cpu\tmemory\r\npids", "cpuset cpuacct memoryx pids_",
		"cpu memory pids cpu", "\x00cpu memory\xffpids",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, controllers string) {
		missing := Missing(controllers)
		words := strings.Fields(controllers)
		var want []string
		for _, c := range Required {
			if !slices.Contains(words, c) {
				want = append(want, c)
			}
		}
		if !slices.Equal(missing, want) {
			t.Fatalf("Missing(%q) = %q, want %q", controllers, missing, want)
		}
		err := MissingError(missing)
		if (err == nil) != (len(missing) == 0) {
			t.Fatalf("MissingError(%q) = %v", missing, err)
		}
		if err != nil {
			msg := err.Error()
			if !strings.HasPrefix(msg, "UserNS: ") {
				t.Fatalf("error %q lacks the reference's prefix", msg)
			}
			named := strings.FieldsFunc(msg, func(r rune) bool { return r == ' ' || r == ',' })
			for _, c := range Required {
				if slices.Contains(named, c) != slices.Contains(missing, c) {
					t.Fatalf("error %q and missing %q disagree about %s", msg, missing, c)
				}
			}
		}
		if again := Missing(controllers + " " + strings.Join(missing, " ")); len(again) != 0 {
			t.Fatalf("still missing %q after adding %q", again, missing)
		}
		// What Plan sees: Detect trims the file.
		if _, err := Plan(Facts{NofileHard: MinNofile, CgroupV2: true, Controllers: strings.TrimSpace(controllers)}); (err == nil) != (len(missing) == 0) {
			t.Fatalf("Plan and Missing disagree on %q: %v", controllers, err)
		}
	})
}
