package tier

import (
	"fmt"
	"strings"

	"github.com/pelletier/go-toml/v2"
)

// CRISettings reads the CRI plugin's snapshotter and restrict_oom_score_adj
// from a containerd config in a schema containerd writes: version 2
// (containerd 1.x, and kind's config.toml), 3 (2.0 and 2.1) or 4 (2.2 on).
// Given `containerd config dump` it reads containerd's effective settings,
// an older file already migrated by containerd's own loader. The
// snapshotter must be there (kind's file and every dump state it);
// restrict_oom_score_adj left out is containerd's default, false.
func CRISettings(config string) (snapshotter string, restrict bool, err error) {
	var cfg struct {
		Version int            `toml:"version"`
		Plugins map[string]any `toml:"plugins"`
	}
	if err := toml.Unmarshal([]byte(config), &cfg); err != nil {
		return "", false, fmt.Errorf("containerd config is no TOML: %w", err)
	}
	var snapPath, restrictPath []string
	switch cfg.Version {
	case 2:
		snapPath = []string{"io.containerd.grpc.v1.cri", "containerd", "snapshotter"}
		restrictPath = []string{"io.containerd.grpc.v1.cri", "restrict_oom_score_adj"}
	case 3, 4:
		snapPath = []string{"io.containerd.cri.v1.images", "snapshotter"}
		restrictPath = []string{"io.containerd.cri.v1.runtime", "restrict_oom_score_adj"}
	default:
		return "", false, fmt.Errorf("containerd config: version %d, want 2, 3 or 4", cfg.Version)
	}
	s, ok := lookup(cfg.Plugins, snapPath).(string)
	if !ok {
		return "", false, fmt.Errorf("containerd config: no plugins.%s", strings.Join(snapPath, "."))
	}
	r, ok := lookup(cfg.Plugins, restrictPath).(bool)
	if !ok && lookup(cfg.Plugins, restrictPath) != nil {
		return "", false, fmt.Errorf("containerd config: plugins.%s is no boolean", strings.Join(restrictPath, "."))
	}
	return s, r, nil
}

// lookup follows path through nested tables; nil where it leads nowhere.
func lookup(m map[string]any, path []string) any {
	var v any = m
	for _, k := range path {
		t, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = t[k]
	}
	return v
}
