package system

// WalkOnly makes t resolve its paths in user space, as on a kernel without
// openat2, so that tests cover both ways of staying inside the root.
func WalkOnly(t *Tree) *Tree {
	t.walk = true
	return t
}

// Resolve is NewResolver(sys).Resolve(p), for tests of one path.
func Resolve(sys System, p string) (string, error) {
	return NewResolver(sys).Resolve(p)
}
