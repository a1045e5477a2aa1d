// Package version is the one place amk's binaries (amkctl, scheduler,
// gpuworker) learn their own version: a release build stamps it with
//
//	go build -ldflags "-X github.com/amk-dev/amk/internal/version.stamp=v1.2.3"
//
// and otherwise it comes from the module build information Go records in
// every binary (the module version, or "devel", plus the VCS revision when
// the build recorded one). The version is shown by --version, stamped into
// flywheel corpus records and reported in worker fingerprints and metrics.
package version
