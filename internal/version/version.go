// Package version says which build of klique is running.
package version

import "runtime/debug"

// Version is set at build time with -ldflags "-X .../internal/version.Version=v1.2.3".
var Version = "dev"

// String returns the version with the commit it was built from, when known.
func String() string {
	v := Version
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				v += " (" + s.Value[:12] + ")"
			}
		}
	}
	return v
}
